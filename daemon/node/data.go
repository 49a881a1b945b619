package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
)

// Data is what this node's member data holds, for the agent peer
// endpoint (consent.DataReport): how far its write-ahead log goes is read
// from the data dir, also while the member runs; the revision from the
// backend, or while a running member holds it, from the member's Status.
// A cluster that lost its quorum for good is recovered from the survivor
// whose log goes furthest.
func (n *Node) Data(ctx context.Context) consent.DataReport { return n.DataOf(ctx, n.Last().Self) }

// DataOf is Data for a node whose identity is self (a look that has not
// run a pass: etcdlet status).
func (n *Node) DataOf(ctx context.Context, self identity.Member) consent.DataReport {
	r := consent.DataReport{Node: self.IP.String()}
	s, err := n.DataDir.Survey()
	switch {
	case errors.Is(err, datadir.ErrNoIdentity):
		return r // no data
	case err != nil:
		r.Error = err.Error()
		return r
	}
	r.MemberID, r.ClusterID = membership.IDString(s.MemberID), membership.IDString(s.ClusterID)
	r.LastTerm, r.LastIndex, r.Commit, r.Revision = s.LastTerm, s.LastIndex, s.Commit, s.Revision
	if ret, err := n.Store.LoadRetirement(); err == nil && ret != nil && parseID(ret.ClusterID) == s.ClusterID {
		r.RetiredFor = ret.By
	}
	if !s.BackendInUse {
		return r
	}
	r.Running, r.RevisionUnknown = true, true
	if self.ClientURL == "" {
		r.Note = "this node's address is not known yet to ask its member"
		return r
	}
	ctx, cancel := context.WithTimeout(ctx, n.Settings.CallTimeout)
	defer cancel()
	st, err := n.Cluster.Status(ctx, self.ClientURL)
	if err != nil {
		// A member that started without quorum serves no client until it
		// is part of one: its log says how far it goes all the same.
		r.Note = fmt.Sprintf("its member does not answer: %v", err)
		return r
	}
	r.Revision, r.RevisionUnknown = st.GetHeader().GetRevision(), false
	return r
}
