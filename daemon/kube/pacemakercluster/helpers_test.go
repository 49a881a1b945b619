package pacemakercluster

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

// t0 is the tests' epoch; every fake clock starts from it.
var t0 = time.Date(2026, 3, 3, 10, 0, 0, 0, time.UTC)

// clock is a fake clock that only moves when told to.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock(t time.Time) *clock { return &clock{t: t} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// events records Eventf calls as "type reason".
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) Eventf(eventtype, reason, messageFmt string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, eventtype+" "+reason+": "+fmt.Sprintf(messageFmt, args...))
}

// count returns how many events had reason.
func (e *events) count(reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, g := range e.got {
		var typ, r string
		if _, err := fmt.Sscanf(g, "%s %s", &typ, &r); err == nil && r == reason+":" {
			n++
		}
	}
	return n
}

const yes, no = crmmon.True, crmmon.False

func running(id string) model.Resource {
	return model.Resource{Placement: model.Here, IDs: []string{id}, Role: crmmon.RoleStarted, RunsOn: []string{"x"},
		Active: yes, Managed: yes, Failed: no, Blocked: no}
}

// cluster is a healthy two-node pacemaker cluster of nodes a and b with
// dc as its DC.
func cluster(dc string) *model.Cluster {
	c := &model.Cluster{DCPresent: yes, DCName: dc, WithQuorum: yes, MaintenanceMode: no, StonithEnabled: yes, StopAllResources: no,
		KubeletSelector: "agent systemd:kubelet", EtcdSelector: "agent ocf:heartbeat:podman-etcd"}
	for i, name := range []string{"a", "b"} {
		c.Nodes = append(c.Nodes, model.Node{
			Name: name, Type: "member",
			Online: yes, Standby: no, StandbyOnFail: no, Maintenance: no, Pending: no, Unclean: no, ExpectedUp: yes,
			Addresses: []netip.Addr{netip.MustParseAddr(fmt.Sprintf("192.0.2.%d", 10+i))},
			Kubelet:   running("kubelet"),
			Etcd:      running("etcd"),
			Devices: []model.Device{{ID: name + "_redfish", Type: "fence_redfish", Method: model.MethodRedfish,
				Targets: []string{name}, Resource: running(name + "_redfish")}},
		})
	}
	return c
}

// built is the status the poll builds for c at now, as the typed object of
// version, optionally changed by mutate before conversion.
func built(t *testing.T, version string, c *model.Cluster, now time.Time, mutate func(*status.Status)) status.Object {
	t.Helper()
	s := status.Build(c, 2, nil, now)
	if mutate != nil {
		mutate(s)
	}
	obj, err := status.ToObject(s, version, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// offline is c with node b offline: a status different from cluster's.
func offline(c *model.Cluster) *model.Cluster {
	c.Nodes[1].Online = no
	return c
}

func discardLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// writerOpts are the options of a test writer on node with clock c.
func writerOpts(cl kube.API, version, node string, c *clock) Options {
	now := time.Now
	if c != nil {
		now = c.Now
	}
	return Options{
		Client:          cl,
		Version:         version,
		NodeName:        node,
		RefreshInterval: 30 * time.Second,
		StaleAfter:      90 * time.Second,
		CallTimeout:     10 * time.Second,
		Tracker:         kube.NewTracker("PacemakerCluster cluster", nil, nil),
		Recorder:        &events{},
		Log:             discardLog(),
		Now:             now,
	}
}

func mustNew(t *testing.T, o Options) *Writer {
	t.Helper()
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// sync runs one round and checks its result.
func sync1(t *testing.T, w *Writer, in Input, want string) {
	t.Helper()
	got, err := w.SyncOnce(t.Context(), in)
	if err != nil {
		t.Fatalf("%s: SyncOnce: %v", w.o.NodeName, err)
	}
	if got != want {
		t.Fatalf("%s: SyncOnce = %s, want %s (tracker: %+v)", w.o.NodeName, got, want, w.o.Tracker.State())
	}
}

// noAPI is a client any call of which fails the test.
type noAPI struct {
	kube.API
	t *testing.T
}

func (c noAPI) Get(context.Context, types.NamespacedName, runtime.Object) error {
	c.t.Error("unexpected API call: Get")
	return fmt.Errorf("no API")
}

func (c noAPI) Create(context.Context, string, runtime.Object, string) error {
	c.t.Error("unexpected API call: Create")
	return fmt.Errorf("no API")
}

func (c noAPI) Patch(context.Context, types.NamespacedName, types.PatchType, []byte, string, runtime.Object) error {
	c.t.Error("unexpected API call: Patch")
	return fmt.Errorf("no API")
}

func (c noAPI) UpdateStatus(context.Context, types.NamespacedName, runtime.Object, string) error {
	c.t.Error("unexpected API call: UpdateStatus")
	return fmt.Errorf("no API")
}

// failing is a client whose every call fails like an unreachable API
// server.
type failing struct{ kube.API }

func (failing) Get(context.Context, types.NamespacedName, runtime.Object) error {
	return errUnreachable
}

var errUnreachable = fmt.Errorf("dial tcp 192.0.2.1:6443: connect: connection refused")
