// Package embedded runs the local etcd member inside the etcdlet process
// with go.etcd.io/etcd/server/v3/embed (etcd.runtime: embedded).
package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdflags"
	"github.com/etcdlet/etcdlet/daemon/logging"
	"github.com/etcdlet/etcdlet/daemon/runtime"
)

// Runtime runs one embedded etcd server at a time.
type Runtime struct {
	log     *slog.Logger
	changed chan struct{}

	mu       sync.Mutex
	current  *instance
	status   runtime.Status
	stopping bool
}

// instance is one started server. embed.Etcd.Close must run exactly once
// (it closes channels), whether the agent stops the server or the server
// stopped on its own.
type instance struct {
	etcd      *embed.Etcd
	closeOnce sync.Once
}

// stopTimeout bounds the wait for etcd's own Close. etcd v3.7.0 can hang
// in it: a request that panicked on the closing backend (recovered in
// removal.go) may leave the backend's read lock held, and the graceful
// stop then waits for ever for the requests queued behind it, with the
// peer and metrics listeners still open. The member is stopping anyway,
// but the agent cannot start it again while those are held; so it exits,
// and the service manager's restart recovers the node (the removed
// member's data is then moved aside as usual).
const stopTimeout = time.Minute

func (i *instance) close(log *slog.Logger) {
	i.closeOnce.Do(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			CloseServer(i.etcd)
		}()
		select {
		case <-done:
		case <-time.After(stopTimeout):
			log.Error("embedded etcd did not stop within the timeout; exiting so that the service manager restarts etcdlet (etcd-io/etcd#21966)",
				"timeout", stopTimeout.String())
			os.Exit(1)
		}
	})
}

// CloseServer closes an embedded etcd server, also one that never became
// ready. etcd's Close first waits for the client servers, which start
// only once the member is ready, or once the server stops: a member that
// never was ready (its peers never answered, or a start given up) would
// hold Close for ever. Stopping the server first ends that wait; Close
// then stops it no further.
func CloseServer(e *embed.Etcd) {
	select {
	case <-e.Server.ReadyNotify():
	default:
		e.Server.Stop()
	}
	e.Close()
}

// New returns an embedded runtime that logs etcd's own messages through
// log (with component=etcd).
func New(log *slog.Logger) *Runtime {
	return &Runtime{log: log.With("component", "etcd"), changed: make(chan struct{}, 1)}
}

var _ runtime.Runtime = (*Runtime)(nil)

// Apply starts the embedded server unless it runs, and returns once its
// listeners are up; it does not wait for the member to be ready (a joining
// learner or a bootstrapping member waits for peers, which is the agent's
// concern). A running server keeps its flags: changing them needs a
// restart of etcdlet.
func (r *Runtime) Apply(_ context.Context, spec runtime.Spec) error {
	r.mu.Lock()
	if r.status.Running {
		r.mu.Unlock()
		return nil
	}
	r.mu.Unlock()

	e, err := Start(spec, r.log)
	if err != nil {
		return err
	}
	inst := &instance{etcd: e}
	r.mu.Lock()
	r.current, r.stopping = inst, false
	r.status = runtime.Status{Running: true, MemberID: uint64(e.Server.MemberID()), ClusterID: uint64(e.Server.Cluster().ID()), Exits: r.status.Exits}
	r.mu.Unlock()
	go r.watch(inst)
	go r.signalReady(inst)
	return nil
}

// signalReady wakes the agent once the member is ready (it has joined
// raft and published itself): a learner can be promoted from then on, and
// waiting for the next poll would only add latency to the join.
func (r *Runtime) signalReady(inst *instance) {
	select {
	case <-inst.etcd.Server.ReadyNotify():
		r.notify()
	case <-inst.etcd.Server.StopNotify():
	}
}

