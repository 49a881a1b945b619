package memberrestart

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/task"
	"github.com/etcdlet/etcdlet/pki"
)

// AutoRenew renews this member's certificates before they expire
// (certificates.autoRenew), as etcdlet certs renew does by hand: when a
// certificate its client or peer listener serves expires within Before,
// the files in kubeadm's layout are renewed from the etcd CA (unless they
// were already), and the member is restarted on them through a
// member-restart task. The task holds the cluster-wide task lock and is
// refused unless the other voters keep quorum, so the members of a
// cluster whose certificates were all issued the same day restart one at
// a time. A restart that is refused is asked again, with a growing delay,
// for as long as the member serves a certificate that is due.
type AutoRenew struct {
	Before, Validity time.Duration
	CACert, CAKey    string
	Layout           pki.Layout
	Self             func() identity.Member
	Files            Files
	CallTimeout      time.Duration
	// Restart runs a member-restart task on this node and returns it
	// completed.
	Restart func(ctx context.Context) (task.Task, error)
	Log     *slog.Logger
	Now     func() time.Time

	interval time.Duration // of Run: the first delay after a failure
	retryAt  time.Time
	delay    time.Duration
	warned   string
}

// AutoRenewFrom narrows a configuration to the renewal's settings; the
// caller sets Self, Restart, Log and Now.
func AutoRenewFrom(cfg *config.Config) *AutoRenew {
	c := cfg.Certificates
	return &AutoRenew{Before: c.RenewBefore, Validity: c.Validity, CACert: cfg.Etcd.TLS.Client.CAFile, CAKey: c.CAKey,
		Layout: pki.KubeadmLayout(cfg.RenewalDir()), Files: FilesFrom(cfg), CallTimeout: cfg.Agent.CallTimeout, Now: time.Now}
}

// autoRenewRetryMax bounds the delay before a refused or failed renewal
// is tried again; it starts at Run's interval and doubles.
const autoRenewRetryMax = 30 * time.Minute

// Run checks at every interval until ctx ends.
func (r *AutoRenew) Run(ctx context.Context, interval time.Duration) {
	r.interval = interval
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := r.Check(ctx); err != nil {
			r.failed(err)
		}
	}
}

// Check looks once: whether a served certificate is due, and if so
// renews the files and asks for the restart. It returns an error only
// for what must be retried later (with a growing delay).
func (r *AutoRenew) Check(ctx context.Context) error {
	now := r.Now()
	if now.Before(r.retryAt) {
		return nil
	}
	served, err := r.served(ctx)
	if err != nil {
		// Not serving (stopped, starting, restarting): the next check.
		r.Log.Debug("certificate renewal: the member's certificates cannot be read from its listeners", "error", err)
		return nil
	}
	if !dueBy(served, now.Add(r.Before)) {
		r.retryAt, r.delay, r.warned = time.Time{}, 0, ""
		return nil
	}
	files, err := r.files()
	if err != nil {
		return err
	}
	// Files that are due are renewed; files renewed earlier (a restart
	// that was refused) are not renewed again: the member only has to
	// serve them.
	if dueBy(files, now.Add(r.Before)) {
		if err := r.renew(now); err != nil {
			return err
		}
		if files, err = r.files(); err != nil {
			return err
		}
	}
	r.Log.Info("restarting the member on its renewed certificates", "notAfter", soonest(files).UTC().Format(time.RFC3339))
	t, err := r.Restart(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("member-restart task: %w", err)
	case t.Phase != task.Succeeded:
		return fmt.Errorf("member-restart task %s %s: %s", t.ID, t.Phase, t.LastOperation.Description)
	}
	r.Log.Info("the member serves its renewed certificates", "task", t.ID)
	return nil
}

// renew renews the certificates in the layout from the CA, keeping the
// old files as <name>.<timestamp>.bak.
func (r *AutoRenew) renew(now time.Time) error {
	ca, err := pki.LoadCA(r.CACert, r.CAKey, now)
	if err != nil {
		r.warnOnce(fmt.Sprintf("the member's certificates expire within certificates.renewBefore (%s) but cannot be renewed: %v; renew them by hand (etcdlet certs renew)", r.Before, err))
		return err
	}
	if ca.Cert.NotAfter.Before(now.Add(r.Before)) {
		err := fmt.Errorf("the etcd CA %s expires %s, within certificates.renewBefore (%s): renewed certificates would expire with it; renew the CA", r.CACert,
			ca.Cert.NotAfter.UTC().Format(time.RFC3339), r.Before)
		r.warnOnce(err.Error())
		return err
	}
	set, _, err := pki.RenewLayout(ca, r.Layout, pki.Profiles(), r.Validity, now)
	if err != nil {
		return err
	}
	rep, err := pki.Install(ca, set, r.Layout, pki.WriteOptions{Force: true, Now: now})
	if err != nil {
		return err
	}
	r.Log.Info("renewed this member's certificates before they expire", "directory", r.Layout.EtcdDir, "files", len(set.Certs),
		"notAfter", set.NotAfter.UTC().Format(time.RFC3339), "keptOld", len(rep.MovedAside))
	return nil
}

// served are the certificates the member's client and peer listeners
// serve now.
func (r *AutoRenew) served(ctx context.Context) ([]*x509.Certificate, error) {
	self := r.Self()
	if !self.IP.IsValid() {
		return nil, errors.New("this node's address is not known")
	}
	var out []*x509.Certificate
	for _, l := range r.Files.listeners(self) {
		c, err := servedCert(ctx, l.url, l.dial, r.CallTimeout)
		if err != nil {
			return nil, fmt.Errorf("TLS handshake with its %s listener %s: %w", l.name, l.url, err)
		}
		out = append(out, c)
	}
	return out, nil
}

// files are the client and peer certificate files.
func (r *AutoRenew) files() ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for _, f := range []string{r.Files.ClientCert, r.Files.PeerCert} {
		c, err := pki.ReadCertificate(f)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// failed delays the next check, doubling from Run's interval: another
// node's restart holds the task lock for seconds, a refusal for want of
// quorum may last.
func (r *AutoRenew) failed(err error) {
	r.delay = min(max(2*r.delay, r.interval), autoRenewRetryMax)
	r.retryAt = r.Now().Add(r.delay)
	r.Log.Warn("certificate renewal not done; trying again later", "error", err, "retryIn", r.delay.String())
}

// warnOnce logs what stands in the way, once per reason.
func (r *AutoRenew) warnOnce(why string) {
	if why != r.warned {
		r.warned = why
		r.Log.Error("certificate renewal: " + why)
	}
}

func dueBy(certs []*x509.Certificate, deadline time.Time) bool {
	return soonest(certs).Before(deadline)
}

func soonest(certs []*x509.Certificate) time.Time {
	var first time.Time
	for _, c := range certs {
		if first.IsZero() || c.NotAfter.Before(first) {
			first = c.NotAfter
		}
	}
	return first
}
