package daemon

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/datadir"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
	"github.com/etcdlet/etcdlet/daemon/task"
	"github.com/etcdlet/etcdlet/pki"
)

// MemberRestartTask is the ops task `etcdlet certs renew` submits after it
// replaced this node's certificates: restart the local member so that it
// runs on the new files, one node at a time. A static pod needs it: the
// kubelet mounts each certificate file into the container by inode, so
// files renamed into place are not seen until the container starts again.
// The embedded member reads the new files on every new connection, and a
// restart there moves its long-lived connections (raft streams, clients)
// onto them and proves it starts with them now rather than at the next
// reboot. As a task it holds the cluster-wide task lock, so that no two
// members restart at once, whoever asks.
const MemberRestartTask = "member-restart"

// Bounds of a restart.
const (
	// memberRestartTimeout is the task's default timeout: the stop, the
	// start, and the member catching up with the leader.
	memberRestartTimeout = 5 * time.Minute
	// releaseTimeout bounds the loop's wait for the stopped member to let
	// go of its data dir (a static pod: the kubelet notices the manifest
	// gone and stops etcd, a second or two). It stays below what makes
	// /healthz call the loop stuck.
	releaseTimeout = 30 * time.Second
	// restartPoll is how often the handler looks whether the restart is
	// allowed, and whether the member is back and serving the files.
	restartPoll = 250 * time.Millisecond
	// admitSettle is how long a refusal must hold before the task is
	// rejected: longer than the pool's reconnect backoff (2s at most) and
	// an election.
	admitSettle = 10 * time.Second
)

// certSide is the agent's certificate side: the expiry metric, and the
// member restarts of MemberRestartTask, which the loop carries out.
type certSide struct {
	watch    *certWatch
	restarts chan restartRequest
}

// newCertSide builds the certificate side and registers MemberRestartTask
// with the task runner.
func (a *Agent) newCertSide() *certSide {
	c := &certSide{watch: newCertWatch(a.cfg, a.log, a.metrics), restarts: make(chan restartRequest)}
	a.tasks.runner.Registry.Register(task.Type{Name: MemberRestartTask, Timeout: memberRestartTimeout,
		Summary: "restart this node's member on renewed certificates, refused unless the other voters keep quorum",
		New: func(t task.Task, env task.Env) (task.Handler, error) {
			if len(t.Params) > 0 {
				return nil, fmt.Errorf("%s takes no parameters", MemberRestartTask)
			}
			h := &memberRestart{a: a, c: c, env: env}
			if len(env.Progress) > 0 {
				if err := json.Unmarshal(env.Progress, &h.progress); err != nil {
					return nil, fmt.Errorf("progress: %w", err)
				}
			}
			return h, nil
		}})
	return c
}

// start runs the expiry metric's refresh until ctx ends.
func (c *certSide) start(ctx context.Context, wg *sync.WaitGroup) { wg.Go(func() { c.watch.run(ctx) }) }

// restartRequest asks the loop to restart the local member, or only
// whether it may (check).
type restartRequest struct {
	check bool
	reply chan restartReply // buffered: the loop never waits on a caller gone away
}

type restartReply struct {
	memberID uint64
	err      error
}

