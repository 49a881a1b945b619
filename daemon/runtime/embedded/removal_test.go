package embedded

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/server/v3/embed"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/etcdlet/etcdlet/daemon/runtime"
)

// A member that is removed while clients keep asking it for its Status
// stops cleanly, and the process it runs in lives on: etcd v3.7.0 panics
// in that race (etcd-io/etcd#21966), which would take an embedding agent
// down with it. Each round removes one member of a fresh cluster while
// eight callers hammer the member's Status over one connection, the
// pattern that makes the race likely.
func TestStatusDuringRemovalDoesNotCrashTheProcess(t *testing.T) {
	for round := range 3 {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			members := startCluster(t, 3)
			victim, other := members[2], members[0]

			conn, err := grpc.NewClient("passthrough:///"+victim.clientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for ctx.Err() == nil {
						callCtx, done := context.WithTimeout(ctx, time.Second)
						_, _ = pb.NewMaintenanceClient(conn).Status(callCtx, &pb.StatusRequest{})
						done()
					}
				})
			}
			// etcd refuses the removal until every member has been
			// connected for 5s.
			cluster := pb.NewClusterClient(dial(t, other.clientAddr))
			deadline := time.Now().Add(30 * time.Second)
			for {
				removeCtx, removeDone := context.WithTimeout(context.Background(), 5*time.Second)
				_, err = cluster.MemberRemove(removeCtx, &pb.MemberRemoveRequest{ID: uint64(victim.etcd.Server.MemberID())})
				removeDone()
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("remove member: %v", err)
				}
				time.Sleep(200 * time.Millisecond)
			}
			select {
			case <-victim.etcd.Server.StopNotify():
			case <-time.After(30 * time.Second):
				t.Fatal("the removed member did not stop within 30s")
			}
			cancel()
			wg.Wait()
		})
	}
}

type testMember struct {
	etcd       *embed.Etcd
	clientAddr string
}

// startCluster starts n embedded members on 127.0.0.1 with the
// configuration the runtime builds.
func startCluster(t *testing.T, n int) []*testMember {
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
	members := make([]*testMember, n)
	var wg sync.WaitGroup
	for i := range n {
		spec := runtime.Spec{
			Name: fmt.Sprintf("m%d", i), DataDir: filepath.Join(dir, strconv.Itoa(i)),
			AdvertisePeerURL: url(ports[3*i+1]), ListenPeerURLs: []string{url(ports[3*i+1])},
			AdvertiseClientURL: url(ports[3*i]), ListenClientURLs: []string{url(ports[3*i])},
			ListenMetricsURL: url(ports[3*i+2]), InitialCluster: initial, InitialClusterState: runtime.StateNew,
			Token: "removal-race", LogLevel: "error",
		}
		e, err := Start(spec, quiet)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		members[i] = &testMember{etcd: e, clientAddr: "127.0.0.1:" + strconv.Itoa(ports[3*i])}
		wg.Go(func() {
			select {
			case <-e.Server.ReadyNotify():
			case <-time.After(30 * time.Second):
				t.Error("a member was not ready within 30s")
			}
		})
	}
	wg.Wait()
	return members
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func freePorts(t *testing.T, n int) []int {
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
