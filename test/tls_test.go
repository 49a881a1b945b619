package test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlet/etcdlet/test/harness"
)

// Every test cluster runs with TLS unless it says why not; here: peer and
// client URLs are https, and a client without a certificate is refused.
func TestTLSByDefault(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netTLS, 3)
	c.Start(4)
	c.WriteMembers(1, 2, 3, 4)
	c.Wait(cli, convergeTimeout, 1, 2, 3, 4)

	members, err := c.MemberList(cli)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		for _, u := range append(m.PeerURLs, m.ClientURLs...) {
			if !strings.HasPrefix(u, "https://") {
				t.Errorf("member %s has a plain-text URL %s", m.Name, u)
			}
		}
	}
	if err := plainClientRefused(c.ClientURL(1), c.Opts.TLS.CA); err != nil {
		t.Error(err)
	}
	if n := c.Agent(1).CountLog("insecure configuration: etcd.insecure is set", nil); n != 0 {
		t.Errorf("a secured agent warned %d times that it is insecure", n)
	}
}

// A host listed by mistake, or by an attacker who got an address into the
// list, holds a certificate that the cluster's CA did not sign. The writer
// adds it as a learner (the list says so), but etcd itself refuses its
// peer connections and it never receives the keyspace. A host with the
// CA's certificate then joins in its place, which shows that the refusal
// was the certificate's doing.
func TestPeerWithoutTheCAsCertificateCannotJoin(t *testing.T) {
	t.Parallel()
	c, cli := startCluster(t, netPeerAuth, 2)
	put(t, cli, "/secret", "every Secret of the cluster")

	// The peer listener asks for a client certificate signed by the CA.
	peerURL := "https://" + net.JoinHostPort(c.IP(1), strconv.Itoa(c.Ports.Peer)) + "/members"
	if err := peerGet(peerURL, c.Opts.TLS.CA, "", ""); err == nil {
		t.Error("the peer endpoint answered a client without a certificate")
	}
	if err := peerGet(peerURL, c.Opts.TLS.CA, c.Opts.TLS.ServerCert, c.Opts.TLS.ServerKey); err != nil {
		t.Fatalf("the peer endpoint refused a certificate of the CA: %v", err)
	}

	// A certificate from another CA, for the listed address; the rogue
	// trusts the cluster's CA, which is public.
	rogue, err := harness.GenerateTLS(filepath.Join(t.TempDir(), "rogue"), []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(c.IP(3))})
	if err != nil {
		t.Fatal(err)
	}
	c.WriteMembers(1, 2, 3)
	harness.Eventually(t, convergeTimeout, "the writer adds the listed address as a learner", func() error {
		members, err := c.MemberList(cli)
		if err != nil {
			return err
		}
		for _, m := range members {
			if m.IsLearner && len(m.PeerURLs) == 1 && strings.Contains(m.PeerURLs[0], c.IP(3)) {
				return nil
			}
		}
		return errorf("no learner for %s in %v", c.IP(3), members)
	})

	rejected := func() int {
		return c.Agent(1).CountLog("rejected connection on peer endpoint", nil) + c.Agent(2).CountLog("rejected connection on peer endpoint", nil)
	}
	before := rejected()
	stop, exited := startRogueMember(t, c, rogue)
	harness.Eventually(t, convergeTimeout, "etcd refuses the rogue's peer connections", func() error {
		if n := rejected(); n <= before {
			return errorf("%d peer connections rejected, as many as before the rogue started", n)
		}
		return nil
	})
	// The rogue cannot even learn the cluster's members, so it gives up;
	// had it got in, it would serve the key from its own copy.
	select {
	case <-exited:
	case <-time.After(convergeTimeout):
		if err := rogueHasNoSecret(c, rogue); err != nil {
			t.Error(err)
		}
		stop()
	}
	members, err := c.MemberList(cli)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if strings.Contains(strings.Join(m.PeerURLs, ","), c.IP(3)) && m.Name != "" {
			t.Errorf("the rogue started as member %s", m.Name)
		}
	}

	// The real host 3, with the CA's certificate, joins and reads the key.
	c.Start(3)
	c.Wait(cli, convergeTimeout, 1, 2, 3)
	three := c.ClientOf(3)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := three.Get(ctx, "/secret", clientv3.WithSerializable())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("host 3 with the CA's certificate does not have the key: %v %v", resp, err)
	}
}

