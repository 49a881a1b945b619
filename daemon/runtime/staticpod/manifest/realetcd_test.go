package manifest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/internal/eventually"
	"github.com/etcdlet/etcdlet/internal/testbin"
)

// The command line a manifest carries runs on the etcd its image names.
// etcd 3.5 (kubeadm's image up to Kubernetes 1.33) knows the tuning only
// as experimental flags, etcd 3.7 only under its new names: each real etcd
// starts from the command rendered for its image and serves. etcd 3.5
// given the command rendered for a 3.6 image stops at once, which is why
// the image's version decides the names.
func TestCommandRunsOnRealEtcd(t *testing.T) {
	etcd35 := testbin.Executable(t, "ETCDLET_ETCD35", "", testbin.HowEtcd35)
	etcd37 := testbin.Executable(t, "KUBEBUILDER_ASSETS", "etcd", testbin.HowEnvtest)
	for i, binary := range []string{etcd35, etcd37} {
		version := reportedVersion(t, binary)
		t.Run("etcd "+version, func(t *testing.T) {
			cmd, client := rendered(t, binary, "registry.k8s.io/etcd:"+version+"-0", 32379+10*i)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var waitErr error
			exited := make(chan struct{})
			go func() {
				waitErr = cmd.Wait()
				close(exited)
			}()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
			})
			var died error
			eventually.Nil(t, 30*time.Second, "etcd "+version+" serves on the command rendered for it", func() error {
				select {
				case <-exited:
					died = fmt.Errorf("etcd %s exited (%v) on the command rendered for it:\n%s\n%s", version, waitErr, strings.Join(cmd.Args, " "), stderr.String())
					return nil
				default:
				}
				return healthy(client)
			})
			if died != nil {
				t.Fatal(died)
			}
		})
	}
	t.Run("etcd 3.5 on the command rendered for 3.6", func(t *testing.T) {
		cmd, _ := rendered(t, etcd35, "registry.k8s.io/etcd:3.6.16-0", 32399)
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "flag provided but not defined") {
			t.Errorf("etcd 3.5 ran the flags of 3.6 (%v):\n%s", err, out)
		}
	})
}

// rendered is the command line, on the executable, of a one-member
// cluster on 127.0.250.1 whose client port is port (the peer port the
// next one), with a manifest for image; and its client URL.
func rendered(t *testing.T, executable, image string, port int) (*exec.Cmd, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := cfgFor(t, fmt.Sprintf(`cluster: {name: etcd-main}
members: {source: static, addresses: [127.0.250.1]}
etcd: {runtime: static-pod, dataDir: %s, insecure: true, clientPort: %d, peerPort: %d, listenMetricsURL: "http://127.0.250.1:%d"}
staticPod: {image: %q}
agent: {stateDir: %s}
`, filepath.Join(dir, "data"), port, port+1, port+2, image, filepath.Join(dir, "state")))
	self := identity.SchemeFrom(cfg).For(netip.MustParseAddr("127.0.250.1"))
	spec := runtime.BuildSpec(runtime.SettingsFrom(cfg), self, identity.InitialCluster([]identity.Member{self}), runtime.StateNew)
	args := Command(spec, executable)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return exec.CommandContext(ctx, args[0], args[1:]...), self.ClientURL
}

func healthy(client string) error {
	resp, err := http.Get(client + "/health")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s/health: %s", client, resp.Status)
	}
	return nil
}

var versionLine = regexp.MustCompile(`(?m)^etcd Version: (\d+\.\d+\.\d+)$`)

// reportedVersion is the version an etcd binary reports.
func reportedVersion(t *testing.T, binary string) string {
	t.Helper()
	out, err := exec.Command(binary, "--version").Output()
	m := versionLine.FindSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("%s --version: %v\n%s", binary, err, out)
	}
	return string(m[1])
}
