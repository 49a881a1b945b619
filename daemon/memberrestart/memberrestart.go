// Package memberrestart is the ops task `etcdlet certs renew` submits
// after it replaced this node's certificates, and AutoRenew
// (certificates.autoRenew) after it renewed them itself: restart the local
// member so that it runs on the new files, one node at a time. A static pod needs
// it: the kubelet mounts each certificate file into the container by
// inode, so files renamed into place are not seen until the container
// starts again. The embedded member reads the new files on every new
// connection, and a restart there moves its long-lived connections (raft
// streams, clients) onto them and proves it starts with them now rather
// than at the next reboot. As a task it holds the cluster-wide task lock,
// so that no two members restart at once, whoever asks.
//
// The agent submits it too for a change that restarts a serving member
// (node.HeldChange): a new staticPod.image, other flags, another
// rendering after an etcdlet upgrade. For a version change (parameter
// version) it first saves the member's database beside the agent's state
// (Deps.Save), and the lock goes to the next host only once the member is
// back as a caught-up voter reporting that version.
//
// The handler never stops the member itself: it asks the agent's loop
// (Requests), which stops it between two passes, so that no pass races
// the stop.
package memberrestart

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/client/pkg/v3/transport"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdversion"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/localmember"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
	"github.com/etcdlet/etcdlet/daemon/task"
	"github.com/etcdlet/etcdlet/pki"
)

// TaskType is the task's type name.
const TaskType = "member-restart"

// Parameters of the task, both optional.
const (
	// ParamReason says what the restart is for, in the log and the task's
	// description; by default renewed certificates.
	ParamReason = "reason"
	// ParamVersion is the etcd minor (3.7) the member must run after the
	// restart: a version change, which saves the database first.
	ParamVersion = "version"
)

// Bounds of a restart.
const (
	// timeout is the task's default timeout: the stop, the start, and the
	// member catching up with the leader.
	timeout = 5 * time.Minute
	// ReleaseTimeout bounds the loop's wait for the stopped member to let
	// go of its data dir (a static pod: the kubelet notices the manifest
	// gone and stops etcd, a second or two). It stays below what makes
	// /healthz call the loop stuck.
	ReleaseTimeout = 30 * time.Second
	// poll is how often the handler looks whether the restart is allowed,
	// and whether the member is back and serving the files.
	poll = 250 * time.Millisecond
	// admitSettle is how long a refusal must hold before the task is
	// rejected: longer than the pool's reconnect backoff (2s at most) and
	// an election.
	admitSettle = 10 * time.Second
)

// Deps are what the handler works with.
type Deps struct {
	Requests *Requests
	// Self is this node's member identity (its client and peer URL).
	Self func() identity.Member
	// Status asks one endpoint for its status (etcdclient.Pool.Status).
	Status func(ctx context.Context, endpoint string) (*pb.StatusResponse, error)
	// Files are the certificate files the member's listeners must serve
	// (FilesFrom).
	Files Files
	// CallTimeout bounds each call and handshake with the member.
	CallTimeout time.Duration
	// Served is called once the member serves the renewed files (the
	// expiry metric reads them again at once).
	Served func()
	// Save saves the local member's database before a version change and
	// returns the file's path (Backups.Save).
	Save func(ctx context.Context, name string) (string, error)
}

// Files are the certificate files a restarted member must serve: the
// ones its client and peer listeners are configured with (empty without
// TLS), and what etcdlet dials each listener with.
type Files struct {
	ClientCert, PeerCert string
	ClientDial, PeerDial config.TLSFiles
}

// listener is one of the member's TLS listeners: its name, its URL, the
// certificate file it serves and what it is dialled with.
type listener struct {
	name, url, certFile string
	dial                config.TLSFiles
}

// listeners are the member's client and peer listeners, self's URLs.
func (f Files) listeners(self identity.Member) []listener {
	return []listener{
		{"client", self.ClientURL, f.ClientCert, f.ClientDial},
		{"peer", self.PeerURL, f.PeerCert, f.PeerDial},
	}
}

// FilesFrom takes the files from a configuration.
func FilesFrom(cfg *config.Config) Files {
	return Files{ClientCert: cfg.Etcd.TLS.Client.CertFile, PeerCert: cfg.Etcd.TLS.Peer.CertFile,
		ClientDial: cfg.ClientTLS(), PeerDial: cfg.Etcd.TLS.Peer}
}

