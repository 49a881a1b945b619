package staticpod

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdversion"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/protect"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod/manifest"
)

func setup(t *testing.T) (*Runtime, runtime.Spec, runtime.Spec, string) {
	t.Helper()
	dir := t.TempDir()
	cfg, err := config.Parse([]byte("cluster: {name: etcd-main}\nmembers: {source: static, addresses: [192.0.2.10]}\netcd: {runtime: static-pod, dataDir: " +
		filepath.Join(dir, "data") + "}\nstaticPod: {manifestDir: " + filepath.Join(dir, "manifests") + "}\nagent: {stateDir: " + filepath.Join(dir, "state") + "}\n"))
	if err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	guard := protect.New(protect.Options{Enabled: true, Interval: time.Hour, Log: quiet,
		OptOut: func(_ string, b []byte) bool { return manifest.OptsOut(b) }})
	rt := New(cfg.StaticPod, cfg.Agent.StateDir, guard, quiet)
	self := identity.SchemeFrom(cfg).For(netip.MustParseAddr("192.0.2.10"))
	initial := identity.InitialCluster([]identity.Member{self})
	return rt, runtime.BuildSpec(runtime.SettingsFrom(cfg), self, initial, runtime.StateNew), runtime.BuildSpec(runtime.SettingsFrom(cfg), self, initial, runtime.StateExisting), cfg.Agent.StateDir
}

