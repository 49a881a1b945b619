package envtest

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/pacemaker"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

// fixtureCIBs are the pacemaker fixtures: CIBs made by the real pacemaker
// tools (daemon/pacemaker/testdata/generate.sh).
const fixtureCIBs = "../../daemon/pacemaker/testdata/cib"

// checkEtcdletStatuses sends the status etcdlet builds for every pacemaker
// fixture through the real CRD of version v, as the agent writes it: the
// singleton created without status, then each status written through
// /status as an update of the stored object, one fixture after the other
// (so every update is also a transition the CRD's rules must allow). The
// API server must accept each one and store it unchanged: a field the CRD
// prunes or defaults would be a field etcdlet gets wrong.
func checkEtcdletStatuses(t *testing.T, env *Env, v PacemakerVersion, newObj func() client.Object) {
	t.Helper()
	if _, err := exec.LookPath("crm_mon"); err != nil {
		t.Fatal("crm_mon not found in PATH; the statuses are built from the real crm_mon's output: apt-get install -y pacemaker-cli-utils")
	}
	cibs, err := filepath.Glob(filepath.Join(fixtureCIBs, "*.xml"))
	if err != nil || len(cibs) == 0 {
		t.Fatalf("no pacemaker fixtures in %s (%v); run daemon/pacemaker/testdata/generate.sh", fixtureCIBs, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout+time.Duration(len(cibs))*5*time.Second)
	defer cancel()
	c := env.Client

	// Start from a singleton without status, as the agent finds it first.
	old := newObj()
	old.SetName(status.ObjectName)
	if err := c.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
		t.Fatalf("delete PacemakerCluster %s: %v", v, err)
	}
	stored := newObj()
	stored.SetName(status.ObjectName)
	if err := c.Create(ctx, stored); err != nil {
		t.Fatalf("create PacemakerCluster %s/%s: %v", v, status.ObjectName, err)
	}

	// The fixtures' clock: their CIBs are dated 2020-01-01, a minute per
	// step from 10:00; each write is a minute after the one before.
	now := time.Date(2020, 1, 1, 10, 30, 0, 0, time.UTC)
	written := 0
	for _, cib := range cibs {
		name := strings.TrimSuffix(filepath.Base(cib), ".xml")
		abs, err := filepath.Abs(cib)
		if err != nil {
			t.Fatal(err)
		}
		opts := config.DefaultPacemaker()
		opts.CIBFile, opts.APIVersion = abs, string(v)
		collector, err := pacemaker.NewCollector(opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatalf("%s: NewCollector: %v", name, err)
		}
		snap := collector.Poll(ctx)
		now = now.Add(time.Minute)
		obj, err := collector.Build(snap, stored.(status.Object), now)
		if !snap.Known {
			// etcdlet writes nothing for a state it cannot read.
			if err == nil {
				t.Errorf("%s: a status was built for an unknown state (%s)", name, snap.Reason)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: Build: %v", name, err)
			continue
		}
		if err := c.Status().Update(ctx, obj.(client.Object)); err != nil {
			t.Errorf("%s: the %s CRD refused the status etcdlet built: %v", name, v, err)
			continue
		}
		written++
		stored = newObj()
		if err := c.Get(ctx, client.ObjectKey{Name: status.ObjectName}, stored); err != nil {
			t.Fatalf("get PacemakerCluster %s/%s: %v", v, status.ObjectName, err)
		}
		if got, want := statusJSON(t, stored), statusJSON(t, obj.(client.Object)); got != want {
			t.Errorf("%s: the %s CRD stored another status than etcdlet wrote:\n got: %s\nwant: %s", name, v, got, want)
		}
	}
	t.Logf("%s: %d of %d fixtures' statuses accepted and stored unchanged", v, written, len(cibs))
	if written == 0 {
		t.Fatalf("no fixture gave a status to write")
	}
}

func statusJSON(t *testing.T, obj client.Object) string {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return string(m["status"])
}
