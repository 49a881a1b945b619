// Package etcdtest starts real etcd clusters in the test process, with
// the configuration etcdlet's embedded runtime builds, for the tests of
// the daemon packages that talk to etcd (the writer lock, the reconciler,
// the embedded runtime). Members listen on 127.0.0.1 and free ports.
package etcdtest

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/embedded"
)

// Member is one running member.
type Member struct {
	Etcd      *embed.Etcd
	Name      string
	ClientURL string
	PeerURL   string
	// ClientAddr is ClientURL's host:port.
	ClientAddr string
	t          testing.TB
	closeOnce  sync.Once
}

// ID is the member's ID.
func (m *Member) ID() uint64 { return uint64(m.Etcd.Server.MemberID()) }

// ClusterID is the ID of the member's cluster.
func (m *Member) ClusterID() uint64 { return uint64(m.Etcd.Server.Cluster().ID()) }

// exitWhenStopped closes the member's listeners once its server stops,
// as the etcd process exits when it is removed from the cluster: a removed
// member that kept answering on its client URL would let a client keep a
// stream on it that no real cluster keeps.
func (m *Member) exitWhenStopped() {
	<-m.Etcd.Server.StopNotify()
	m.Close()
}

// Close stops the member; it may be called more than once. A member that
// does not stop within a minute fails the test instead of hanging it.
func (m *Member) Close() {
	m.closeOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.Etcd.Close()
		}()
		select {
		case <-done:
		case <-time.After(time.Minute):
			m.t.Errorf("member %s did not stop within a minute", m.Name)
		}
	})
}

// Start starts an n-member cluster and waits until every member is ready.
// The members stop when the test ends.
func Start(t testing.TB, n int) []*Member {
	t.Helper()
	dir := t.TempDir()
	ports := freePorts(t, 3*n)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	url := func(p int) string { return "http://127.0.0.1:" + strconv.Itoa(p) }
	var initial string
	for i := range n {
		if i > 0 {
			initial += ","
		}
		initial += fmt.Sprintf("m%d=%s", i, url(ports[3*i+1]))
	}
	members := make([]*Member, n)
	var wg sync.WaitGroup
	for i := range n {
		spec := runtime.Spec{
			Name: fmt.Sprintf("m%d", i), DataDir: filepath.Join(dir, strconv.Itoa(i)),
			AdvertisePeerURL: url(ports[3*i+1]), ListenPeerURLs: []string{url(ports[3*i+1])},
			AdvertiseClientURL: url(ports[3*i]), ListenClientURLs: []string{url(ports[3*i])},
			ListenMetricsURL: url(ports[3*i+2]), InitialCluster: initial, InitialClusterState: runtime.StateNew,
			Token: "etcdtest", LogLevel: "error",
		}
		e, err := embedded.Start(spec, quiet)
		if err != nil {
			t.Fatal(err)
		}
		m := &Member{Etcd: e, Name: spec.Name, ClientURL: spec.AdvertiseClientURL, PeerURL: spec.AdvertisePeerURL,
			ClientAddr: "127.0.0.1:" + strconv.Itoa(ports[3*i]), t: t}
		t.Cleanup(m.Close)
		go m.exitWhenStopped()
		members[i] = m
		wg.Go(func() {
			select {
			case <-e.Server.ReadyNotify():
			case <-time.After(30 * time.Second):
				t.Errorf("member %s was not ready within 30s", spec.Name)
			}
		})
	}
	wg.Wait()
	return members
}

// ClientURLs returns the members' client URLs.
func ClientURLs(members []*Member) []string {
	urls := make([]string, len(members))
	for i, m := range members {
		urls[i] = m.ClientURL
	}
	return urls
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var listeners []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range listeners {
		l.Close()
	}
	return ports
}

// SingleSpec is the spec of a one-member cluster on free loopback ports,
// for tests that start it through a runtime.
func SingleSpec(t testing.TB) runtime.Spec {
	t.Helper()
	ports := freePorts(t, 3)
	url := func(p int) string { return "http://127.0.0.1:" + strconv.Itoa(p) }
	return runtime.Spec{
		Name: "m0", DataDir: filepath.Join(t.TempDir(), "data"),
		AdvertisePeerURL: url(ports[1]), ListenPeerURLs: []string{url(ports[1])},
		AdvertiseClientURL: url(ports[0]), ListenClientURLs: []string{url(ports[0])},
		ListenMetricsURL: url(ports[2]), InitialCluster: "m0=" + url(ports[1]), InitialClusterState: runtime.StateNew,
		Token: "etcdtest", LogLevel: "error",
	}
}