// ask hands a request to the loop and waits for its answer.
func (c *certSide) ask(ctx context.Context, check bool) (uint64, error) {
	req := restartRequest{check: check, reply: make(chan restartReply, 1)}
	select {
	case c.restarts <- req:
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
	select {
	case r := <-req.reply:
		return r.memberID, r.err
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	}
}

// restartMember runs in the agent's loop between two passes, so that no
// pass races it: it looks at the cluster afresh, refuses unless
// restartAllowed, stops the member through the runtime and waits until it
// let go of its data dir. The pass that follows at once finds the member
// stopped on its data and starts it again with the same spec (decision
// restart), exactly as after a crash.
func (a *Agent) restartMember(ctx context.Context, req restartRequest) {
	snap := a.node.Look(ctx)
	id, err := restartAllowed(snap)
	if err != nil || req.check {
		req.reply <- restartReply{id, err}
		return
	}
	log := a.log.With("memberID", membership.IDString(id))
	log.Info("restarting the local member on its renewed certificates (" + MemberRestartTask + " task)")
	if err := a.runtime.Stop(ctx); err != nil {
		req.reply <- restartReply{id, fmt.Errorf("stop the local member: %w", err)}
		return
	}
	err = a.waitReleased(ctx)
	if err != nil {
		log.Error("the local member did not stop in time; starting it again all the same", "error", err)
	}
	a.node.Progress()
	req.reply <- restartReply{id, err}
}

// waitReleased waits until no etcd holds the data dir, keeping the
// systemd watchdog fed meanwhile: the loop is busy, not stuck.
func (a *Agent) waitReleased(ctx context.Context) error {
	deadline := time.Now().Add(releaseTimeout)
	for {
		inUse, err := datadir.InUse(a.cfg.Etcd.DataDir)
		switch {
		case err != nil:
			return err
		case !inUse:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf("etcd still holds %s %s after the stop", a.cfg.Etcd.DataDir, releaseTimeout)
		}
		a.notifier.Watchdog()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// restartAllowed says whether the local member may restart now, and
// returns its ID: it runs as a started voter of this node's cluster, and
// the rule book's MayRestart allows its restart.
func restartAllowed(s node.Snapshot) (uint64, error) {
	if s.Decision.Kind != localmember.Keep {
		why := string(s.Decision.Kind)
		if s.Decision.Reason != "" {
			why += ": " + s.Decision.Reason
		}
		return 0, fmt.Errorf("the local member does not run as a member of the cluster (decision %s)", cmp.Or(why, "no reason given"))
	}
	v := s.View
	if !v.Reached {
		return 0, errors.New("the cluster has no quorum (no linearizable member list); restarting a member now could keep it down")
	}
	if s.Pinned != 0 && v.ClusterID != s.Pinned {
		return 0, fmt.Errorf("the endpoints answer for cluster %s, this node belongs to %s", membership.IDString(v.ClusterID), membership.IDString(s.Pinned))
	}
	i := slices.IndexFunc(v.Members, func(m membership.Member) bool { return slices.Contains(m.PeerURLs, s.Self.PeerURL) })
	if i < 0 {
		return 0, fmt.Errorf("the cluster has no member with this node's peer URL %s", s.Self.PeerURL)
	}
	self := v.Members[i]
	if self.IsLearner {
		return 0, fmt.Errorf("the local member %s is a learner; restart it once it is promoted", membership.IDString(self.ID))
	}
	return self.ID, v.MayRestart(self.ID)
}

// memberRestart is MemberRestartTask's handler.
type memberRestart struct {
	a        *Agent
	c        *certSide
	env      task.Env
	progress restartProgress
}

// restartProgress is checkpointed once the member was stopped, so that a
// restarted agent waits for it instead of restarting it a second time.
type restartProgress struct {
	MemberID string `json:"memberID"`
	// Asked is when the loop was asked to stop the member, StoppedAt when
	// it had.
	Asked     time.Time `json:"asked"`
	StoppedAt time.Time `json:"stoppedAt"`
}

// RestartOutput is the task's output: the member, how long it was down,
// and the certificates its listeners serve.
type RestartOutput struct {
	MemberID string `json:"memberID"`
	// Stopping is how long the stop took, Starting how long from then
	// until the member served the files with a leader.
	Stopping string       `json:"stopping"`
	Starting string       `json:"starting"`
	Serving  []ServedCert `json:"serving"`
}

// ServedCert is the certificate a listener of the member serves, which is
// the one in File.
type ServedCert struct {
	Listener string    `json:"listener"`
	URL      string    `json:"url"`
	File     string    `json:"file"`
	Serial   string    `json:"serial"`
	NotAfter time.Time `json:"notAfter"`
}

// Admit refuses what the loop would refuse, once it held for
// admitSettle: a member restarted a moment ago (the previous host's
// renewal) answers again before every agent's connection to it is back
// from its reconnect backoff, and an operator going from host to host
// must not be refused for that.
func (h *memberRestart) Admit(ctx context.Context) task.Result {
	deadline := time.Now().Add(admitSettle)
	for {
		_, err := h.c.ask(ctx, true)
		if err == nil {
			return task.Result{Description: "the other voters keep quorum without this member"}
		}
		if time.Now().After(deadline) {
			return task.Result{Error: err}
		}
		h.env.Report("not yet: " + err.Error())
		select {
		case <-ctx.Done():
			return task.Result{Error: err}
		case <-time.After(restartPoll):
		}
	}
}

// Execute has the loop stop the member (unless an earlier attempt did),
// then waits until it is back, healthy, and serving the certificate files.
func (h *memberRestart) Execute(ctx context.Context) task.Result {
	if h.progress.StoppedAt.IsZero() {
		asked := time.Now().UTC()
		id, err := h.c.ask(ctx, false)
		if err != nil {
			return task.Result{Error: err}
		}
		h.progress = restartProgress{MemberID: membership.IDString(id), Asked: asked, StoppedAt: time.Now().UTC()}
		if err := h.env.Checkpoint(h.progress); err != nil {
			return task.Result{Error: fmt.Errorf("record the stop: %w", err)}
		}
		h.env.Report("member " + h.progress.MemberID + " stopped; waiting until it is back, healthy, and serving the certificate files")
	}
	var last error
	for {
		out, err := h.a.servesFiles(ctx, h.progress.MemberID)
		if err == nil {
			// The metric shows the renewed files now, not at the next
			// periodic read.
			h.c.watch.refresh()
			out.Stopping = h.progress.StoppedAt.Sub(h.progress.Asked).Round(time.Millisecond).String()
			out.Starting = time.Since(h.progress.StoppedAt).Round(time.Millisecond).String()
			return task.Result{Description: fmt.Sprintf("member %s is back, serving the certificate files (stopping took %s, starting %s)",
				out.MemberID, out.Stopping, out.Starting), Output: out}
		}
		if last == nil || err.Error() != last.Error() {
			h.env.Report("waiting for member " + h.progress.MemberID + ": " + err.Error())
		}
		last = err
		select {
		case <-ctx.Done():
			return task.Result{Error: fmt.Errorf("the member was stopped and started, but: %w", last)}
		case <-time.After(restartPoll):
		}
	}
}

// Cleanup has nothing to clean: a member stopped and not yet started is
// started by the next pass anyway.
func (h *memberRestart) Cleanup(context.Context) task.Result { return task.Result{} }

// servesFiles checks that the local member is back: its client URL
// answers Status as memberID with a leader, and its client and peer
// listeners serve exactly the certificates in the configured files.
func (a *Agent) servesFiles(ctx context.Context, memberID string) (RestartOutput, error) {
	out := RestartOutput{MemberID: memberID}
	self := a.node.Self()
	if !self.IP.IsValid() {
		return out, errors.New("this node's address is not known")
	}
	callCtx, cancel := context.WithTimeout(ctx, a.cfg.Agent.CallTimeout)
	defer cancel()
	st, err := a.pool.Status(callCtx, self.ClientURL)
	switch {
	case err != nil:
		return out, fmt.Errorf("its client URL %s does not answer: %w", self.ClientURL, err)
	case membership.IDString(st.GetHeader().GetMemberId()) != memberID:
		return out, fmt.Errorf("%s answers as member %s", self.ClientURL, membership.IDString(st.GetHeader().GetMemberId()))
	case st.Leader == 0:
		return out, errors.New("it has no leader yet")
	}
	for _, l := range []struct {
		name, url, certFile string
		dial                config.TLSFiles
	}{
		{"client", self.ClientURL, a.cfg.Etcd.TLS.Client.CertFile, a.cfg.ClientTLS()},
		{"peer", self.PeerURL, a.cfg.Etcd.TLS.Peer.CertFile, a.cfg.Etcd.TLS.Peer},
	} {
		if l.certFile == "" {
			continue
		}
		want, err := pki.ReadCertificate(l.certFile)
		if err != nil {
			return out, err
		}
		got, err := servedCert(ctx, l.url, l.dial, a.cfg.Agent.CallTimeout)
		if err != nil {
			return out, fmt.Errorf("TLS handshake with its %s listener %s: %w", l.name, l.url, err)
		}
		if !got.Equal(want) {
			return out, fmt.Errorf("its %s listener serves serial %s, not the one in %s (serial %s)", l.name, pki.SerialString(got), l.certFile, pki.SerialString(want))
		}
		out.Serving = append(out.Serving, ServedCert{Listener: l.name, URL: l.url, File: l.certFile, Serial: pki.SerialString(got), NotAfter: got.NotAfter.UTC()})
	}
	return out, nil
}

// servedCert is the certificate a TLS listener serves, dialled with the
// client certificate and CA of files: the listener requires a client
// certificate, and the one it serves must verify against the CA.
func servedCert(ctx context.Context, rawURL string, files config.TLSFiles, timeout time.Duration) (*x509.Certificate, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%q is not a URL with a host", rawURL)
	}
	cfg, err := transport.TLSInfo{CertFile: files.CertFile, KeyFile: files.KeyFile, TrustedCAFile: files.CAFile}.ClientConfig()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}
