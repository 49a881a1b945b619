package test

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

// certificates.autoRenew: three hosts on certificates the real kubeadm
// made, hosts 1 and 2 with the embedded runtime, host 3 as a static pod,
// each agent told to renew a year ahead (so kubeadm's one-year
// certificates are due at once). Every agent renews its own files from
// the etcd CA (keeping the old ones) and has its member restarted on them
// through a member-restart task, which holds the cluster-wide task lock:
// the three restarts come one after the other, and the writer never sees
// the cluster lose quorum. In the end every member serves its renewed
// files, keeps its ID and its data, and nothing is renewed again.
func TestCertsRenewThemselves(t *testing.T) {
	t.Parallel()
	const staticPod = 3
	etcd := harness.EtcdBinary(t)
	root := t.TempDir()
	etcdDir := certsKubeadmPKI(t, root, func(n int) string { return fmt.Sprintf("127.0.%d.%d", netCertsAutoRenew, n) })
	one := etcdDir(1)
	files := &harness.TLSFiles{CA: filepath.Join(one, "ca.crt"), ServerCert: filepath.Join(one, "server.crt"), ServerKey: filepath.Join(one, "server.key"),
		ClientCert: filepath.Join(one, "healthcheck-client.crt"), ClientKey: filepath.Join(one, "healthcheck-client.key")}
	c := harness.NewCluster(t, binary, filepath.Join(root, "cluster"), harness.Options{Net: netCertsAutoRenew, StaticPod: etcd, TLS: files})
	c.WriteMembers(1, 2, 3)
	for n := 1; n <= 3; n++ {
		certsConfig(t, c, etcdDir, n, staticPod)
	}
	cli := c.Client()
	before := map[int]map[string]*x509.Certificate{}
	for n := 1; n <= 3; n++ {
		before[n] = map[string]*x509.Certificate{}
		for _, f := range []string{"server.crt", "peer.crt"} {
			before[n][f] = certsRead(t, filepath.Join(etcdDir(n), f))
		}
	}
	// The cluster forms on the kubeadm certificates, then the agents
	// start again with renewal on.
	for n := 1; n <= 3; n++ {
		c.Start(n)
	}
	c.Wait(cli, convergeTimeout, 1, 2, 3)
	ids := map[int]uint64{}
	for n := 1; n <= 3; n++ {
		ids[n] = memberIDOf(t, c, cli, n)
	}
	w := c.StartWriter(cli)
	for n := 1; n <= 3; n++ {
		c.Agent(n).Stop()
		appendConfig(t, c.ConfigPath(n), "certificates:\n  autoRenew: true\n  renewBefore: 8760h\n  validity: 9000h\n")
		c.Agent(n).Restart()
		c.Wait(cli, convergeTimeout, 1, 2, 3)
	}

	year := time.Now().Add(8760 * time.Hour)
	harness.Eventually(t, 5*time.Minute, "every member serves renewed certificates", func() error {
		for n := 1; n <= 3; n++ {
			for _, l := range []struct{ url, file string }{{c.ClientURL(n), "server.crt"}, {c.PeerURL(n), "peer.crt"}} {
				got, err := certsServed(t, c.Opts.TLS, l.url)
				if err != nil {
					return fmt.Errorf("host %d %s: %w", n, l.url, err)
				}
				want := certsRead(t, filepath.Join(etcdDir(n), l.file))
				if !got.Equal(want) || !got.NotAfter.After(year) {
					return fmt.Errorf("host %d %s serves %s, not after %s; want its renewed %s", n, l.url, certsSerial(got), got.NotAfter, l.file)
				}
			}
		}
		return nil
	})
	checkWrites(t, w)
	for n := 1; n <= 3; n++ {
		for f, old := range before[n] {
			path := filepath.Join(etcdDir(n), f)
			now := certsRead(t, path)
			if now.Subject.String() != old.Subject.String() {
				t.Errorf("host %d %s: subject %s, was %s", n, f, now.Subject, old.Subject)
			}
			if kept, _ := filepath.Glob(path + ".*.bak"); len(kept) != 1 || !certsRead(t, kept[0]).Equal(old) {
				t.Errorf("host %d %s: old files kept %v, want kubeadm's certificate once", n, f, kept)
			}
		}
		if id := memberIDOf(t, c, cli, n); id != ids[n] {
			t.Errorf("host %d's member changed ID from %x to %x", n, ids[n], id)
		}
		if dirs := movedAside(t, c, n); len(dirs) > 0 {
			t.Errorf("host %d moved data aside: %v", n, dirs)
		}
		if got := c.Agent(n).CountLog("renewed this member's certificates before they expire", nil); got != 1 {
			t.Errorf("host %d's agent renewed its certificates %d times, want once", n, got)
		}
	}
}

// appendConfig adds YAML at the end of a configuration file.
func appendConfig(t *testing.T, path, yaml string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, yaml...), 0o600); err != nil {
		t.Fatal(err)
	}
}
