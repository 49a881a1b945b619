package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"

	"go.etcd.io/etcd/server/v3/etcdserver"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// removalRacePanic is what etcd v3.7.0 panics with when a request asks the
// server whether it is a learner while its own removal is being applied:
// the apply loop has already dropped the local member, and
// RaftCluster.IsLocalMemberLearner panics instead of answering
// (etcd-io/etcd#21966, open). Maintenance/Status takes that path, and every
// etcdlet asks every member for its Status on each pass, so a removed
// member's Status calls race its removal all the time. In its own process
// the panic would only end a member that is stopping anyway; embedded, it
// takes the whole agent down with it, before the agent can move the
// removed member's data aside.
const removalRacePanic = "failed to find local ID in cluster members"

// stoppingServer says whether the embedded server has begun to stop; nil
// until it has started.
type stoppingServer struct {
	server atomic.Pointer[etcdserver.EtcdServer]
}

func (s *stoppingServer) stopping() bool {
	srv := s.server.Load()
	if srv == nil {
		return false
	}
	select {
	case <-srv.StoppingNotify():
		return true
	default:
		return false
	}
}

// errStopping answers a request the stopping server does not run.
var errStopping = status.Error(codes.Unavailable, "etcdserver: this member is being removed or stopped")

// removalRaceOptions are gRPC server options that answer a request
// Unavailable, instead of letting its panic end the process, in two cases
// only: the removal race above, and any panic of a request that raced the
// server's own stop (etcd closes the backend under in-flight requests: a
// removed member's Status then dereferences a closed bolt transaction).
// Every other panic crashes the process as before. grpc.UnaryInterceptor
// and grpc.StreamInterceptor run outside etcd's own interceptor chain,
// which asks IsLearner too.
func removalRaceOptions(log *slog.Logger, srv *stoppingServer) []grpc.ServerOption {
	recovered := func(method string, err *error) {
		r := recover()
		if r == nil {
			return
		}
		msg, _ := r.(string)
		if msg != removalRacePanic && !srv.stopping() {
			panic(r)
		}
		log.Info("a request raced the removal or stop of this member; answered Unavailable instead of crashing (etcd-io/etcd#21966)",
			"method", method, "panic", fmt.Sprint(r))
		*err = errStopping
	}
	// A request that arrives once the server is stopping is answered at
	// once: etcd would run it against a backend that is closing, and a
	// panic there can leave the backend's read lock held (etcd takes it
	// without defer), so that every later request, and the server's own
	// graceful stop, would wait on it for ever.
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		if srv.stopping() {
			return nil, errStopping
		}
		defer recovered(info.FullMethod, &err)
		return handler(ctx, req)
	}
	stream := func(stream any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		if srv.stopping() {
			return errStopping
		}
		defer recovered(info.FullMethod, &err)
		return handler(stream, ss)
	}
	return []grpc.ServerOption{grpc.UnaryInterceptor(unary), grpc.StreamInterceptor(stream)}
}
