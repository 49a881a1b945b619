package certs

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/pki"
)

// etcdlet status names the certificate that expires first and in how many
// days; one that expires within the warning period, or is broken, is named
// with what to do. kube-apiserver's optional file, absent, is no problem.
func TestSummaryNamesTheFirstToExpire(t *testing.T) {
	issued := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	dir := filepath.Join(t.TempDir(), "etcd")
	ca, certPEM, keyPEM, err := pki.NewCA(pki.DefaultCAName, pki.KeyECDSA, pki.DefaultCAValidity, issued)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pki.Write([]pki.File{{Path: filepath.Join(dir, "ca.key"), Data: keyPEM, Mode: 0o600}, {Path: filepath.Join(dir, "ca.crt"), Data: certPEM, Mode: 0o644}},
		pki.WriteOptions{Now: issued}); err != nil {
		t.Fatal(err)
	}
	set, err := pki.Issue(ca, pki.Request{NodeName: "cp-0", Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}, Validity: 365 * 24 * time.Hour, KeyType: pki.KeyECDSA, Now: issued}, pki.Profiles())
	if err != nil {
		t.Fatal(err)
	}
	layout := pki.KubeadmLayout(dir)
	if _, err := pki.Install(ca, set, layout, pki.WriteOptions{Now: issued}); err != nil {
		t.Fatal(err)
	}
	ca2 := filepath.Join(dir, "ca.crt")
	targets := []pki.Target{
		{Path: filepath.Join(dir, "server.crt"), KeyPath: filepath.Join(dir, "server.key"), CAPath: ca2, Usage: UsageEtcdServer},
		{Path: ca2, Usage: UsageCA},
		{Path: filepath.Join(t.TempDir(), "apiserver-etcd-client.crt"), Usage: UsageAPIServerEtcd, Optional: true},
	}
	got := Summary(targets, issued.Add(100*24*time.Hour))
	if want := "the first to expire is " + targets[0].Path + " (etcd-server) in 265 days, 2031-06-01"; !strings.Contains(got, want) {
		t.Errorf("Summary = %q, want it to say %q", got, want)
	}
	got = Summary(targets, issued.Add(350*24*time.Hour))
	if !strings.Contains(got, targets[0].Path+" (etcd-server) expiring") || !strings.Contains(got, "etcdlet certs renew") {
		t.Errorf("Summary 15 days before the end = %q, want the certificate named as expiring, and what to do", got)
	}
	if err := os.Remove(targets[0].Path); err != nil {
		t.Fatal(err)
	}
	if got = Summary(targets, issued.Add(24*time.Hour)); !strings.Contains(got, "unreadable") {
		t.Errorf("Summary with the server certificate gone = %q, want it unreadable", got)
	}
	if got = Summary(nil, issued); got != "" {
		t.Errorf("Summary without certificates = %q", got)
	}
}
