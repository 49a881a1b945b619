package druid

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/test/envtest"
)

var discard = slog.New(slog.DiscardHandler)

// The holder identity is byte for byte what etcd-backup-restore writes and
// druid parses: lower-case hex without padding or 0x, then the role.
func TestHolderIdentity(t *testing.T) {
	tests := []struct {
		m    LocalMember
		want string
	}{
		{LocalMember{MemberID: 0x5fc4137847488191, ClusterID: 0x4f3833aed765c9b9, Leader: true}, "5fc4137847488191:4f3833aed765c9b9:Leader"},
		{LocalMember{MemberID: 0xa, ClusterID: 0x0f, Leader: false}, "a:f:Member"},
		{LocalMember{MemberID: 0xffffffffffffffff, ClusterID: 1}, "ffffffffffffffff:1:Member"},
	}
	for _, tc := range tests {
		if got := tc.m.HolderIdentity(); got != tc.want {
			t.Errorf("HolderIdentity(%+v) = %q, want %q", tc.m, got, tc.want)
		}
	}
}

type recorded struct{ reasons []string }

func (r *recorded) Eventf(_, reason, _ string, _ ...any) { r.reasons = append(r.reasons, reason) }

func keeperConfig(t *testing.T, replicas *int) *config.Config {
	cfg, err := config.Parse([]byte("cluster:\n  name: etcd-main\nmembers:\n  source: etcd-resource\nagent:\n  stateDir: " + t.TempDir() + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Cluster.Replicas = replicas
	return cfg
}

func etcdWith(replicas int32, addrs ...string) *druidv1alpha1.Etcd {
	return &druidv1alpha1.Etcd{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "etcd-main", ResourceVersion: "7"},
		Spec: druidv1alpha1.EtcdSpec{Replicas: replicas, ExternallyManagedMemberAddresses: addrs}}
}

// The Etcd's list passes the rules of every member list before it is
// kept; a refused one leaves the kept copy alone and is reported once.
func TestAddressKeeper(t *testing.T) {
	three := 3
	tests := []struct {
		name     string
		etcd     *druidv1alpha1.Etcd
		replicas *int
		want     string // kept list, or a part of the refusal
	}{
		{"loopback list", etcdWith(3, "127.0.0.1", "127.0.0.2", "127.0.0.3"), nil, "127.0.0.1\n127.0.0.2\n127.0.0.3\n"},
		{"druid-managed mode", etcdWith(3), nil, "not in externally managed mode"},
		{"not canonical", etcdWith(2, "127.0.0.1", "127.0.0.02"), nil, "[1]: \"127.0.0.02\": must be an IPv4 or IPv6 address"},
		{"duplicate", etcdWith(2, "127.0.0.1", "127.0.0.1"), nil, "duplicate of"},
		{"hostname", etcdWith(1, "etcd-0.example.com"), nil, "must be an IPv4 or IPv6 address"},
		{"off loopback without TLS", etcdWith(1, "192.0.2.1"), nil, "is not a loopback address"},
		{"replicas of the Etcd", etcdWith(3, "127.0.0.1", "127.0.0.2"), nil, "2 entries, but spec.replicas is 3"},
		{"cluster.replicas", etcdWith(2, "127.0.0.1", "127.0.0.2"), &three, "must have exactly cluster.replicas (3) entries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := keeperConfig(t, tc.replicas)
			rec := &recorded{}
			k := &AddressKeeper{Rules: cfg.ListRules, Log: discard, Recorder: rec}
			k.OnEtcd(tc.etcd)
			k.OnEtcd(tc.etcd)
			data, _ := os.ReadFile(cfg.EtcdResourceMembers())
			if !strings.Contains(tc.want, "\n") {
				if k.Err() == nil || !strings.Contains(k.Err().Error(), tc.want) {
					t.Fatalf("refusal %v, want it to say %q", k.Err(), tc.want)
				}
				if len(data) != 0 {
					t.Errorf("a refused list was kept:\n%s", data)
				}
				if len(rec.reasons) != 1 || rec.reasons[0] != kube.ReasonMemberListRefused {
					t.Errorf("events %v, want one %s", rec.reasons, kube.ReasonMemberListRefused)
				}
				return
			}
			if err := k.Err(); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(string(data), "\n"+tc.want) {
				t.Fatalf("kept copy:\n%s\nwant the addresses\n%s", data, tc.want)
			}
			// The copy reads back as a members file with the same rules.
			addrs, errs := cfg.DesiredMembers()
			if len(errs) > 0 || len(addrs) != strings.Count(tc.want, "\n") {
				t.Errorf("the kept copy reads back as %v, %v", addrs, errs)
			}
			if fi, _ := os.Stat(cfg.EtcdResourceMembers()); fi.Mode().Perm() != 0o600 {
				t.Errorf("kept copy has mode %v, want 0600", fi.Mode().Perm())
			}
		})
	}
}

