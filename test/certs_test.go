package test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/internal/testbin"
	"github.com/etcdlet/etcdlet/pki"
	"github.com/etcdlet/etcdlet/test/harness"
)

// certsKubeadm is the kubeadm v1.37.1 that hack/kube-node.sh builds from
// the Go module proxy, in the directory ETCDLET_KUBE_NODE names.
func certsKubeadm(t *testing.T) string {
	t.Helper()
	return testbin.Executable(t, "ETCDLET_KUBE_NODE", "kubeadm", "the certificate tests run the real kubeadm; export ETCDLET_KUBE_NODE=$(hack/kube-node.sh) (builds kubeadm and the kubelet once into the cache) or run make test")
}

// certsKubeadmPKI makes three control-plane hosts' etcd certificates with
// kubeadm's own certs phases, in kubeadm's layout under root/n<n>/pki:
// the etcd CA once (on host 1, copied to the others, as kubeadm join
// --control-plane copies it), then on each host its server, peer,
// healthcheck-client and apiserver-etcd-client certificates for its own
// name (cp-<n>) and member IP (serverCertSANs, peerCertSANs). The phases
// exist for local etcd only, so the configuration says etcd.local, as
// kubeadm's HA-etcd guide does to make the certificates of an external
// etcd. kubeadm refuses a loopback advertise address, which only adds a
// SAN here: a TEST-NET-1 address nobody listens on.
func certsKubeadmPKI(t *testing.T, root string, ip func(n int) string) (etcdDir func(n int) string) {
	t.Helper()
	kubeadm := certsKubeadm(t)
	pkiDir := func(n int) string { return filepath.Join(root, fmt.Sprintf("n%d", n), "pki") }
	etcdDir = func(n int) string { return filepath.Join(pkiDir(n), "etcd") }
	for n := 1; n <= 3; n++ {
		cfg := filepath.Join(root, fmt.Sprintf("kubeadm-%d.yaml", n))
		if err := os.WriteFile(cfg, fmt.Appendf(nil, `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: 192.0.2.%d
nodeRegistration:
  name: cp-%d
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.1
certificatesDir: %s
etcd:
  local:
    serverCertSANs: [%s]
    peerCertSANs: [%s]
`, 10+n, n, pkiDir(n), ip(n), ip(n)), 0o600); err != nil {
			t.Fatal(err)
		}
		phases := []string{"etcd-server", "etcd-peer", "etcd-healthcheck-client", "apiserver-etcd-client"}
		if n == 1 {
			phases = append([]string{"etcd-ca"}, phases...)
		} else {
			if err := os.MkdirAll(etcdDir(n), 0o700); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"ca.crt", "ca.key"} {
				data, err := os.ReadFile(filepath.Join(etcdDir(1), f))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(etcdDir(n), f), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, phase := range phases {
			if out, err := exec.Command(kubeadm, "init", "phase", "certs", phase, "--config", cfg).CombinedOutput(); err != nil {
				t.Fatalf("kubeadm init phase certs %s (host %d): %v\n%s", phase, n, err, out)
			}
		}
	}
	return etcdDir
}

// certsConfig writes agent n's configuration with host n's kubeadm
// files: the harness writes one set of files for every agent (host 1's,
// with the server certificate on the peer side too), which this turns
// into host n's server, peer and healthcheck-client certificates. Hosts
// other than staticPod run the embedded runtime.
func certsConfig(t *testing.T, c *harness.Cluster, etcdDir func(int) string, n, staticPod int) {
	t.Helper()
	c.WriteConfig(n)
	data, err := os.ReadFile(c.ConfigPath(n))
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	replace := func(old, new string) {
		if !strings.Contains(s, old) {
			t.Fatalf("agent %d's configuration has no %q to replace:\n%s", n, old, s)
		}
		s = strings.ReplaceAll(s, old, new)
	}
	one := etcdDir(1)
	replace(fmt.Sprintf("peer: {certFile: %s/server.crt, keyFile: %s/server.key", one, one), fmt.Sprintf("peer: {certFile: %s/peer.crt, keyFile: %s/peer.key", one, one))
	replace(one+"/", etcdDir(n)+"/")
	if n != staticPod {
		replace("  runtime: static-pod\n", "")
		replace(fmt.Sprintf("staticPod:\n  manifestDir: %s\n", c.ManifestDir(n)), "")
	}
	if err := os.WriteFile(c.ConfigPath(n), []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// certsRun runs the binary and returns its combined output and exit code.
func certsRun(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := etcdlet(t, args...)
	return out + errOut, code
}

func certsRead(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	c, err := pki.ReadCertificate(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// certsServed is the certificate a member's TLS listener serves now, in a new
// handshake.
func certsServed(t *testing.T, files *harness.TLSFiles, rawURL string) (*x509.Certificate, error) {
	t.Helper()
	cfg, err := files.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// certsRestartLog is what an agent logs when it restarts its member for
// `certs renew`.
const certsRestartLog = "restarting the local member (member-restart task)"

func certsSerial(c *x509.Certificate) string {
	if c == nil {
		return "nothing"
	}
	return "serial " + pki.SerialString(c)
}

// certsExpiryMetric is the agent's series for a certificate file.
func certsExpiryMetric(file, usage string) string {
	return fmt.Sprintf(`etcdlet_certificate_expiry_timestamp_seconds{file="%s",usage="%s"}`, file, usage)
}

// A three-host cluster on certificates the real kubeadm v1.37.1 made
// (`kubeadm init phase certs`), hosts 1 and 2 with the embedded runtime,
// host 3 as a static pod: `etcdlet certs check` and the agent's metric
// report every certificate, and `etcdlet certs renew`, run on one host
// after the other, replaces each host's certificates (keeping the old
// files), restarts its member, which then serves the new certificates,
// while a writer keeps writing: the cluster never loses quorum. While
// another member is down the restart is refused, the renewed files stay,
// and --restart-only restarts the member once the cluster is whole again.
//
// Needs ETCDLET_KUBE_NODE (export ETCDLET_KUBE_NODE=$(hack/kube-node.sh),
// the kubeadm binary) and KUBEBUILDER_ASSETS (export
// KUBEBUILDER_ASSETS=$(hack/envtest.sh), the etcd binary of the static
// pod); make test sets both.
func TestCertsKubeadmCheckAndRenew(t *testing.T) {
	t.Parallel()
	const staticPod = 3
	etcd := harness.EtcdBinary(t)
	root := t.TempDir()
	etcdDir := certsKubeadmPKI(t, root, func(n int) string { return fmt.Sprintf("127.0.%d.%d", netCertsKubeadm, n) })
	pkiDir := func(n int) string { return filepath.Dir(etcdDir(n)) }
	// The harness's own client and the configuration it writes are host
	// 1's; certsConfig makes each host's its own.
	one := etcdDir(1)
	files := &harness.TLSFiles{CA: filepath.Join(one, "ca.crt"), ServerCert: filepath.Join(one, "server.crt"), ServerKey: filepath.Join(one, "server.key"),
		ClientCert: filepath.Join(one, "healthcheck-client.crt"), ClientKey: filepath.Join(one, "healthcheck-client.key")}
	c := harness.NewCluster(t, binary, filepath.Join(root, "cluster"), harness.Options{Net: netCertsKubeadm, StaticPod: etcd, TLS: files})
	if c.IP(3) != fmt.Sprintf("127.0.%d.3", netCertsKubeadm) {
		t.Fatalf("the harness puts host 3 on %s", c.IP(3))
	}
	c.WriteMembers(1, 2, 3)
	for n := 1; n <= 3; n++ {
		certsConfig(t, c, etcdDir, n, staticPod)
	}
	for n := 1; n <= 3; n++ {
		c.Start(n)
	}
	cli := c.Client()
	c.Wait(cli, convergeTimeout, 1, 2, 3)

	// certs check: every file the configuration names, and kube-apiserver's
	// beside the CA; the agent's metric says the same expiry.
	out, code := certsRun(t, "certs", "check", "-c", c.ConfigPath(1))
	if code != 0 || !strings.Contains(out, "5 certificate files: 5 ok") || !strings.Contains(out, filepath.Join(pkiDir(1), "apiserver-etcd-client.crt")) ||
		!strings.Contains(out, "subject:    CN=cp-1") || !strings.Contains(out, "IP:"+c.IP(1)) {
		t.Fatalf("certs check: exit %d\n%s", code, out)
	}
	out, code = certsRun(t, "certs", "check", "-c", c.ConfigPath(staticPod), "-o", "json")
	var rep struct {
		Certificates []struct {
			Path, Usage, Status, Verification string
			NotAfter                          time.Time
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 0 || len(rep.Certificates) != 5 {
		t.Fatalf("certs check -o json: exit %d, %v\n%s", code, err, out)
	}
	for _, f := range rep.Certificates {
		if want := certsRead(t, f.Path).NotAfter; !f.NotAfter.Equal(want) || f.Status != "ok" ||
			(f.Usage != "ca" && f.Verification != pki.VerifyOK) {
			t.Errorf("%s (%s): not after %s, %s, %s; want not after %s, ok, verified", f.Path, f.Usage, f.NotAfter, f.Status, f.Verification, want)
		}
	}
	for _, f := range []struct{ file, usage string }{
		{filepath.Join(etcdDir(1), "server.crt"), "etcd-server"}, {filepath.Join(pkiDir(1), "apiserver-etcd-client.crt"), "apiserver-etcd-client"},
	} {
		waitMetric(t, c.Agent(1), certsExpiryMetric(f.file, f.usage), "the file's not after", equals(float64(certsRead(t, f.file).NotAfter.Unix())))
	}

	w := c.StartWriter(cli)
	renew := func(n int, extra ...string) (string, int) {
		args := append([]string{"certs", "renew", "-c", c.ConfigPath(n), "--ca-cert", filepath.Join(etcdDir(n), "ca.crt"),
			"--ca-key", filepath.Join(etcdDir(n), "ca.key"), "--out-dir", etcdDir(n), "--validity", "9000h"}, extra...)
		return certsRun(t, args...)
	}
	// servesRenewed asserts what renew's restart promises for host n: its
	// listeners serve the renewed files, and the metric shows them.
	servesRenewed := func(n int, before map[string]*x509.Certificate) {
		t.Helper()
		for file, old := range before {
			now := certsRead(t, file)
			if !now.NotAfter.After(old.NotAfter) || now.Subject.String() != old.Subject.String() {
				t.Errorf("%s: not after %s, subject %s; was %s, %s", file, now.NotAfter, now.Subject, old.NotAfter, old.Subject)
			}
			kept, _ := filepath.Glob(file + ".*.bak")
			if len(kept) != 1 || !certsRead(t, kept[0]).Equal(old) {
				t.Errorf("%s: old files kept %v, want the previous certificate", file, kept)
			}
		}
		for _, l := range []struct{ url, file string }{{c.ClientURL(n), "server.crt"}, {c.PeerURL(n), "peer.crt"}} {
			got, err := certsServed(t, c.Opts.TLS, l.url)
			if want := certsRead(t, filepath.Join(etcdDir(n), l.file)); err != nil || !got.Equal(want) {
				t.Errorf("host %d %s serves %s (%v), want the renewed %s (serial %s)", n, l.url, certsSerial(got), err, l.file, pki.SerialString(want))
			}
		}
		server := filepath.Join(etcdDir(n), "server.crt")
		waitMetric(t, c.Agent(n), certsExpiryMetric(server, "etcd-server"), "the renewed not after", equals(float64(certsRead(t, server).NotAfter.Unix())))
	}
	certsOf := func(n int) map[string]*x509.Certificate {
		m := map[string]*x509.Certificate{}
		for _, f := range []string{filepath.Join(etcdDir(n), "server.crt"), filepath.Join(etcdDir(n), "peer.crt"),
			filepath.Join(etcdDir(n), "healthcheck-client.crt"), filepath.Join(pkiDir(n), "apiserver-etcd-client.crt")} {
			m[f] = certsRead(t, f)
		}
		return m
	}

	// Host 2 down: host 1's renewal writes its files, but the restart is
	// refused, naming host 2; the member keeps running.
	c.Agent(2).Stop()
	before1 := certsOf(1)
	out, code = renew(1)
	if code == 0 || !strings.Contains(out, c.Name(2)+" is not healthy") || !strings.Contains(out, "etcdlet certs renew --restart-only") ||
		!strings.Contains(out, "Previous files kept:") {
		t.Fatalf("renew with host 2 down: exit %d, want a refused restart\n%s", code, out)
	}
	// The member was not restarted; embedded etcd reads its certificate
	// files on every new connection, so it serves the renewed one already.
	if n := c.Agent(1).CountLog(certsRestartLog, nil); n != 0 {
		t.Errorf("host 1's member was restarted %d times, though refused", n)
	}
	if got, err := certsServed(t, c.Opts.TLS, c.ClientURL(1)); err != nil || !got.Equal(certsRead(t, filepath.Join(etcdDir(1), "server.crt"))) {
		t.Errorf("host 1 serves %v (%v) after a refused restart; want the renewed server.crt", certsSerial(got), err)
	}
	c.Start(2)
	c.Wait(cli, convergeTimeout, 1, 2, 3)
	out, code = certsRun(t, "certs", "renew", "--restart-only", "-c", c.ConfigPath(1))
	if code != 0 || !strings.Contains(out, "Succeeded") || !strings.Contains(out, "is back, serving the certificate files") {
		t.Fatalf("renew --restart-only on host 1: exit %d\n%s", code, out)
	}
	servesRenewed(1, before1)

	// The others in turn, the static pod last: its kubelet starts etcd anew.
	for _, n := range []int{2, staticPod} {
		before := certsOf(n)
		starts := c.Kubelet(n).Starts()
		out, code := renew(n)
		if code != 0 || !strings.Contains(out, "is back, serving the certificate files") {
			t.Fatalf("renew on host %d: exit %d\n%s", n, code, out)
		}
		servesRenewed(n, before)
		if n == staticPod && c.Kubelet(n).Starts() <= starts {
			t.Errorf("the static pod's etcd was not started again (%d starts, %d before)", c.Kubelet(n).Starts(), starts)
		}
		if n != staticPod && c.Agent(n).CountLog(certsRestartLog, map[string]string{"reason": "its renewed certificates"}) != 1 {
			t.Errorf("host %d's agent did not log its member's restart once", n)
		}
	}
	checkWrites(t, w)
	c.Wait(cli, convergeTimeout, 1, 2, 3)
	for n := 1; n <= 3; n++ {
		if out, code := certsRun(t, "certs", "check", "-c", c.ConfigPath(n)); code != 0 {
			t.Errorf("certs check on host %d after the renewals: exit %d\n%s", n, code, out)
		}
	}
}