// watch notices a server that stops on its own: etcd stops the server of
// a member that was removed from the cluster, and on fatal errors.
func (r *Runtime) watch(inst *instance) {
	var err error
	select {
	case <-inst.etcd.Server.StopNotify():
		err = errors.New("etcd server stopped")
	case e, ok := <-inst.etcd.Err():
		if ok {
			err = e
		} else {
			err = errors.New("etcd server stopped")
		}
	}
	r.mu.Lock()
	ownStop := r.stopping || r.current != inst
	r.mu.Unlock()
	if ownStop {
		return
	}
	// Release listeners and files before the agent looks at the data dir.
	inst.close(r.log)
	r.mu.Lock()
	if r.current == inst {
		r.status.Running = false
		r.status.Exits++
		r.current = nil
	}
	r.mu.Unlock()
	r.log.Warn("embedded etcd stopped on its own", "error", err)
	r.notify()
}

// Stop closes the server; it returns when listeners and files are released.
func (r *Runtime) Stop(context.Context) error {
	r.mu.Lock()
	inst := r.current
	r.stopping = true
	r.mu.Unlock()
	if inst == nil {
		return nil
	}
	inst.close(r.log)
	r.mu.Lock()
	if r.current == inst {
		r.current = nil
		r.status = runtime.Status{MemberID: r.status.MemberID, ClusterID: r.status.ClusterID, Exits: r.status.Exits}
	}
	r.mu.Unlock()
	return nil
}

// Close stops the server: an embedded member lives in the agent's process.
func (r *Runtime) Close(ctx context.Context) error { return r.Stop(ctx) }

// Status reports whether the server runs and how often it exited on its own.
func (r *Runtime) Status() runtime.Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status
}

// Changed signals that the member became ready or stopped on its own.
func (r *Runtime) Changed() <-chan struct{} { return r.changed }

func (r *Runtime) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// Start starts an embedded etcd server for a spec, with etcdlet's
// configuration of it; it returns once the listeners are up.
func Start(spec runtime.Spec, log *slog.Logger) (*embed.Etcd, error) {
	srv := &stoppingServer{}
	cfg, err := serverConfig(spec, log)
	if err != nil {
		return nil, err
	}
	cfg.GRPCAdditionalServerOptions = append(cfg.GRPCAdditionalServerOptions, removalRaceOptions(log, srv)...)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd %s: %w", spec.Name, err)
	}
	srv.server.Store(e.Server)
	return e, nil
}

// serverConfig builds the embed configuration for a spec.
func serverConfig(spec runtime.Spec, log *slog.Logger) (*embed.Config, error) {
	cfg := embed.NewConfig()
	cfg.Name = spec.Name
	cfg.Dir = spec.DataDir
	var err error
	parse := func(what string, raws ...string) []url.URL {
		urls := make([]url.URL, 0, len(raws))
		for _, raw := range raws {
			u, perr := url.Parse(raw)
			if perr != nil && err == nil {
				err = fmt.Errorf("parse %s %q: %w", what, raw, perr)
			}
			if perr == nil {
				urls = append(urls, *u)
			}
		}
		return urls
	}
	cfg.ListenPeerUrls = parse("listen peer URL", spec.ListenPeerURLs...)
	cfg.AdvertisePeerUrls = parse("advertise peer URL", spec.AdvertisePeerURL)
	cfg.ListenClientUrls = parse("listen client URL", spec.ListenClientURLs...)
	cfg.AdvertiseClientUrls = parse("advertise client URL", spec.AdvertiseClientURL)
	cfg.ListenMetricsUrls = parse("metrics URL", spec.ListenMetricsURL)
	if err != nil {
		return nil, err
	}
	cfg.InitialCluster = spec.InitialCluster
	cfg.ClusterState = spec.InitialClusterState
	cfg.InitialClusterToken = spec.Token
	cfg.ClientTLSInfo = tlsInfo(spec.ClientTLS)
	cfg.PeerTLSInfo = tlsInfo(spec.PeerTLS)
	if err := etcdflags.Apply(cfg, spec.ExtraArgs); err != nil {
		return nil, err
	}
	cfg.LogLevel = spec.LogLevel
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logging.ZapLogger(log, spec.LogLevel))
	return cfg, nil
}

// tlsInfo maps TLS files to etcd's server TLS settings: a CA switches on
// client certificate authentication, as kubeadm configures etcd.
func tlsInfo(f config.TLSFiles) transport.TLSInfo {
	return transport.TLSInfo{
		CertFile:       f.CertFile,
		KeyFile:        f.KeyFile,
		TrustedCAFile:  f.CAFile,
		ClientCertAuth: f.CAFile != "",
	}
}
