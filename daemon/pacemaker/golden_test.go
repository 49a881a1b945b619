package pacemaker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

// goldenScenarios are the fixture CIBs (see testdata/generate.sh) plus
// option variants. Each is polled with the real crm_mon and built into the
// status that would be written; testdata/golden/<name>.yaml holds the
// expected object (or "unknown: <reason>").
var goldenScenarios = []struct {
	name     string
	scenario string
	opts     func(*config.Pacemaker)
}{
	{name: "healthy"},
	{name: "healthy-corosync", scenario: "healthy", opts: func(o *config.Pacemaker) {
		o.CorosyncConf = mustAbs("testdata/corosync.conf")
	}},
	{name: "healthy-v1alpha1", scenario: "healthy", opts: func(o *config.Pacemaker) { o.APIVersion = status.VersionV1alpha1 }},
	{name: "offline-clean"},
	{name: "unclean"},
	{name: "fenced"},
	{name: "no-quorum"},
	{name: "standby"},
	{name: "pending"},
	{name: "node-maintenance"},
	{name: "cluster-maintenance"},
	{name: "failed-monitor"},
	{name: "failed-start"},
	{name: "failed-fence-device"},
	{name: "disabled-resource"},
	{name: "banned"},
	{name: "two-fence-devices"},
	{name: "group"},
	{name: "bundle"},
	{name: "no-address"},
	{name: "newer-pacemaker"},
	{name: "newer-schema"},
}

func mustAbs(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		panic(err)
	}
	return abs
}

func TestGoldenStatuses(t *testing.T) {
	for _, g := range goldenScenarios {
		t.Run(g.name, func(t *testing.T) {
			scenario := g.scenario
			if scenario == "" {
				scenario = g.name
			}
			c := fixtureCollector(t, scenario, g.opts)
			snap := c.Poll(context.Background())
			var got bytes.Buffer
			if obj, err := c.Build(snap, nil, fixtureNow); err != nil {
				got.WriteString("unknown: " + snap.Reason + "\n")
				if snap.Known {
					t.Fatalf("Build of a known state failed: %v", err)
				}
			} else if err := Render(&got, obj, FormatYAML); err != nil {
				t.Fatal(err)
			}
			compareGolden(t, filepath.Join("testdata", "golden", g.name+".yaml"), got.Bytes())
		})
	}
}

func compareGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (run with -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the built status (run with -update to accept):\n--- got\n%s", path, got)
	}
}
