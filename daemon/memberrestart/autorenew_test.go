package memberrestart

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/task"
	"github.com/etcdlet/etcdlet/pki"
)

// servingMember is a TLS listener on loopback that serves, like a
// member's client and peer listeners, whatever server.crt and key were
// last loaded with load.
type servingMember struct {
	dir  string
	pair atomic.Pointer[tls.Certificate]
	url  string
}

func serveMember(t *testing.T, dir string) *servingMember {
	t.Helper()
	m := &servingMember{dir: dir}
	m.load(t)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return m.pair.Load(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				_ = c.(*tls.Conn).Handshake()
				c.Close()
			}(c)
		}
	}()
	m.url = "https://" + l.Addr().String()
	return m
}

// load has the member serve the files in place: what a restart does.
func (m *servingMember) load(t *testing.T) {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(m.dir, "server.crt"), filepath.Join(m.dir, "server.key"))
	if err != nil {
		t.Fatal(err)
	}
	m.pair.Store(&pair)
}

// A member whose served certificate is due gets its files renewed from the
// CA and a restart; one that is not due gets nothing; a refused restart is
// asked again only after a delay, without renewing the files again; a
// missing CA key or a CA that expires within renewBefore renews nothing.
// The clock is the real one (the member's handshake is verified at it);
// renewBefore moves the deadline instead.
func TestAutoRenew(t *testing.T) {
	now := time.Now()
	dir := filepath.Join(t.TempDir(), "etcd")
	ca, certPEM, keyPEM, err := pki.NewCA(pki.DefaultCAName, pki.KeyECDSA, pki.DefaultCAValidity, now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	caCert, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if _, err := pki.Write([]pki.File{{Path: caKey, Data: keyPEM, Mode: 0o600}, {Path: caCert, Data: certPEM, Mode: 0o644}}, pki.WriteOptions{Now: now}); err != nil {
		t.Fatal(err)
	}
	set, err := pki.Issue(ca, pki.Request{NodeName: "cp-0", Addresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")}, Validity: 60 * 24 * time.Hour,
		KeyType: pki.KeyECDSA, Now: now.Add(-time.Hour)}, pki.Profiles())
	if err != nil {
		t.Fatal(err)
	}
	layout := pki.KubeadmLayout(dir)
	if _, err := pki.Install(ca, set, layout, pki.WriteOptions{Now: now}); err != nil {
		t.Fatal(err)
	}
	member := serveMember(t, dir)
	dial := config.TLSFiles{CertFile: filepath.Join(dir, "healthcheck-client.crt"), KeyFile: filepath.Join(dir, "healthcheck-client.key"), CAFile: caCert}
	var restarts int
	restart := func(context.Context) (task.Task, error) {
		restarts++
		return task.Task{ID: "t1", Phase: task.Succeeded}, nil
	}
	clock := now
	r := &AutoRenew{Before: 30 * 24 * time.Hour, Validity: 365 * 24 * time.Hour, CACert: caCert, CAKey: caKey, Layout: layout,
		Self: func() identity.Member {
			return identity.Member{IP: netip.MustParseAddr("127.0.0.1"), ClientURL: member.url, PeerURL: member.url}
		},
		Files:       Files{ClientCert: filepath.Join(dir, "server.crt"), PeerCert: filepath.Join(dir, "peer.crt"), ClientDial: dial, PeerDial: dial},
		CallTimeout: 5 * time.Second, Restart: func(ctx context.Context) (task.Task, error) { return restart(ctx) },
		Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return clock }, interval: time.Minute}
	check := func(t *testing.T) error {
		t.Helper()
		return r.Check(t.Context())
	}
	served := func() time.Time { return member.pair.Load().Leaf.NotAfter }

	// Sixty days left: not due within 30.
	if err := check(t); err != nil || restarts != 0 {
		t.Fatalf("not due: %v, %d restarts", err, restarts)
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, "server.crt.*.bak")); len(kept) != 0 {
		t.Fatalf("renewed what was not due: %v", kept)
	}

	// Renewing 90 days ahead, the served certificate is due. The restart
	// is refused: the files are renewed, the member still serves the old
	// one, and nothing is asked until the delay is over.
	r.Before = 90 * 24 * time.Hour
	restart = func(context.Context) (task.Task, error) {
		restarts++
		return task.Task{ID: "t2", Phase: task.Rejected, LastOperation: task.Operation{Description: "rejected: another member is down"}}, nil
	}
	err = check(t)
	if err == nil || restarts != 1 {
		t.Fatalf("a refused restart: %v, %d restarts; want an error after one", err, restarts)
	}
	r.failed(err)
	file, err := pki.ReadCertificate(filepath.Join(dir, "server.crt"))
	if err != nil || !file.NotAfter.After(now.Add(300*24*time.Hour)) {
		t.Fatalf("the files were not renewed: %v %v", file.NotAfter, err)
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, "server.crt.*.bak")); len(kept) != 1 {
		t.Errorf("old server.crt kept %v, want once", kept)
	}
	if served().Equal(file.NotAfter) {
		t.Fatal("the member serves the renewed certificate without a restart")
	}
	if err := check(t); err != nil || restarts != 1 {
		t.Fatalf("within the delay: %v, %d restarts; want nothing", err, restarts)
	}

	// After the delay the restart is asked again, the files are not
	// renewed again, and once the member serves them nothing is due.
	clock = clock.Add(2 * time.Minute)
	restart = func(context.Context) (task.Task, error) {
		restarts++
		member.load(t)
		return task.Task{ID: "t3", Phase: task.Succeeded}, nil
	}
	if err := check(t); err != nil || restarts != 2 {
		t.Fatalf("after the delay: %v, %d restarts; want the restart asked again", err, restarts)
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, "server.crt.*.bak")); len(kept) != 1 {
		t.Errorf("the files were renewed again: kept %v", kept)
	}
	if !served().Equal(file.NotAfter) {
		t.Errorf("the member serves a certificate until %s, want the renewed one's %s", served(), file.NotAfter)
	}
	if err := check(t); err != nil || restarts != 2 {
		t.Fatalf("renewed and served: %v, %d restarts; want nothing", err, restarts)
	}

	// Due again (renewing 400 days ahead), but the CA key is gone:
	// nothing renewed, nothing restarted, an error to retry later.
	r.Before = 400 * 24 * time.Hour
	if err := os.Rename(caKey, caKey+".offline"); err != nil {
		t.Fatal(err)
	}
	if err := check(t); err == nil || restarts != 2 {
		t.Fatalf("without the CA key: %v, %d restarts; want an error and no restart", err, restarts)
	}
	if err := os.Rename(caKey+".offline", caKey); err != nil {
		t.Fatal(err)
	}
	// A CA that expires within renewBefore: renewing would not help.
	r.Before = pki.DefaultCAValidity + 24*time.Hour
	if err := check(t); err == nil || restarts != 2 || !strings.Contains(err.Error(), "renew the CA") {
		t.Fatalf("with the CA expiring within renewBefore: %v, %d restarts; want a refusal naming the CA", err, restarts)
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, "server.crt.*.bak")); len(kept) != 1 {
		t.Errorf("files renewed although the CA expires first: kept %v", kept)
	}
}
