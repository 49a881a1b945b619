// Package certs names the certificate files etcdlet's configuration
// points to (CertTargets, which `etcdlet certs` checks and renews) and
// watches their expiry for the agent's metrics (Watch).
package certs

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/pki"
)

// Usages of the certificate files etcdlet's configuration names: the
// usage label of etcdlet_certificate_expiry_timestamp_seconds.
const (
	UsageEtcdServer    = "etcd-server"           // etcd.tls.client: what etcd serves clients with
	UsageEtcdPeer      = "etcd-peer"             // etcd.tls.peer
	UsageEtcdletClient = "etcdlet-client"        // agent.etcdClientTLS
	UsageAgentListener = "agent-listener"        // agent.listenTLS
	UsageBackupAPI     = "backup-api"            // backup.api.tls
	UsageCA            = "ca"                    // every caFile
	UsageAPIServerEtcd = "apiserver-etcd-client" // kube-apiserver's, in kubeadm's layout
)

// CertTargets are the certificate files etcdlet's configuration names,
// each once, with its key and the CA it must verify against: the member's
// client and peer certificates, etcdlet's own client certificate, the
// agent listener's and the backup API's, every CA file, and, in kubeadm's
// layout (the etcd CA in a directory named etcd), kube-apiserver's
// apiserver-etcd-client beside it when it exists: with etcd.external,
// kubeadm renews none of them. A file named in several places is one
// target whose usages are joined by commas.
func CertTargets(cfg *config.Config) []pki.Target {
	var b targets
	b.add(cfg.Etcd.TLS.Client, UsageEtcdServer, "etcd.tls.client")
	b.add(cfg.Etcd.TLS.Peer, UsageEtcdPeer, "etcd.tls.peer")
	b.add(cfg.Agent.EtcdClientTLS, UsageEtcdletClient, "agent.etcdClientTLS")
	b.add(cfg.Agent.ListenTLS, UsageAgentListener, "agent.listenTLS")
	b.add(cfg.Backup.API.TLS, UsageBackupAPI, "backup.api.tls")
	if s3 := cfg.Backup.Store.S3; s3 != nil {
		b.addCA(s3.CAFile, "backup.store.s3.caFile")
	}
	if ca := cfg.Etcd.TLS.Client.CAFile; ca != "" && filepath.Base(filepath.Dir(ca)) == "etcd" {
		dir := filepath.Dir(filepath.Dir(ca))
		b.merge(pki.Target{Path: filepath.Join(dir, "apiserver-etcd-client.crt"), KeyPath: filepath.Join(dir, "apiserver-etcd-client.key"),
			CAPath: ca, Usage: UsageAPIServerEtcd, Fields: []string{"kube-apiserver's, in kubeadm's layout beside etcd.tls.client.caFile"}, Optional: true})
	}
	return b.list
}

type targets struct{ list []pki.Target }

func (b *targets) add(f config.TLSFiles, usage, field string) {
	if f.CertFile != "" {
		b.merge(pki.Target{Path: f.CertFile, KeyPath: f.KeyFile, CAPath: f.CAFile, Usage: usage, Fields: []string{field + ".certFile"}})
	}
	b.addCA(f.CAFile, field+".caFile")
}

func (b *targets) addCA(path, field string) {
	if path != "" {
		b.merge(pki.Target{Path: path, Usage: UsageCA, Fields: []string{field}})
	}
}

// merge adds t, or joins its usage and fields to the target of the same
// file; a file named by the configuration is never optional.
func (b *targets) merge(t pki.Target) {
	t.Path = filepath.Clean(t.Path)
	for i := range b.list {
		e := &b.list[i]
		if e.Path != t.Path {
			continue
		}
		if !strings.Contains(","+e.Usage+",", ","+t.Usage+",") {
			e.Usage += "," + t.Usage
		}
		e.Fields = append(e.Fields, t.Fields...)
		e.Optional = e.Optional && t.Optional
		if e.KeyPath == "" {
			e.KeyPath = t.KeyPath
		}
		if e.CAPath == "" {
			e.CAPath = t.CAPath
		}
		return
	}
	b.list = append(b.list, t)
}

// refreshEvery is how often the agent reads the certificate files again:
// a few small files, and a renewal shows in the metric within a minute.
const refreshEvery = time.Minute

