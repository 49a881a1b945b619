package pacemakercluster

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	etcdv1 "github.com/openshift/api/etcd/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
	"github.com/etcdlet/etcdlet/internal/eventually"
	"github.com/etcdlet/etcdlet/test/envtest"
)

// The tests below write through a real kube-apiserver serving the real
// PacemakerCluster CRD, once per API version. One control plane per
// version serves all scenarios, which run in turn on the singleton (there
// is only one object); each starts from no object at all.

func TestWriterV1(t *testing.T) { testWriter(t, envtest.PacemakerV1, status.VersionV1) }

func TestWriterV1alpha1(t *testing.T) {
	testWriter(t, envtest.PacemakerV1alpha1, status.VersionV1alpha1)
}

// fixture is one control plane serving one version.
type fixture struct {
	env     *envtest.Env
	version string
	// api is the agent's own client of the PacemakerCluster of version.
	api kube.API
}

var scenarios = []struct {
	name string
	run  func(t *testing.T, f *fixture)
}{
	{"singleton created without status, then status written", testCreateThenStatus},
	{"unchanged status costs one GET and no UPDATE", testUnchanged},
	{"lastUpdated ahead of the clock does not go backwards", testClockBehind},
	{"invalid status refused by Validate and by the API server", testRefused},
	{"DC handover", testHandover},
	{"stale DC agent: sticky takeover, step back on resume", testStaleTakeover},
	{"concurrent writers converge", testConcurrentWriters},
	{"Run writes, refreshes, retries and stops", testRun},
}

func testWriter(t *testing.T, pv envtest.PacemakerVersion, version string) {
	f := &fixture{env: envtest.Start(t, envtest.Options{PacemakerCluster: pv}), version: version}
	api, err := f.env.AgentClients(t).PacemakerClusters(version)
	if err != nil {
		t.Fatal(err)
	}
	f.api = api
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			f.reset(t)
			sc.run(t, f)
		})
	}
}

// reset deletes the singleton and waits until it is gone.
func (f *fixture) reset(t *testing.T) {
	t.Helper()
	obj := f.newObj()
	obj.SetName(status.ObjectName)
	if err := f.env.Client.Delete(t.Context(), obj); client.IgnoreNotFound(err) != nil {
		t.Fatalf("delete the singleton: %v", err)
	}
	eventually.True(t, 10*time.Second, "the singleton to be deleted", func() bool {
		err := f.env.Client.Get(t.Context(), client.ObjectKey{Name: status.ObjectName}, f.newObj())
		return apierrors.IsNotFound(err)
	})
}

func (f *fixture) newObj() status.Object {
	newObj, err := objectFactory(f.version)
	if err != nil {
		panic(err)
	}
	return newObj()
}

// writer is a Writer on node with clock c, talking to the fixture's API
// server through cl (the fixture's client when nil).
func (f *fixture) writer(t *testing.T, node string, c *clock, cl kube.API) *Writer {
	if cl == nil {
		cl = f.api
	}
	return mustNew(t, writerOpts(cl, f.version, node, c))
}

// input is the poll's offer on a node: the status of a healthy cluster
// whose DC is dc.
func (f *fixture) input(t *testing.T, dc string, isDC bool) Input {
	return Input{Built: built(t, f.version, cluster(dc), t0, nil), IsDC: isDC}
}

// stored reads the singleton: its status (nil without) and last writer.
func (f *fixture) stored(t *testing.T) (status.Object, *status.Status, string) {
	t.Helper()
	obj, s, writer, found := f.lookup(t)
	if !found {
		t.Fatal("the singleton does not exist")
	}
	return obj, s, writer
}

// lookup is stored for an object that may not exist yet.
func (f *fixture) lookup(t *testing.T) (obj status.Object, s *status.Status, writer string, found bool) {
	t.Helper()
	obj = f.newObj()
	err := f.env.Client.Get(t.Context(), client.ObjectKey{Name: status.ObjectName}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, "", false
	case err != nil:
		t.Fatalf("get the singleton: %v", err)
	}
	s, has, err := status.FromObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	if !has {
		s = nil
	}
	return obj, s, lastWriter(obj), true
}