// A refused list after a good one keeps the good one in the copy.
func TestAddressKeeperKeepsTheLastGoodList(t *testing.T) {
	cfg := keeperConfig(t, nil)
	k := &AddressKeeper{Rules: cfg.ListRules, Log: discard, Recorder: &recorded{}}
	k.OnEtcd(etcdWith(2, "127.0.0.1", "127.0.0.2"))
	k.OnEtcd(etcdWith(2, "127.0.0.1", "localhost"))
	if k.Err() == nil {
		t.Fatal("a list with a hostname was accepted")
	}
	addrs, errs := cfg.DesiredMembers()
	if len(errs) > 0 || len(addrs) != 2 {
		t.Fatalf("the kept list is %v, %v; want the two good addresses", addrs, errs)
	}
	k.OnEtcd(etcdWith(3, "127.0.0.1", "127.0.0.2", "127.0.0.3"))
	if addrs, _ := cfg.DesiredMembers(); k.Err() != nil || len(addrs) != 3 {
		t.Fatalf("the next good list was not kept: %v, %v", addrs, k.Err())
	}
}

type guard struct{ on bool }

func (g *guard) SetEnabled(on bool) bool {
	changed := g.on != on
	g.on = on
	return changed
}

func TestProtectionSwitch(t *testing.T) {
	annotated := etcdWith(1, "127.0.0.1")
	annotated.Annotations = map[string]string{druidv1alpha1.DisableEtcdComponentProtectionAnnotation: "anything"}
	plain := etcdWith(1, "127.0.0.1")

	g, rec := &guard{on: true}, &recorded{}
	p := &ProtectionSwitch{Guard: g, Configured: true, Log: discard, Recorder: rec}
	p.OnEtcd(plain)
	p.OnEtcd(annotated)
	p.OnEtcd(annotated)
	if g.on {
		t.Error("the annotation did not switch protection off")
	}
	p.OnEtcd(plain)
	if !g.on {
		t.Error("removing the annotation did not switch protection on")
	}
	if len(rec.reasons) != 2 {
		t.Errorf("events %v, want one per switch (2)", rec.reasons)
	}

	g = &guard{on: false}
	p = &ProtectionSwitch{Guard: g, Configured: false, Log: discard, Recorder: &recorded{}}
	p.OnEtcd(plain)
	if g.on {
		t.Error("the missing annotation switched on what protection.enabled: false switched off")
	}
}