// Watch exports etcdlet_certificate_expiry_timestamp_seconds for the
// configured certificate files and counts the reads that fail. It reads
// files only: no etcd call, nothing that could stall.
type Watch struct {
	targets []pki.Target
	metrics *metrics.Metrics
	log     *slog.Logger
	now     func() time.Time
	read    func(path string) (*x509.Certificate, error)

	mu sync.Mutex
	// failing and warned hold the files whose read failed, and those said
	// to expire soon, so that a lasting state is logged once.
	failing map[string]bool
	warned  map[string]bool
}

// NewWatch watches targets (CertTargets of the configuration).
func NewWatch(targets []pki.Target, log *slog.Logger, m *metrics.Metrics) *Watch {
	w := &Watch{targets: targets, metrics: m, log: log.With("component", "certificates"), now: time.Now,
		read: pki.ReadCertificate, failing: map[string]bool{}, warned: map[string]bool{}}
	for _, t := range w.targets {
		if !t.Optional {
			// A counter that exists from the start: increase() sees its
			// first failure.
			m.CertificateReadErrors.WithLabelValues(t.Path)
		}
	}
	return w
}

// Run refreshes the metric at once and then every refreshEvery until ctx
// ends.
func (w *Watch) Run(ctx context.Context) {
	w.Refresh()
	tick := time.NewTicker(refreshEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			w.Refresh()
		}
	}
}

// Refresh reads every target once. A file that cannot be read loses its
// series (a stale expiry must not look fine) and counts an error; an
// optional one that does not exist is simply absent.
func (w *Watch) Refresh() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	for _, t := range w.targets {
		cert, err := w.read(t.Path)
		if err != nil {
			w.metrics.CertificateExpiry.DeleteLabelValues(t.Path, t.Usage)
			if t.Optional && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			w.metrics.CertificateReadErrors.WithLabelValues(t.Path).Inc()
			if !w.failing[t.Path] {
				w.log.Error("cannot read a certificate file the configuration names", "file", t.Path, "usage", t.Usage, "error", err)
			}
			w.failing[t.Path] = true
			continue
		}
		if w.failing[t.Path] {
			w.log.Info("certificate file readable again", "file", t.Path, "usage", t.Usage)
			delete(w.failing, t.Path)
		}
		w.metrics.CertificateExpiry.WithLabelValues(t.Path, t.Usage).Set(float64(cert.NotAfter.Unix()))
		switch left := cert.NotAfter.Sub(now); {
		case left > pki.DefaultWarn:
			delete(w.warned, t.Path)
		case !w.warned[t.Path]:
			w.warned[t.Path] = true
			w.log.Warn("certificate expires soon or has expired; renew it (etcdlet certs renew, docs/certificates.md)",
				"file", t.Path, "usage", t.Usage, "notAfter", cert.NotAfter.UTC().Format(time.RFC3339), "expired", left <= 0,
				"warnBefore", pki.DefaultWarn.String())
		}
	}
}

// Summary says, for etcdlet status, how the certificates the
// configuration names stand at now: the first to expire and in how many
// days, or each that is broken or expires within pki.DefaultWarn; "" when
// the configuration names none.
func Summary(targets []pki.Target, now time.Time) string {
	var first *pki.Finding
	var alarms []string
	findings := pki.Check(targets, now, pki.DefaultWarn)
	for i, f := range findings {
		if f.Status == pki.StatusUnreadable && f.Optional {
			continue
		}
		if f.Status != pki.StatusOK {
			alarms = append(alarms, fmt.Sprintf("%s (%s) %s: %s", f.Path, f.Usage, f.Status, strings.Join(f.Problems, "; ")))
		}
		if f.Status != pki.StatusUnreadable && (first == nil || f.NotAfter.Before(first.NotAfter)) {
			first = &findings[i]
		}
	}
	switch {
	case len(alarms) > 0:
		return strings.Join(alarms, "; ") + ": renew with etcdlet certs renew (certificates.md)"
	case first == nil:
		return ""
	}
	return fmt.Sprintf("%d checked; the first to expire is %s (%s) in %d days, %s", len(findings), first.Path, first.Usage,
		int(first.Remaining.Hours()/24), first.NotAfter.UTC().Format("2006-01-02"))
}