func TestApplyWritesOnlyChangesAndKeepsThePrevious(t *testing.T) {
	rt, bootstrap, restart, stateDir := setup(t)
	ctx := context.Background()
	if rt.Status().Running {
		t.Fatal("running before any manifest")
	}
	if err := rt.Apply(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(rt.Path())
	if err != nil || fi.Mode().Perm() != 0o600 || !rt.Status().Running {
		t.Fatalf("manifest after Apply: %v %v", fi, err)
	}
	first, _ := os.ReadFile(rt.Path())
	old := time.Now().Add(-time.Hour)
	_ = os.Chtimes(rt.Path(), old, old)
	if err := rt.Apply(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(rt.Path()); !fi.ModTime().Equal(old) {
		t.Error("an unchanged rendering rewrote the manifest (the kubelet would restart etcd)")
	}
	if err := rt.Apply(ctx, restart); err != nil {
		t.Fatal(err)
	}
	if prev, _ := os.ReadFile(filepath.Join(stateDir, "manifests", "etcd.yaml.previous")); string(prev) != string(first) {
		t.Error("the previous manifest was not kept")
	}

	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if rt.Status().Running {
		t.Error("still running after Stop")
	}
	kept, _ := filepath.Glob(filepath.Join(stateDir, "manifests", "etcd.yaml.stopped-*"))
	if len(kept) != 1 {
		t.Errorf("the stopped manifest was not kept: %v", kept)
	}
	if err := rt.Close(ctx); err != nil {
		t.Error(err)
	}
}

func TestApplyLeavesAnOperatorsManifest(t *testing.T) {
	rt, bootstrap, restart, _ := setup(t)
	ctx := context.Background()
	if err := rt.Apply(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(rt.Path())
	theirs := strings.Replace(string(data), "  annotations:\n", "  annotations:\n    "+manifest.DisableProtectionAnnotation+": \"\"\n", 1)
	if err := os.WriteFile(rt.Path(), []byte(theirs), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rt.Apply(ctx, restart); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(rt.Path()); string(got) != theirs {
		t.Error("Apply overwrote a manifest the operator took over")
	}
}

// WouldRestart tells a change of the manifest in place, which the kubelet
// answers by restarting etcd, from everything that restarts nothing: no
// manifest (nothing runs), the same rendering, or a manifest the operator
// took over (Apply leaves it).
func TestWouldRestartOnlyARunningManifestThatChanges(t *testing.T) {
	rt, bootstrap, restart, _ := setup(t)
	ctx := context.Background()
	wouldRestart := func(when string, spec runtime.Spec, want bool) {
		t.Helper()
		got, err := rt.WouldRestart(spec)
		if err != nil || got != want {
			t.Errorf("%s: WouldRestart = %v, %v; want %v", when, got, err, want)
		}
	}
	wouldRestart("no manifest", restart, false)
	if err := rt.Apply(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	wouldRestart("the same spec", bootstrap, false)
	wouldRestart("another spec", restart, true)
	data, _ := os.ReadFile(rt.Path())
	theirs := strings.Replace(string(data), "  annotations:\n", "  annotations:\n    "+manifest.DisableProtectionAnnotation+": \"\"\n", 1)
	if err := os.WriteFile(rt.Path(), []byte(theirs), 0o600); err != nil {
		t.Fatal(err)
	}
	wouldRestart("the operator's manifest", restart, false)
	if err := os.WriteFile(rt.Path(), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	wouldRestart("a stopped member", restart, false)
}

// Apply renders a spec once and reuses the rendering while the spec stays
// the same; a spec changed in place by its caller (a map or slice it
// shares) is a new spec, and the manifest follows it.
func TestApplyFollowsASpecChangedInPlace(t *testing.T) {
	rt, spec, _, _ := setup(t)
	ctx := context.Background()
	if spec.ExtraArgs == nil {
		spec.ExtraArgs = map[string]string{}
	}
	if err := rt.Apply(ctx, spec); err != nil {
		t.Fatal(err)
	}
	spec.ExtraArgs["quota-backend-bytes"] = "4294967296"
	spec.ListenClientURLs[0] = "https://192.0.2.10:12379"
	if err := rt.Apply(ctx, spec); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(rt.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--quota-backend-bytes=4294967296", "https://192.0.2.10:12379"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the manifest lacks %s after the spec changed in place:\n%s", want, got)
		}
	}
}

// Status tells the etcd version of the manifest in place: at start the
// one an earlier agent wrote (the kubelet runs it while the new agent
// decides whether it may change it), then what Apply wrote; none for a
// manifest the operator took over, or none at all.
func TestStatusTellsTheVersionOfTheManifestInPlace(t *testing.T) {
	rt, bootstrap, _, stateDir := setup(t)
	ctx := context.Background()
	if v := rt.Status().Version; !v.IsZero() {
		t.Fatalf("without a manifest: version %s", v)
	}
	if err := rt.Apply(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	ours, _ := etcdversion.FromImage(config.DefaultEtcdImage)
	if v := rt.Status().Version; v != ours {
		t.Errorf("after Apply: version %s, want %s (%s)", v, ours, config.DefaultEtcdImage)
	}

	// An older agent's manifest, of an etcd 3.5 image, found at start.
	data, _ := os.ReadFile(rt.Path())
	older := strings.Replace(string(data), "image: "+config.DefaultEtcdImage, "image: registry.k8s.io/etcd:3.5.21-0", 1)
	if older == string(data) {
		t.Fatalf("the manifest names no image %s:\n%s", config.DefaultEtcdImage, data)
	}
	if err := os.WriteFile(rt.Path(), []byte(older), 0o600); err != nil {
		t.Fatal(err)
	}
	restarted := New(rt.cfg, stateDir, rt.guard, rt.log)
	if v := restarted.Status().Version; v != (etcdversion.Minor{Major: 3, Minor: 5}) {
		t.Errorf("at start beside a 3.5 manifest: version %s, want 3.5", v)
	}

	theirs := strings.Replace(older, "  annotations:\n", "  annotations:\n    "+manifest.DisableProtectionAnnotation+": \"\"\n", 1)
	if err := os.WriteFile(rt.Path(), []byte(theirs), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := restarted.Apply(ctx, bootstrap); err != nil {
		t.Fatal(err)
	}
	if v := restarted.Status().Version; !v.IsZero() {
		t.Errorf("the operator's manifest: version %s, want none known", v)
	}
	if err := restarted.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s := restarted.Status(); s.Running || !s.Version.IsZero() {
		t.Errorf("after Stop: %+v", s)
	}
}