// lastUpdated is the stored lastUpdated.
func (f *fixture) lastUpdated(t *testing.T) time.Time {
	t.Helper()
	_, s, _ := f.stored(t)
	if s == nil {
		t.Fatal("the singleton has no status")
	}
	return s.LastUpdated.Time
}

// recording records the objects sent to Create.
type recording struct {
	kube.API
	mu      sync.Mutex
	created []status.Object
}

func (r *recording) Create(ctx context.Context, namespace string, obj runtime.Object, fieldManager string) error {
	r.mu.Lock()
	r.created = append(r.created, obj.DeepCopyObject().(status.Object))
	r.mu.Unlock()
	return r.API.Create(ctx, namespace, obj, fieldManager)
}

func testCreateThenStatus(t *testing.T, f *fixture) {
	rec := &recording{API: f.api}
	c := newClock(t0.Add(1500 * time.Millisecond))
	w := f.writer(t, "a", c, rec)
	in := f.input(t, "a", true)
	sync1(t, w, in, kube.ResultWritten)

	if got := w.Calls(); got != (CallCounts{Get: 1, Create: 1, Update: 1}) {
		t.Errorf("calls = %+v, want one GET, one CREATE, one UPDATE", got)
	}
	if len(rec.created) != 1 {
		t.Fatalf("%d creates, want 1", len(rec.created))
	}
	if _, has, _ := status.FromObject(rec.created[0]); has {
		t.Error("the singleton was created with a status; it must be created without and written through /status")
	}
	_, s, writer := f.stored(t)
	if s == nil {
		t.Fatal("no status stored")
	}
	if writer != "a" {
		t.Errorf("last writer = %q, want a", writer)
	}
	if !s.LastUpdated.Equal(&metav1.Time{Time: t0.Add(time.Second)}) {
		t.Errorf("lastUpdated = %s, want the writer's clock at second precision (%s)", s.LastUpdated, t0.Add(time.Second))
	}
	want, _, _ := status.FromObject(in.Built)
	if k1, k2 := mustKey(t, s, f.version), mustKey(t, want, f.version); k1 != k2 {
		t.Errorf("stored status differs from the offered one:\n got %s\nwant %s", k1, k2)
	}
	if st := w.o.Tracker.State(); st.LastError != "" || !strings.Contains(st.Detail, "pacemaker's DC") {
		t.Errorf("tracker = %+v", st)
	}
}