// Type is the task type, for the task runner's registry.
func Type(d Deps) task.Type {
	return task.Type{Name: TaskType, Timeout: timeout,
		Summary: "restart this node's member (renewed certificates, a new etcd version or manifest), refused unless the other voters keep quorum",
		New: func(t task.Task, env task.Env) (task.Handler, error) {
			h := &handler{d: d, env: env, reason: "its renewed certificates"}
			for k, v := range t.Params {
				switch k {
				case ParamReason:
					h.reason = v
				case ParamVersion:
					m, ok := etcdversion.Parse(v)
					if !ok {
						return nil, fmt.Errorf("parameter %s=%q: want an etcd version such as 3.7", k, v)
					}
					h.version = m
				default:
					return nil, fmt.Errorf("unknown parameter %q (%s takes %s and %s)", k, TaskType, ParamReason, ParamVersion)
				}
			}
			if len(env.Progress) > 0 {
				if err := json.Unmarshal(env.Progress, &h.progress); err != nil {
					return nil, fmt.Errorf("progress: %w", err)
				}
			}
			return h, nil
		}}
}

// Allowed says whether the local member may restart now, and
// returns its ID: it runs as a started voter of this node's cluster, and
// the rule book's MayRestart allows its restart.
func Allowed(s node.Snapshot) (uint64, error) {
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
	self, ok := v.WithPeerURL(s.Self.PeerURL)
	if !ok {
		return 0, fmt.Errorf("the cluster has no member with this node's peer URL %s", s.Self.PeerURL)
	}
	if self.IsLearner {
		return 0, fmt.Errorf("the local member %s is a learner; restart it once it is promoted", membership.IDString(self.ID))
	}
	return self.ID, v.MayRestart(self.ID)
}

// CaughtUp says whether the local member is back as a voter caught up
// with the leader: in raft, no learner, within MaxLeaderLag of the
// leader's applied index, no alarm raised (membership's MayLead). The
// next host may restart its member then without a failure here costing
// quorum.
func CaughtUp(s node.Snapshot) (uint64, error) {
	v := s.View
	if !v.Reached {
		return 0, errors.New("the cluster has no quorum (no linearizable member list)")
	}
	self, ok := v.WithPeerURL(s.Self.PeerURL)
	if !ok {
		return 0, fmt.Errorf("the cluster has no member with this node's peer URL %s", s.Self.PeerURL)
	}
	if err := v.MayLead(self.ID); err != nil {
		return self.ID, fmt.Errorf("it is no caught-up voter yet: %w", err)
	}
	return self.ID, nil
}

// handler is the task's handler.
type handler struct {
	d        Deps
	env      task.Env
	reason   string
	version  etcdversion.Minor
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
	// Saved is the database saved before a version change.
	Saved string `json:"saved,omitempty"`
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
	// Version is the etcd version the member runs after a version
	// change, Saved the database saved before it.
	Version string `json:"version,omitempty"`
	Saved   string `json:"saved,omitempty"`
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
func (h *handler) Admit(ctx context.Context) task.Result {
	deadline := time.Now().Add(admitSettle)
	for {
		_, err := h.d.Requests.ask(ctx, AskAllowed, h.reason)
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
		case <-time.After(poll):
		}
	}
}

