package node

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// Promise answers another node that asks this one to bootstrap list with
// it (the agent peer endpoint's POST). A fresh node that sees the same
// list agrees, and records the promise before it says so; while a promise
// for another list stands, it refuses: the bootstrap it agreed to may have
// happened, and its only witness may be silent now.
func (n *Node) Promise(list []string) consent.Answer {
	n.promiseMu.Lock()
	defer n.promiseMu.Unlock()
	a := n.Answer()
	if a.Phase != consent.Fresh && a.Phase != consent.NotListed {
		return a // it does not consent; Consents tells the asker why
	}
	if mode := n.Settings.Bootstrap; mode != config.BootstrapConsent {
		// It never bootstraps by consent, so it promises nothing: its answer
		// is no consent to the asker, and no promise binds it.
		a.Phase, a.Detail = consent.Explicit, "it forms a cluster only on an operator's act (cluster.bootstrap "+mode+"); it gives no bootstrap promise"
		return a
	}
	if a.Approved {
		// It founds a cluster of its own on the operator's approval; a
		// bootstrap of the list beside it would be a second cluster.
		return a
	}
	// A node that holds no data promises even when its own list differs
	// (hosts see a list change at different times): it then starts no
	// bootstrap of its own list until this one is known abandoned.
	p, err := n.Store.LoadPromise()
	switch {
	case err != nil:
		a.Phase, a.Detail = consent.Starting, "cannot read its bootstrap promise: "+err.Error()
		return a
	case p != nil && !slices.Equal(p.List, list):
		return promised(a, p)
	case p == nil || !slices.Equal(p.List, list):
		if err := n.Store.SavePromise(&state.Promise{List: slices.Clone(list), At: n.Now().UTC()}); err != nil {
			a.Phase, a.Detail = consent.Starting, "cannot record a bootstrap promise: "+err.Error()
			return a
		}
		n.Log.Info("agreed to bootstrap the listed nodes together; no other list until this one is known abandoned", "list", list)
	}
	a.Promised = slices.Clone(list)
	return a
}

// promised is the answer of a node that holds a promise for another list.
func promised(a consent.Answer, p *state.Promise) consent.Answer {
	a.Phase, a.Promised = consent.Promised, p.List
	a.Detail = fmt.Sprintf("it agreed at %s to bootstrap [%s], and that bootstrap is not known to have been abandoned",
		p.At.Format("2006-01-02T15:04:05Z"), strings.Join(p.List, " "))
	return a
}

// promiseStands adjusts this node's own answer for its promise: a promise
// for another list makes it refuse, and so does a promise it cannot read.
// An approval does not outweigh it: the bootstrap this node agreed to may
// have formed a cluster that waits for it, and founding another beside it
// would split the nodes in two.
func (n *Node) promiseStands(a consent.Answer) consent.Answer {
	if a.Phase != consent.Fresh && a.Phase != consent.Explicit {
		return a
	}
	p, err := n.Store.LoadPromise()
	switch {
	case err != nil:
		// A promise it cannot read may stand: answering fresh could let a
		// bootstrap of another list go ahead beside the one it agreed to.
		a.Phase, a.Detail = consent.Starting, "cannot read its bootstrap promise: "+err.Error()
		return a
	case p == nil:
		return a
	}
	if !slices.Equal(p.List, a.List) {
		return promised(a, p)
	}
	a.Promised = p.List
	return a
}

// releasePromise drops a promise that no longer binds: this node is a
// member now, or every node of the promised list answers that it started
// no bootstrap of it and no longer wants one.
func (n *Node) releasePromise(ctx context.Context, s Snapshot) {
	n.promiseMu.Lock()
	defer n.promiseMu.Unlock()
	p, err := n.Store.LoadPromise()
	if err != nil || p == nil {
		return
	}
	release, why := n.state.WasMember, "this node is a member of a cluster"
	if !release && !slices.Equal(p.List, addrStrings(s.List)) {
		release, why = n.abandoned(ctx, s, p.List)
	}
	if !release {
		return
	}
	if err := n.Store.SavePromise(nil); err != nil {
		n.Log.Error("cannot drop the bootstrap promise", "error", err)
		return
	}
	n.Log.Info("bootstrap promise released", "list", p.List, "why", why)
}

// abandoned reports whether no node of list started or still wants a
// bootstrap of it.
func (n *Node) abandoned(ctx context.Context, s Snapshot, list []string) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, n.Settings.CallTimeout)
	defer cancel()
	for _, a := range n.askAll(ctx, s.Self.IP, identity.ParseAddrs(list), false, nil) {
		// Only a positive answer counts: a node that is silent, or whose
		// agent has not looked yet, may have started that bootstrap. One
		// that is bootstrapping another list did not start this one: a
		// node holds one bootstrap at a time, and this one needed it.
		otherBootstrap := a.Err == nil && a.Answer.Phase == consent.Bootstrapping && !slices.Equal(a.Answer.List, list)
		if (startedNothing(a) != "" && !otherBootstrap) || slices.Equal(a.Answer.List, list) {
			return false, ""
		}
	}
	return true, "every node of the promised list answers that it holds no data, started no bootstrap of it and no longer wants one"
}