// peerGet GETs a peer endpoint path, trusting ca and presenting the
// certificate when cert is set.
func peerGet(url, ca, cert, key string) error {
	tlsConfig, err := transport.TLSInfo{TrustedCAFile: ca, CertFile: cert, KeyFile: key}.ClientConfig()
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// startRogueMember runs etcd by hand as member 3 of the cluster, joining
// the existing members with the rogue's certificates: what a host outside
// the PKI would do. It returns a stop function and a channel closed when
// the process exits.
func startRogueMember(t *testing.T, c *harness.Cluster, rogue *harness.TLSFiles) (func(), <-chan struct{}) {
	t.Helper()
	peer := func(n int) string { return "https://" + net.JoinHostPort(c.IP(n), strconv.Itoa(c.Ports.Peer)) }
	client := "https://" + net.JoinHostPort(c.IP(3), strconv.Itoa(c.Ports.Client))
	var initial []string
	for n := 1; n <= 3; n++ {
		initial = append(initial, c.Name(n)+"="+peer(n))
	}
	logFile, err := os.Create(filepath.Join(t.TempDir(), "rogue.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(harness.EtcdBinary(t), "--name", c.Name(3), "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--listen-peer-urls", peer(3), "--initial-advertise-peer-urls", peer(3),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "existing",
		"--peer-cert-file", rogue.ServerCert, "--peer-key-file", rogue.ServerKey, "--peer-trusted-ca-file", c.Opts.TLS.CA, "--peer-client-cert-auth",
		"--cert-file", rogue.ServerCert, "--key-file", rogue.ServerKey, "--trusted-ca-file", rogue.CA, "--client-cert-auth",
		"--listen-metrics-urls", "http://"+net.JoinHostPort(c.IP(3), strconv.Itoa(c.Ports.Metrics)))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(exited)
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	t.Cleanup(stop)
	return stop, exited
}

// rogueHasNoSecret asks the rogue's own member (serializable: its local
// copy) for the key.
func rogueHasNoSecret(c *harness.Cluster, rogue *harness.TLSFiles) error {
	tlsConfig, err := rogue.ClientConfig()
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{c.ClientURL(3)}, DialTimeout: time.Second, TLS: tlsConfig, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/secret", clientv3.WithSerializable())
	if err == nil && len(resp.Kvs) > 0 {
		return errorf("the rogue member serves the key from its own copy")
	}
	return nil
}

// An operator without a PKI: `etcdlet certs issue` makes the member
// certificates from an etcd CA, and a cluster runs on them, with
// kube-apiserver's client certificate accepted.
func TestCertsIssueMakesAWorkingCluster(t *testing.T) {
	t.Parallel()
	ca, err := harness.GenerateTLS(filepath.Join(t.TempDir(), "ca"), nil)
	if err != nil {
		t.Fatal(err)
	}
	pki := filepath.Join(t.TempDir(), "pki")
	// One certificate for the addresses of all three agents, as they
	// share one set of files here; on real hosts each runs it with its own.
	ips := fmt.Sprintf("127.0.%d.1,127.0.%d.2,127.0.%d.3", netCertsIssue, netCertsIssue, netCertsIssue)
	out, err := exec.Command(binary, "certs", "issue", "--ca-cert", ca.CA, "--ca-key", ca.CAKey, "--address", ips,
		"--name", "cp-0", "--out-dir", filepath.Join(pki, "etcd")).CombinedOutput()
	if err != nil {
		t.Fatalf("etcdlet certs issue: %v\n%s", err, out)
	}
	etcdDir := filepath.Join(pki, "etcd")
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{filepath.Join(etcdDir, "server.key"), 0o600}, {filepath.Join(etcdDir, "server.crt"), 0o644}, {filepath.Join(pki, "apiserver-etcd-client.key"), 0o600}} {
		fi, err := os.Stat(f.path)
		if err != nil || fi.Mode().Perm() != f.mode {
			t.Errorf("%s: %v, mode %v; want mode %v", f.path, err, fi, f.mode)
		}
	}
	files := &harness.TLSFiles{CA: ca.CA, ServerCert: filepath.Join(etcdDir, "server.crt"), ServerKey: filepath.Join(etcdDir, "server.key"),
		ClientCert: filepath.Join(etcdDir, "healthcheck-client.crt"), ClientKey: filepath.Join(etcdDir, "healthcheck-client.key")}
	c, cli := startCluster(t, netCertsIssue, 3, func(o *harness.Options) { o.TLS = files })
	put(t, cli, "/written-by-etcdlet", "x")

	apiserver := &harness.TLSFiles{CA: ca.CA, ClientCert: filepath.Join(pki, "apiserver-etcd-client.crt"), ClientKey: filepath.Join(pki, "apiserver-etcd-client.key")}
	tlsConfig, err := apiserver.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	api, err := clientv3.New(clientv3.Config{Endpoints: []string{c.ClientURL(2)}, DialTimeout: time.Second, TLS: tlsConfig, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := api.Get(ctx, "/written-by-etcdlet"); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("kube-apiserver's client certificate: %v %v", resp, err)
	}
}
