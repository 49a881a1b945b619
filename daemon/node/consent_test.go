package node

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/state"
)

// askedPeers answers for the other nodes: an answer, or an error.
type askedPeers struct {
	answers map[netip.Addr]consent.Answer
	errs    map[netip.Addr]error
	mu      sync.Mutex
	sources []netip.Addr // the source address of every ask
}

func (p *askedPeers) Ask(ctx context.Context, n netip.Addr) (consent.Answer, error) {
	return p.Promise(ctx, n, nil)
}

func (p *askedPeers) Promise(ctx context.Context, n netip.Addr, list []string) (consent.Answer, error) {
	src, _ := consent.SourceOf(ctx)
	p.mu.Lock()
	p.sources = append(p.sources, src)
	p.mu.Unlock()
	if err := p.errs[n]; err != nil {
		return consent.Answer{}, err
	}
	a := p.answers[n]
	a.Promised = list
	return a, nil
}

func (p *askedPeers) Wake(netip.Addr) {}

// A node whose agent refuses to answer this one (403: it does not take
// this node for a listed peer) blocks a bootstrap like an answer "no",
// both in the list and among the nodes of an earlier list; a node that
// cannot be reached blocks it too, as silence.
func TestAnAgentsRefusalIsNoConsent(t *testing.T) {
	self, two, earlier := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	list := []netip.Addr{self, two}
	refused := &consent.RefusedError{Reason: "only a node of this node's member list may ask for a promise or a wake-up"}
	silent := errors.New("connection refused")
	cfg := &config.Config{Cluster: config.Cluster{Name: "etcd-main", Bootstrap: config.BootstrapConsent}, Agent: config.Agent{CallTimeout: time.Second}}
	fresh := func(node netip.Addr) consent.Answer {
		return consent.Answer{Cluster: "etcd-main", Token: "etcd-main", Node: node.String(), List: addrStrings(list), Phase: consent.Fresh}
	}
	tests := []struct {
		name    string
		errs    map[netip.Addr]error
		granted bool
		says    string
	}{
		{name: "every node answers: granted", granted: true},
		{name: "a silent node of an earlier list: no consent", errs: map[netip.Addr]error{earlier: silent}, says: "no answer from 192.0.2.3 (of an earlier list"},
		{name: "a listed node's agent refuses this node", errs: map[netip.Addr]error{two: refused}, says: "refused by 192.0.2.2 (its agent refuses this node"},
		{name: "an earlier list's node's agent refuses this node", errs: map[netip.Addr]error{earlier: refused},
			says: "refused by 192.0.2.3 (of an earlier list; its agent refuses this node"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			peers := &askedPeers{answers: map[netip.Addr]consent.Answer{two: fresh(two), earlier: fresh(earlier)}, errs: tt.errs}
			n := &Node{Deps: Deps{Settings: SettingsFrom(cfg), Store: &memStore{}, Peers: peers}, scheme: identity.SchemeFrom(cfg),
				state: state.State{Seen: []string{two.String(), earlier.String()}}}
			s := &Snapshot{List: list, ListOK: true, Self: n.scheme.For(self)}
			v := n.askConsent(context.Background(), s)
			if v.Granted != tt.granted {
				t.Errorf("granted %v, want %v: %s", v.Granted, tt.granted, v.Reason())
			}
			if !strings.Contains(v.Reason(), tt.says) {
				t.Errorf("the verdict %q does not say %q", v.Reason(), tt.says)
			}
			// The other agents take the caller for the node at the
			// address it calls from: every ask leaves from this node's.
			if len(peers.sources) != 2 || slices.ContainsFunc(peers.sources, func(a netip.Addr) bool { return a != self }) {
				t.Errorf("asked from %v, want every ask from %s", peers.sources, self)
			}
		})
	}
}

// memStore is a Store in memory.
type memStore struct {
	st         state.State
	op         state.Operator
	promise    *state.Promise
	promiseErr error // what LoadPromise fails with
	retired    *state.Retirement
	witness    *state.Witness
}

func (m *memStore) Load() (state.State, error)            { return m.st, nil }
func (m *memStore) Save(s state.State) error              { m.st = s; return nil }
func (m *memStore) LoadOperator() (state.Operator, error) { return m.op, nil }
func (m *memStore) LoadPromise() (*state.Promise, error)  { return m.promise, m.promiseErr }
func (m *memStore) LoadRetirement() (*state.Retirement, error) {
	return m.retired, nil
}
func (m *memStore) SaveRetirement(r *state.Retirement) error { m.retired = r; return nil }
func (m *memStore) LoadWitness() (*state.Witness, error)     { return m.witness, nil }
func (m *memStore) SaveWitness(w *state.Witness) error       { m.witness = w; return nil }
func (m *memStore) SavePromise(p *state.Promise) error {
	if p != nil {
		p.List = slices.Clone(p.List)
	}
	m.promise = p
	return nil
}

// A promise that cannot be read may stand: the node's own answer is then
// no consent, as its answer to a request for a promise is, never fresh.
func TestAnUnreadablePromiseIsNoConsent(t *testing.T) {
	unreadable := errors.New("state dir /var/lib/etcdlet: owned by uid 65534")
	fresh := consent.Answer{Cluster: "etcd-main", Node: "192.0.2.1", List: []string{"192.0.2.1", "192.0.2.2"}, Phase: consent.Fresh}
	for _, tc := range []struct {
		name  string
		store *memStore
		want  consent.Phase
	}{
		{"no promise", &memStore{}, consent.Fresh},
		{"a promise for this list", &memStore{promise: &state.Promise{List: fresh.List}}, consent.Fresh},
		{"a promise for another list", &memStore{promise: &state.Promise{List: []string{"192.0.2.1", "192.0.2.9"}}}, consent.Promised},
		{"a promise it cannot read", &memStore{promiseErr: unreadable}, consent.Starting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &Node{Deps: Deps{Store: tc.store}}
			if got := n.promiseStands(fresh); got.Phase != tc.want {
				t.Errorf("answer %s (%s), want %s", got.Phase, got.Detail, tc.want)
			}
		})
	}
}