func mustKey(t *testing.T, s *status.Status, version string) string {
	t.Helper()
	k, err := contentKey(s, version)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func testUnchanged(t *testing.T, f *fixture) {
	c := newClock(t0)
	w := f.writer(t, "a", c, nil)
	in := f.input(t, "a", true)
	steps := []struct {
		name      string
		advance   time.Duration
		in        Input
		want      string
		wantCalls CallCounts // added by the step
	}{
		{"first write", 0, in, kube.ResultWritten, CallCounts{Get: 1, Create: 1, Update: 1}},
		{"same status 5s later", 5 * time.Second, in, kube.ResultUnchanged, CallCounts{Get: 1}},
		{"same status 29s after the write", 24 * time.Second, in, kube.ResultUnchanged, CallCounts{Get: 1}},
		{"refresh due", time.Second, in, kube.ResultWritten, CallCounts{Get: 1, Update: 1}},
		{"changed status before the next refresh", time.Second,
			Input{Built: built(t, f.version, offline(cluster("a")), t0, nil), IsDC: true}, kube.ResultWritten, CallCounts{Get: 1, Update: 1}},
	}
	for _, s := range steps {
		before := w.Calls()
		c.Advance(s.advance)
		sync1(t, w, s.in, s.want)
		after := w.Calls()
		if got := (CallCounts{Get: after.Get - before.Get, Create: after.Create - before.Create, Update: after.Update - before.Update}); got != s.wantCalls {
			t.Errorf("%s: calls %+v, want %+v", s.name, got, s.wantCalls)
		}
	}
}

func testClockBehind(t *testing.T, f *fixture) {
	ahead, behind := newClock(t0.Add(10*time.Minute)), newClock(t0)
	b := f.writer(t, "b", ahead, nil)
	sync1(t, b, f.input(t, "b", true), kube.ResultWritten)
	// b's node left; a, whose clock is ten minutes behind b's, is DC now.
	a := f.writer(t, "a", behind, nil)
	prev := f.lastUpdated(t)
	for range 3 {
		sync1(t, a, f.input(t, "a", true), kube.ResultWritten)
		got := f.lastUpdated(t)
		if !got.After(prev) {
			t.Fatalf("lastUpdated went from %s to %s; it must advance", prev, got)
		}
		prev = got
		behind.Advance(30 * time.Second)
	}
	if _, _, writer := f.stored(t); writer != "a" {
		t.Errorf("last writer = %s, want a", writer)
	}
}

func testRefused(t *testing.T, f *fixture) {
	dropCondition := func(conds []metav1.Condition, typ string) []metav1.Condition {
		return slices.DeleteFunc(slices.Clone(conds), func(c metav1.Condition) bool { return c.Type == typ })
	}
	tests := []struct {
		name    string
		mutate  func(*status.Status)
		message string // in both Validate's and the API server's error
	}{
		{"loopback node address", func(s *status.Status) { s.Nodes[0].Addresses[0] = "127.0.0.1" },
			"must be a valid global unicast IPv4 or IPv6 address in canonical form"},
		{"missing cluster Healthy condition", func(s *status.Status) {
			s.Conditions = dropCondition(s.Conditions, etcdv1.ClusterHealthyConditionType)
		}, "conditions must contain a condition of type Healthy"},
		{"node without FencingAvailable condition", func(s *status.Status) {
			s.Nodes[1].Conditions = dropCondition(s.Nodes[1].Conditions, etcdv1.NodeFencingAvailableConditionType)
		}, "conditions must contain a condition of type FencingAvailable"},
		{"node name not an RFC 1123 subdomain", func(s *status.Status) { s.Nodes[0].Name = "Master_0" },
			"nodeName must be a lowercase RFC 1123 subdomain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.reset(t)
			ev := &events{}
			o := writerOpts(f.api, f.version, "a", newClock(t0))
			o.Recorder = ev
			w := mustNew(t, o)
			bad := Input{Built: built(t, f.version, cluster("a"), t0, tt.mutate), IsDC: true}
			for range 2 {
				got, err := w.SyncOnce(t.Context(), bad)
				if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), tt.message) {
					t.Fatalf("SyncOnce = %s, %v; want ErrRefused containing %q", got, err, tt.message)
				}
			}
			if c := w.Calls(); c != (CallCounts{Get: 2}) {
				t.Errorf("calls = %+v, want the two GETs only: nothing may be written", c)
			}
			if n := ev.count(kube.ReasonPacemakerStatusRefused); n != 1 {
				t.Errorf("%d %s events, want one per distinct error", n, kube.ReasonPacemakerStatusRefused)
			}
			if st := w.o.Tracker.State(); st.Failures != 2 || !strings.Contains(st.LastError, tt.message) {
				t.Errorf("tracker = %+v, want two failures with the reason", st)
			}

			// The same object, sent as the writer would, is refused by
			// the API server too.
			stored := f.newObj()
			stored.SetName(status.ObjectName)
			if err := f.env.Client.Create(t.Context(), stored); err != nil {
				t.Fatal(err)
			}
			s, _, _ := status.FromObject(bad.Built)
			s.LastUpdated = metav1.NewTime(t0)
			obj, err := status.ToObject(s, f.version, stored)
			if err != nil {
				t.Fatal(err)
			}
			if err := status.Validate(obj, stored); err == nil {
				t.Fatal("Validate accepts the object")
			}
			err = f.env.Client.Status().Update(t.Context(), obj)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.message) {
				t.Errorf("the API server answered %v, want Invalid containing %q", err, tt.message)
			}
		})
	}
}
