package node

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/state"
)

var (
	foundSelf, foundTwo = netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	foundList           = []netip.Addr{foundSelf, foundTwo}
	foundAt             = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// explicitNode is a fresh node of the list [192.0.2.1 192.0.2.2] with
// cluster.bootstrap explicit, whose peer answers with peers.
func explicitNode(store *memStore, peers *askedPeers, founder string) (*Node, Snapshot) {
	cfg := &config.Config{Cluster: config.Cluster{Name: "etcd-main", Bootstrap: config.BootstrapExplicit, Founder: founder},
		Agent: config.Agent{CallTimeout: time.Second}}
	n := &Node{Deps: Deps{Settings: SettingsFrom(cfg), Store: store, Peers: peers, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return foundAt }},
		scheme: identity.SchemeFrom(cfg), state: store.st, logged: map[string]string{}}
	n.saved = n.state.Clone()
	return n, Snapshot{List: foundList, ListOK: true, Self: n.scheme.For(foundSelf)}
}

// An approval founds one cluster. Once a founding of this node may have
// run, the approval it used, or any given before it, is spent: a node
// that lost its data never founds again on it. A founding recorded but
// never started spends nothing; a later approval is a new act. So does
// joining a cluster: an approval given before it founds nothing later.
func TestAnApprovalFoundsOnce(t *testing.T) {
	approval := func(at time.Time) state.Operator {
		return state.Operator{BootstrapApproval: &state.Approval{List: addrStrings(foundList), At: at}}
	}
	for _, tc := range []struct {
		name    string
		founded *state.Founding
		op      state.Operator
		want    bool
		// memberSince: when the node last became a member of a cluster.
		memberSince time.Time
	}{
		{"no approval", nil, state.Operator{}, false, time.Time{}},
		{"an approval of this list", nil, approval(foundAt), true, time.Time{}},
		{"an approval of another list", nil, state.Operator{BootstrapApproval: &state.Approval{List: []string{"192.0.2.1"}, At: foundAt}}, false, time.Time{}},
		{"the approval a founding used", &state.Founding{At: foundAt.Add(time.Second), Started: true}, approval(foundAt), false, time.Time{}},
		{"an approval given with the founding", &state.Founding{At: foundAt, Started: true}, approval(foundAt), false, time.Time{}},
		{"a founding that never started spends nothing", &state.Founding{At: foundAt.Add(time.Second)}, approval(foundAt), true, time.Time{}},
		{"a new approval after a founding", &state.Founding{At: foundAt.Add(-time.Hour), Started: true}, approval(foundAt), true, time.Time{}},
		{"an approval given before this node joined a cluster (two approved at once: the other founded)", nil, approval(foundAt), false, foundAt.Add(time.Second)},
		{"an approval given after it joined one (disaster recovery)", nil, approval(foundAt), true, foundAt.Add(-time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, _ := explicitNode(&memStore{st: state.State{Founded: tc.founded, MemberSince: tc.memberSince}}, &askedPeers{}, "")
			if got := n.approved(tc.op, foundList); got != tc.want {
				t.Errorf("approved %v, want %v", got, tc.want)
			}
		})
	}
}

// A fresh node in explicit mode answers "explicit", naming its
// cluster.founder; it gives no bootstrap promise (and records none); while
// it founds, before its member starts, it answers "founding".
func TestAnExplicitNodesAnswer(t *testing.T) {
	store := &memStore{}
	n, s := explicitNode(store, &askedPeers{}, "192.0.2.1")
	a := n.ownAnswer(s)
	if a.Phase != consent.Explicit || a.Founder != "192.0.2.1" || !strings.Contains(a.Detail, "operator's act") {
		t.Errorf("a fresh explicit node answers %+v, want phase explicit with its founder", a)
	}
	n.publish(s)
	p := n.Promise(addrStrings(foundList))
	if p.Phase != consent.Explicit || len(p.Promised) > 0 || store.promise != nil {
		t.Errorf("asked for a promise, an explicit node answers %+v and records %+v: want no consent and no promise", p, store.promise)
	}
	if ok, _ := p.Consents(consent.Answer{Cluster: p.Cluster, Token: p.Token, Node: p.Node, List: p.List}); ok {
		t.Error("its answer to a promise counts as consent")
	}
	n.state.Founded = &state.Founding{At: foundAt, Via: state.ViaFounder}
	if a := n.ownAnswer(s); a.Phase != consent.Founding {
		t.Errorf("a node founding answers %s, want founding", a.Phase)
	}
	n.state.Founded.Started = true
	if a := n.ownAnswer(s); a.Phase != consent.Founding {
		t.Errorf("a node whose founded member started, and is not yet seen in its cluster, answers %s; want founding: its data dir may not show it yet", a.Phase)
	}
	n.state.WasMember, n.state.ClusterID = true, "c1"
	if a := n.ownAnswer(s); a.Phase != consent.Member {
		t.Errorf("a node that founded, was a member and lost its data answers %s; want member", a.Phase)
	}
	n.state.WasMember, n.state.ClusterID = false, ""
	n.Settings.Bootstrap = config.BootstrapConsent
	n.state.Founded = nil
	if a := n.ownAnswer(s); a.Phase != consent.Fresh {
		t.Errorf("a fresh consent node answers %s, want fresh", a.Phase)
	}
}

// A founder marks its founding, shows the mark, and asks the other nodes
// once more before it starts: a node that began founding meanwhile makes
// it stand down, its state as before.
func TestAFounderStandsDownForAnotherFounding(t *testing.T) {
	clean := consent.Answer{Cluster: "etcd-main", Token: "etcd-main", Node: foundTwo.String(), List: addrStrings(foundList), Phase: consent.Explicit}
	founding := clean
	founding.Phase = consent.Founding
	for _, tc := range []struct {
		name  string
		other consent.Answer
		goes  bool
	}{
		{"nobody else founds", clean, true},
		{"the other node began founding", founding, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := &memStore{st: state.State{ClusterID: "c1", MemberID: "m1", WasMember: true}}
			peers := &askedPeers{answers: map[netip.Addr]consent.Answer{foundTwo: tc.other}}
			n, s := explicitNode(store, peers, "")
			s.Consent = consent.Verdict{Granted: true, Approved: true, Founding: true}
			s.Decision = localmember.Decision{Kind: localmember.Found}
			if got := n.markFounding(context.Background(), s, "etcd-main-founded-x"); got != tc.goes {
				t.Fatalf("founding goes ahead: %v, want %v", got, tc.goes)
			}
			f := store.st.Founded
			switch {
			case tc.goes && (f == nil || f.Via != state.ViaApproval || f.Token != "etcd-main-founded-x" || f.Started || store.st.ClusterID != ""):
				t.Errorf("a founding that goes ahead is recorded as %+v (cluster %q); want it marked, not started yet, pinned to no cluster", f, store.st.ClusterID)
			case !tc.goes && (f != nil || store.st.ClusterID != "c1" || store.st.MemberID != "m1"):
				t.Errorf("a founding that stood down left %+v (cluster %q, member %q); want the state as before", f, store.st.ClusterID, store.st.MemberID)
			}
		})
	}
}
