package embedded_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/internal/eventually"
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
			members := etcdtest.Start(t, 3)
			victim, other := members[2], members[0]

			conn, err := grpc.NewClient("passthrough:///"+victim.ClientAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
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
			cluster := pb.NewClusterClient(dial(t, other.ClientAddr))
			eventually.Nil(t, 30*time.Second, "remove member", func() error {
				removeCtx, removeDone := context.WithTimeout(context.Background(), 5*time.Second)
				defer removeDone()
				_, err := cluster.MemberRemove(removeCtx, &pb.MemberRemoveRequest{ID: victim.ID()})
				return err
			})
			select {
			case <-victim.Etcd.Server.StopNotify():
			case <-time.After(30 * time.Second):
				t.Fatal("the removed member did not stop within 30s")
			}
			cancel()
			wg.Wait()
		})
	}
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
