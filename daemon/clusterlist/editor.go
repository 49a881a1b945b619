package clusterlist

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
)

// Editor changes the list stored in one cluster, from any host: the
// operator's side of members.source cluster.
type Editor struct {
	// Rules are the list rules every list must pass (replicas, TLS off
	// loopback); Scheme names members as the agents do.
	Rules  config.ListRules
	Scheme identity.Scheme
	// Client reaches the cluster ClusterID (Choose picked it).
	Client    *clientv3.Client
	ClusterID uint64
	Timeout   time.Duration
	// By says where the edit is made, for the record.
	By string
	// Force edits although a change is in flight.
	Force bool
}

// ErrInFlight says that the cluster has not carried out the stored list
// yet.
var ErrInFlight = errors.New("a change of the member list is in flight")

// Change applies e to the stored list and stores the result, if: the
// result passes the list rules and is not empty; and the cluster carries
// out the stored list already (nothing in flight), unless the edit only
// takes back a join that has not finished, or Force. The store is a
// compare-and-swap on the revision read: an edit made meanwhile from
// another host is never overwritten (ErrChanged).
func (ed Editor) Change(ctx context.Context, e Edit) (Stored, error) {
	stored, found, err := Read(ctx, ed.Client, ed.ClusterID, ed.Timeout)
	if err != nil {
		return Stored{}, err
	}
	var current []netip.Addr
	if found {
		if current, err = Check(ed.Rules, ed.where(stored), stored.Addresses); err != nil {
			if e.Kind != Set {
				return Stored{}, fmt.Errorf("the stored list breaks the list rules, so only 'etcdlet members set' replaces it: %w", err)
			}
			current = nil
		}
	} else if e.Kind != Set {
		return Stored{}, fmt.Errorf("%w (cluster %x): store the first one with 'etcdlet members set <IP>...'", ErrNoList, ed.ClusterID)
	}
	next, err := e.Apply(current)
	if err != nil {
		return Stored{}, fmt.Errorf("%s: %w", e, err)
	}
	if _, err := Check(ed.Rules, "the list after '"+e.String()+"'", identity.AddrStrings(next)); err != nil {
		return Stored{}, err
	}
	if found && current != nil && !ed.Force {
		if err := ed.settled(ctx, e, current); err != nil {
			return Stored{}, err
		}
	}
	rec := Record{Addresses: identity.AddrStrings(next), Change: e.String(), By: ed.By, At: time.Now().UTC()}
	rev, err := Commit(ctx, ed.Client, ed.ClusterID, stored.Revision, rec, ed.Timeout)
	if err != nil {
		return Stored{}, err
	}
	return Stored{Record: rec, Revision: rev}, nil
}

// settled refuses an edit while the cluster has not carried out the
// stored list, unless the edit takes back an unfinished join.
func (ed Editor) settled(ctx context.Context, e Edit, current []netip.Addr) error {
	members, err := ed.members(ctx)
	if err != nil {
		return err
	}
	listed := ed.Scheme.ForAll(current)
	pending := Pending(listed, members)
	if len(pending) == 0 || e.TakesBack(listed, members) {
		return nil
	}
	return fmt.Errorf("%w, not carried out yet:\n  %s\nwait until 'etcdlet status --wait' returns 0; a join that cannot finish (a host that never came up) may be taken back with 'etcdlet members remove <IP>'; --force edits anyway", ErrInFlight, strings.Join(pending, "\n  "))
}

// Pending says what of the stored list the cluster has not carried out
// yet (the package's Pending, on the cluster's members now).
func (ed Editor) Pending(ctx context.Context, s Stored) ([]string, error) {
	addrs, err := Check(ed.Rules, ed.where(s), s.Addresses)
	if err != nil {
		return nil, err
	}
	members, err := ed.members(ctx)
	if err != nil {
		return nil, err
	}
	return Pending(ed.Scheme.ForAll(addrs), members), nil
}

func (ed Editor) members(ctx context.Context) ([]membership.Member, error) {
	ctx, cancel := context.WithTimeout(ctx, ed.Timeout)
	defer cancel()
	resp, err := ed.Client.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the members, to see whether a change is in flight: %w", err)
	}
	members := make([]membership.Member, len(resp.Members))
	for i, m := range resp.Members {
		members[i] = membership.Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, IsLearner: m.IsLearner}
	}
	return members, nil
}

func (ed Editor) where(s Stored) string {
	return fmt.Sprintf("member list of cluster %x at revision %d", ed.ClusterID, s.Revision)
}

// Describe says how the stored list and this node's copy stand, in one
// line: the revision and last change, and whether the copy the agent acts
// on holds that list.
func (ed Editor) Describe(ctx context.Context) string {
	stored, found, err := Read(ctx, ed.Client, ed.ClusterID, ed.Timeout)
	switch {
	case err != nil:
		return "not read from the cluster: " + err.Error()
	case !found:
		return fmt.Sprintf("%v (cluster %x); store one with 'etcdlet members set <IP>...'", ErrNoList, ed.ClusterID)
	}
	says := fmt.Sprintf("kept in cluster %x, revision %d", ed.ClusterID, stored.Revision)
	if stored.Change != "" {
		says += fmt.Sprintf(" (last change: %s, by %s, at %s)", stored.Change, stored.By, stored.At.Format(time.RFC3339))
	}
	addrs, err := Check(ed.Rules, ed.where(stored), stored.Addresses)
	if err != nil {
		return says + "; REFUSED, the last good list stays in force: " + err.Error()
	}
	kept, errs := ed.Rules.DesiredMembers()
	if len(errs) > 0 || !slices.Equal(kept, addrs) {
		return says + fmt.Sprintf("; this node's copy (%s) does not hold it yet: the agent writes it there when it reads the list next; if that lasts, see the agent's log (component member-list)", ed.Rules.MembersFile())
	}
	return says + "; this node's copy holds it"
}