// Execute saves the database first for a version change, has the loop
// stop the member (unless an earlier attempt did), then waits until it is
// back, healthy, serving the certificate files, on the version asked, and
// caught up with the leader: only then may the next host's restart take
// the lock.
func (h *handler) Execute(ctx context.Context) task.Result {
	if !h.version.IsZero() && h.progress.Saved == "" && h.progress.StoppedAt.IsZero() {
		h.env.Report("saving the member's database before the change to etcd " + h.version.String())
		path, err := h.d.Save(ctx, "before-etcd-"+h.version.String()+"-"+time.Now().UTC().Format("20060102T150405Z")+".db")
		if err != nil {
			return task.Result{Error: fmt.Errorf("save the database before the change to etcd %s: %w", h.version, err)}
		}
		h.progress.Saved = path
		if err := h.env.Checkpoint(h.progress); err != nil {
			return task.Result{Error: fmt.Errorf("record the saved database: %w", err)}
		}
	}
	if h.progress.StoppedAt.IsZero() {
		asked := time.Now().UTC()
		id, err := h.d.Requests.ask(ctx, AskRestart, h.reason)
		if err != nil {
			return task.Result{Error: err}
		}
		h.progress.MemberID, h.progress.Asked, h.progress.StoppedAt = membership.IDString(id), asked, time.Now().UTC()
		if err := h.env.Checkpoint(h.progress); err != nil {
			return task.Result{Error: fmt.Errorf("record the stop: %w", err)}
		}
		h.env.Report("member " + h.progress.MemberID + " stopped; waiting until it is back, healthy, and serving the certificate files")
	}
	var last error
	for {
		out, err := h.back(ctx, h.progress.MemberID)
		if err == nil {
			// The metric shows the renewed files now, not at the next
			// periodic read.
			if h.d.Served != nil {
				h.d.Served()
			}
			out.Stopping = h.progress.StoppedAt.Sub(h.progress.Asked).Round(time.Millisecond).String()
			out.Starting = time.Since(h.progress.StoppedAt).Round(time.Millisecond).String()
			out.Saved = h.progress.Saved
			return task.Result{Description: fmt.Sprintf("member %s is back, serving the certificate files, a caught-up voter after the restart for %s (stopping took %s, starting %s)",
				out.MemberID, h.reason, out.Stopping, out.Starting), Output: out}
		}
		if last == nil || err.Error() != last.Error() {
			h.env.Report("waiting for member " + h.progress.MemberID + ": " + err.Error())
		}
		last = err
		select {
		case <-ctx.Done():
			return task.Result{Error: fmt.Errorf("the member was stopped and started, but: %w", last)}
		case <-time.After(poll):
		}
	}
}

// back checks that the restarted member serves the files (servesFiles),
// runs the version asked, and is a voter caught up with the leader, as
// the loop sees the cluster (CaughtUp).
func (h *handler) back(ctx context.Context, memberID string) (RestartOutput, error) {
	out, version, err := h.servesFiles(ctx, memberID)
	if err != nil {
		return out, err
	}
	if !h.version.IsZero() {
		if m, _ := etcdversion.Parse(version); m != h.version {
			return out, fmt.Errorf("it runs etcd %s, not %s yet", version, h.version)
		}
		out.Version = version
	}
	if _, err := h.d.Requests.ask(ctx, AskCaughtUp, h.reason); err != nil {
		return out, err
	}
	return out, nil
}

// Cleanup has nothing to clean: a member stopped and not yet started is
// started by the next pass anyway.
func (h *handler) Cleanup(context.Context) task.Result { return task.Result{} }

// servesFiles checks that the local member is back: its client URL
// answers Status as memberID with a leader, and its client and peer
// listeners serve exactly the certificates in the configured files. It
// returns the etcd version the member reports.
func (h *handler) servesFiles(ctx context.Context, memberID string) (RestartOutput, string, error) {
	out := RestartOutput{MemberID: memberID}
	self := h.d.Self()
	if !self.IP.IsValid() {
		return out, "", errors.New("this node's address is not known")
	}
	callCtx, cancel := context.WithTimeout(ctx, h.d.CallTimeout)
	defer cancel()
	st, err := h.d.Status(callCtx, self.ClientURL)
	switch {
	case err != nil:
		return out, "", fmt.Errorf("its client URL %s does not answer: %w", self.ClientURL, err)
	case membership.IDString(st.GetHeader().GetMemberId()) != memberID:
		return out, "", fmt.Errorf("%s answers as member %s", self.ClientURL, membership.IDString(st.GetHeader().GetMemberId()))
	case st.Leader == 0:
		return out, "", errors.New("it has no leader yet")
	}
	for _, l := range h.d.Files.listeners(self) {
		if l.certFile == "" {
			continue
		}
		want, err := pki.ReadCertificate(l.certFile)
		if err != nil {
			return out, "", err
		}
		got, err := servedCert(ctx, l.url, l.dial, h.d.CallTimeout)
		if err != nil {
			return out, "", fmt.Errorf("TLS handshake with its %s listener %s: %w", l.name, l.url, err)
		}
		if !got.Equal(want) {
			return out, "", fmt.Errorf("its %s listener serves serial %s, not the one in %s (serial %s)", l.name, pki.SerialString(got), l.certFile, pki.SerialString(want))
		}
		out.Serving = append(out.Serving, ServedCert{Listener: l.name, URL: l.url, File: l.certFile, Serial: pki.SerialString(got), NotAfter: got.NotAfter.UTC()})
	}
	return out, st.Version, nil
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
