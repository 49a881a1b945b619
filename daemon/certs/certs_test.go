package certs

import (
	"crypto/x509"
	"fmt"
	"io/fs"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/metrics"
	"github.com/etcdlet/etcdlet/pki"
)

func TestCertTargets(t *testing.T) {
	kubeadm := func(name string) config.TLSFiles {
		return config.TLSFiles{CertFile: "/etc/kubernetes/pki/etcd/" + name + ".crt", KeyFile: "/etc/kubernetes/pki/etcd/" + name + ".key", CAFile: "/etc/kubernetes/pki/etcd/ca.crt"}
	}
	const etcdCA = "/etc/kubernetes/pki/etcd/ca.crt"
	for _, tt := range []struct {
		name string
		cfg  config.Config
		want []pki.Target
	}{
		{"no TLS", config.Config{}, nil},
		{
			"kubeadm layout: the CA once, kube-apiserver's client certificate beside it",
			config.Config{Etcd: config.Etcd{TLS: config.EtcdTLS{Client: kubeadm("server"), Peer: kubeadm("peer")}},
				Agent: config.Agent{EtcdClientTLS: kubeadm("healthcheck-client")}},
			[]pki.Target{
				{Path: "/etc/kubernetes/pki/etcd/server.crt", KeyPath: "/etc/kubernetes/pki/etcd/server.key", CAPath: etcdCA, Usage: UsageEtcdServer, Fields: []string{"etcd.tls.client.certFile"}},
				{Path: etcdCA, Usage: UsageCA, Fields: []string{"etcd.tls.client.caFile", "etcd.tls.peer.caFile", "agent.etcdClientTLS.caFile"}},
				{Path: "/etc/kubernetes/pki/etcd/peer.crt", KeyPath: "/etc/kubernetes/pki/etcd/peer.key", CAPath: etcdCA, Usage: UsageEtcdPeer, Fields: []string{"etcd.tls.peer.certFile"}},
				{Path: "/etc/kubernetes/pki/etcd/healthcheck-client.crt", KeyPath: "/etc/kubernetes/pki/etcd/healthcheck-client.key", CAPath: etcdCA, Usage: UsageEtcdletClient, Fields: []string{"agent.etcdClientTLS.certFile"}},
				{Path: "/etc/kubernetes/pki/apiserver-etcd-client.crt", KeyPath: "/etc/kubernetes/pki/apiserver-etcd-client.key", CAPath: etcdCA, Usage: UsageAPIServerEtcd,
					Fields: []string{"kube-apiserver's, in kubeadm's layout beside etcd.tls.client.caFile"}, Optional: true},
			},
		},
		{
			"one certificate for client and peer, listener and backup API, S3 CA; no kubeadm layout",
			config.Config{
				Etcd: config.Etcd{TLS: config.EtcdTLS{
					Client: config.TLSFiles{CertFile: "/pki/member.crt", KeyFile: "/pki/member.key", CAFile: "/pki/ca.crt"},
					Peer:   config.TLSFiles{CertFile: "/pki//member.crt", KeyFile: "/pki/member.key", CAFile: "/pki/ca.crt"}}},
				Agent:  config.Agent{ListenTLS: config.TLSFiles{CertFile: "/pki/agent.crt", KeyFile: "/pki/agent.key", CAFile: "/pki/agent-ca.crt"}},
				Backup: config.Backup{API: config.BackupAPI{TLS: config.TLSFiles{CertFile: "/pki/backup.crt", KeyFile: "/pki/backup.key"}}, Store: config.BackupStore{S3: &config.S3Store{CAFile: "/pki/s3-ca.crt"}}},
			},
			[]pki.Target{
				{Path: "/pki/member.crt", KeyPath: "/pki/member.key", CAPath: "/pki/ca.crt", Usage: "etcd-server,etcd-peer", Fields: []string{"etcd.tls.client.certFile", "etcd.tls.peer.certFile"}},
				{Path: "/pki/ca.crt", Usage: UsageCA, Fields: []string{"etcd.tls.client.caFile", "etcd.tls.peer.caFile"}},
				{Path: "/pki/agent.crt", KeyPath: "/pki/agent.key", CAPath: "/pki/agent-ca.crt", Usage: UsageAgentListener, Fields: []string{"agent.listenTLS.certFile"}},
				{Path: "/pki/agent-ca.crt", Usage: UsageCA, Fields: []string{"agent.listenTLS.caFile"}},
				{Path: "/pki/backup.crt", KeyPath: "/pki/backup.key", Usage: UsageBackupAPI, Fields: []string{"backup.api.tls.certFile"}},
				{Path: "/pki/s3-ca.crt", Usage: UsageCA, Fields: []string{"backup.store.s3.caFile"}},
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := CertTargets(&tt.cfg); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("targets:\n%s\nwant:\n%s", dumpTargets(got), dumpTargets(tt.want))
			}
		})
	}
}