// The renewer against a real API server: it writes only on a change of
// the holder identity or at the heartbeat, creates a missing Lease once
// the Etcd is known, renews nothing while the local member does not
// answer, and refuses a Lease name an IPv6 address would make.
func TestLeaseRenewer(t *testing.T) {
	env := envtest.Start(t, envtest.Options{DruidEtcd: true})
	ctx := t.Context()
	etcd := etcdWith(1, "192.0.2.1")
	etcd.ResourceVersion = ""
	etcd.Spec.Labels = map[string]string{"app": "etcd"}
	if err := env.Client.Create(ctx, etcd); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	local := LocalMember{IP: netip.MustParseAddr("192.0.2.1"), MemberID: 0xabc, ClusterID: 0xdef}
	var localErr error
	r := &LeaseRenewer{Leases: env.AgentClients(t).Leases, Namespace: "kube-system", EtcdName: "etcd-main", CallTimeout: 5 * time.Second,
		PeerTLS: true, Tracker: kube.NewTracker("lease", nil, nil), Log: discard, Now: func() time.Time { return now },
		Local: func(context.Context) (LocalMember, error) { return local, localErr }}
	lease := func() *coordinationv1.Lease {
		t.Helper()
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "etcd-main-192.0.2.1"}, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	step := func() {
		t.Helper()
		if err := r.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}

	if err := r.Step(ctx); err == nil || !strings.Contains(err.Error(), "Etcd resource was not read yet") {
		t.Fatalf("a missing Lease before the Etcd was read: %v, want a refusal to create it blind", err)
	}
	stored := &druidv1alpha1.Etcd{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(etcd), stored); err != nil {
		t.Fatal(err)
	}
	r.OnEtcd(stored)
	step()
	l := lease()
	if *l.Spec.HolderIdentity != "abc:def:Member" || !l.Spec.RenewTime.Time.Equal(now) || l.Annotations[TLSEnabledAnnotation] != "true" {
		t.Fatalf("created lease: holder %q renewTime %v annotations %v", *l.Spec.HolderIdentity, l.Spec.RenewTime, l.Annotations)
	}
	if ref := metav1.GetControllerOf(l); ref == nil || ref.UID != stored.UID {
		t.Errorf("created lease is not controlled by the Etcd: %+v", l.OwnerReferences)
	}

	now = now.Add(5 * time.Second)
	step()
	if got := lease().Spec.RenewTime.Time; !got.Equal(now.Add(-5 * time.Second)) {
		t.Errorf("renewed before the heartbeat (10s): renewTime %v", got)
	}
	local.Leader = true
	step()
	if l := lease(); *l.Spec.HolderIdentity != "abc:def:Leader" || !l.Spec.RenewTime.Time.Equal(now) {
		t.Errorf("a leader change was not written at once: %q %v", *l.Spec.HolderIdentity, l.Spec.RenewTime)
	}
	now = now.Add(10 * time.Second)
	step()
	if got := lease().Spec.RenewTime.Time; !got.Equal(now) {
		t.Errorf("not renewed at the heartbeat: renewTime %v, want %v", got, now)
	}

	localErr = errors.New("the local member is not running")
	now = now.Add(30 * time.Second)
	step()
	if got := lease().Spec.RenewTime.Time; got.Equal(now) {
		t.Error("renewed while the local member did not answer: druid must see the Lease go stale")
	}
	if st := r.Tracker.State(); !strings.Contains(st.Detail, "not running") {
		t.Errorf("tracker detail %q, want the reason nothing is renewed", st.Detail)
	}

	localErr = nil
	local.IP = netip.MustParseAddr("2001:db8::1")
	if err := r.Step(ctx); err == nil || !strings.Contains(err.Error(), "not a valid Kubernetes name") {
		t.Errorf("an IPv6 lease name: %v, want a refusal naming the rule", err)
	}
}

func TestMain(m *testing.M) {
	kube.SetLogger(discard)
	os.Exit(m.Run())
}

// The keeper applies the list rules in force at each version of the Etcd:
// a reload replaces the configuration whole, and the next version is
// checked against the new one.
func TestAddressKeeperTakesReloadedRules(t *testing.T) {
	four := 4
	before := keeperConfig(t, nil)
	after := *before
	after.Cluster.Replicas = &four
	var inForce atomic.Pointer[config.Config]
	inForce.Store(before)
	k := &AddressKeeper{Rules: func() config.ListRules { return inForce.Load().ListRules() }, Log: discard, Recorder: &recorded{}}
	k.OnEtcd(etcdWith(3, "127.0.0.1", "127.0.0.2", "127.0.0.3"))
	if err := k.Err(); err != nil {
		t.Fatalf("a list of three without cluster.replicas: %v", err)
	}
	inForce.Store(&after)
	k.OnEtcd(etcdWith(3, "127.0.0.1", "127.0.0.2", "127.0.0.4"))
	if err := k.Err(); err == nil || !strings.Contains(err.Error(), "must have exactly cluster.replicas (4) entries") {
		t.Fatalf("a list of three after cluster.replicas 4 was reloaded: %v, want it refused", err)
	}
	if addrs, _ := before.DesiredMembers(); len(addrs) != 3 || addrs[2].String() != "127.0.0.3" {
		t.Errorf("the kept copy holds %v; want the last good list", addrs)
	}
}
