package pacemaker

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
	etcdv1 "github.com/openshift/api/etcd/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// fixtureNow is the clock of the fixtures (their CIB timestamps are
// pinned to 2020-01-01T10:00:00Z and a minute per step after it).
var fixtureNow = time.Date(2020, 1, 1, 10, 30, 0, 0, time.UTC)

// requireTools fails (never skips) a test whose real component is missing,
// saying how to get it. A tool is a name looked up in PATH or, like the
// collector's defaults, an absolute path.
func requireTools(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (%v); the pacemaker tests run the real tools: apt-get install -y pacemaker-cli-utils libxml2-utils", tool, err)
		}
	}
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// fixtureCollector returns a collector that reads testdata/cib/<scenario>.xml
// offline with the real crm_mon.
func fixtureCollector(t testing.TB, scenario string, mutate func(*config.Pacemaker)) *Collector {
	t.Helper()
	requireTools(t, config.DefaultCrmMon)
	cib, err := filepath.Abs(filepath.Join("testdata", "cib", scenario+".xml"))
	if err != nil {
		t.Fatal(err)
	}
	o := config.DefaultPacemaker()
	o.CIBFile = cib
	if mutate != nil {
		mutate(&o)
	}
	c, err := NewCollector(o, quietLog())
	if err != nil {
		t.Fatalf("NewCollector: %v", err)
	}
	return c
}

// pollFixture polls a scenario with the real crm_mon and builds its status.
func pollFixture(t testing.TB, scenario string, mutate func(*config.Pacemaker)) (Snapshot, *etcdv1.PacemakerCluster) {
	t.Helper()
	c := fixtureCollector(t, scenario, mutate)
	snap := c.Poll(context.Background())
	if !snap.Known {
		t.Fatalf("%s: pacemaker state unknown: %s", scenario, snap.Reason)
	}
	obj, err := c.Build(snap, nil, fixtureNow)
	if err != nil {
		t.Fatalf("%s: Build: %v", scenario, err)
	}
	return snap, obj.(*etcdv1.PacemakerCluster)
}

// find returns the condition at path: "" for the cluster, "<node>",
// "<node>/resource/<Kubelet|Etcd>" or "<node>/agent/<name>".
func find(t testing.TB, obj *etcdv1.PacemakerCluster, path, typ string) metav1.Condition {
	t.Helper()
	s, _, err := status.FromObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	var found *metav1.Condition
	pick := func(conds []metav1.Condition) {
		for i := range conds {
			if conds[i].Type == typ {
				found = &conds[i]
			}
		}
	}
	if path == "" {
		pick(s.Conditions)
	}
	for _, n := range s.Nodes {
		switch path {
		case n.Name:
			pick(n.Conditions)
		default:
			for _, r := range n.Resources {
				if path == n.Name+"/resource/"+r.Name {
					pick(r.Conditions)
				}
			}
			for _, a := range n.FencingAgents {
				if path == n.Name+"/agent/"+a.Name {
					pick(a.Conditions)
				}
			}
		}
	}
	if found == nil {
		t.Fatalf("no condition %s at %q", typ, path)
	}
	return *found
}