func dumpTargets(ts []pki.Target) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "  %+v\n", t)
	}
	return b.String()
}

func TestCertWatchRefresh(t *testing.T) {
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	server := pki.Target{Path: "/pki/etcd/server.crt", Usage: UsageEtcdServer}
	peer := pki.Target{Path: "/pki/etcd/peer.crt", Usage: UsageEtcdPeer}
	apiserver := pki.Target{Path: "/pki/apiserver-etcd-client.crt", Usage: UsageAPIServerEtcd, Optional: true}
	files := map[string]*x509.Certificate{}
	m := metrics.New("etcd-main")
	w := &Watch{targets: []pki.Target{server, peer, apiserver}, metrics: m, log: slog.New(slog.DiscardHandler), now: func() time.Time { return now },
		read: func(path string) (*x509.Certificate, error) {
			if c, ok := files[path]; ok {
				return c, nil
			}
			return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
		},
		failing: map[string]bool{}, warned: map[string]bool{}}
	expiry := func(tg pki.Target) (float64, bool) {
		v, ok := gathered(t, m)["etcdlet_certificate_expiry_timestamp_seconds/"+tg.Path+"/"+tg.Usage]
		return v, ok
	}
	inAYear := now.Add(365 * 24 * time.Hour)
	files[server.Path] = &x509.Certificate{NotAfter: inAYear}
	files[peer.Path] = &x509.Certificate{NotAfter: now.Add(24 * time.Hour)}

	for _, step := range []struct {
		name         string
		change       func()
		serverExpiry float64 // 0: no series
		peerExpiry   float64
		peerErrors   float64
		apiserver    bool
	}{
		{"both readable, kube-apiserver's absent", func() {}, float64(inAYear.Unix()), float64(now.Add(24 * time.Hour).Unix()), 0, false},
		{"the peer certificate gone: no series, an error each time", func() { delete(files, peer.Path) }, float64(inAYear.Unix()), 0, 1, false},
		{"still gone", func() {}, float64(inAYear.Unix()), 0, 2, false},
		{"renewed: the new expiry at the next refresh", func() {
			files[peer.Path] = &x509.Certificate{NotAfter: inAYear}
			files[apiserver.Path] = &x509.Certificate{NotAfter: inAYear}
		}, float64(inAYear.Unix()), float64(inAYear.Unix()), 2, true},
	} {
		t.Run(step.name, func(t *testing.T) {
			step.change()
			w.Refresh()
			for _, c := range []struct {
				tg   pki.Target
				want float64
			}{{server, step.serverExpiry}, {peer, step.peerExpiry}} {
				got, ok := expiry(c.tg)
				if (c.want == 0) == ok || (ok && got != c.want) {
					t.Errorf("%s: expiry %v (present %v), want %v", c.tg.Path, got, ok, c.want)
				}
			}
			series := gathered(t, m)
			if got := series["etcdlet_certificate_read_errors_total/"+peer.Path]; got != step.peerErrors {
				t.Errorf("read errors of %s: %v, want %v", peer.Path, got, step.peerErrors)
			}
			if _, ok := expiry(apiserver); ok != step.apiserver {
				t.Errorf("kube-apiserver's series present %v, want %v", ok, step.apiserver)
			}
			if _, ok := series["etcdlet_certificate_read_errors_total/"+apiserver.Path]; ok {
				t.Error("an optional file that does not exist counts read errors")
			}
		})
	}
}

// gathered are the certificate metrics' samples by name and label values
// ("name/file/usage"), without the cluster label every series carries.
func gathered(t *testing.T, m *metrics.Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "etcdlet_certificate_") {
			continue
		}
		for _, s := range mf.GetMetric() {
			key := mf.GetName()
			for _, l := range s.GetLabel() {
				if l.GetName() != "cluster" {
					key += "/" + l.GetValue()
				}
			}
			out[key] = s.GetGauge().GetValue() + s.GetCounter().GetValue()
		}
	}
	return out
}
