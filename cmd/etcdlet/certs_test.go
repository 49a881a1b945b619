package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcdlet/etcdlet/pki"
)

// issuedAt is when the test certificates are issued; checks and renewals
// run at later times, as a fake clock.
var issuedAt = time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)

// testPKI makes an etcd CA valid for ten years from a day before issuedAt
// into <root>/etcd with `certs init-ca`, and issues a member's certificates
// from it with `certs issue`, as an operator would. It returns the etcd dir.
func testPKI(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki", "etcd")
	var out bytes.Buffer
	if err := runCertsInitCA(&out, certsInitCAOptions{outDir: dir, name: pki.DefaultCAName, validity: pki.DefaultCAValidity, keyType: "ecdsa"},
		issuedAt.Add(-24*time.Hour)); err != nil {
		t.Fatalf("certs init-ca: %v\n%s", err, out.String())
	}
	o := certsIssueOptions{caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key"), addresses: []string{"10.0.0.10"},
		name: "cp-0", outDir: dir, validity: pki.DefaultValidity, keyType: string(pki.KeyRSA)}
	if err := runCertsIssue(&out, &out, o, issuedAt); err != nil {
		t.Fatalf("certs issue: %v\n%s", err, out.String())
	}
	return dir
}

// certs init-ca makes kubeadm's etcd CA once: ca.key 0600, ca.crt 0644,
// the directory 0700. A CA already there is reused and left alone; half a
// pair, or a pair that is no CA, is refused, and nothing is written.
func TestCertsInitCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pki", "etcd")
	o := certsInitCAOptions{outDir: dir, name: pki.DefaultCAName, validity: pki.DefaultCAValidity, keyType: "ecdsa"}
	var out bytes.Buffer
	if err := runCertsInitCA(&out, o, issuedAt); err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, filepath.Join(dir, "ca.key"): 0o600, filepath.Join(dir, "ca.crt"): 0o644} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v %v, want mode %v", path, fi.Mode(), err, mode)
		}
	}
	ca, err := pki.LoadCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"), issuedAt)
	if err != nil || ca.Cert.Subject.CommonName != "etcd-ca" {
		t.Fatalf("the CA made: %v %v", ca, err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "ca.key"))

	out.Reset()
	if err := runCertsInitCA(&out, o, issuedAt); err != nil || !strings.Contains(out.String(), "is reused") {
		t.Errorf("a second init-ca: %v %q, want the CA reused", err, out.String())
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "ca.key")); !bytes.Equal(before, after) {
		t.Error("a second init-ca replaced the CA key")
	}

	half := filepath.Join(t.TempDir(), "etcd")
	if err := os.MkdirAll(half, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(half, "ca.key"), before, 0o600); err != nil {
		t.Fatal(err)
	}
	err = runCertsInitCA(&out, certsInitCAOptions{outDir: half, name: pki.DefaultCAName, validity: pki.DefaultCAValidity, keyType: "ecdsa"}, issuedAt)
	if err == nil || !strings.Contains(err.Error(), "exists without") {
		t.Errorf("ca.key without ca.crt: %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(half, "ca.crt")); err == nil {
		t.Error("a CA certificate was made beside a key that is not its own")
	}
	if err := os.WriteFile(filepath.Join(half, "ca.crt"), []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = runCertsInitCA(&out, certsInitCAOptions{outDir: half, name: pki.DefaultCAName, validity: pki.DefaultCAValidity, keyType: "ecdsa"}, issuedAt)
	if err == nil || !strings.Contains(err.Error(), "no usable CA") {
		t.Errorf("a pair that is no CA: %v, want a refusal", err)
	}
	if err := runCertsInitCA(&out, certsInitCAOptions{outDir: t.TempDir(), name: pki.DefaultCAName, validity: pki.DefaultCAValidity, keyType: "dsa"}, issuedAt); err == nil {
		t.Error("--key-type dsa was accepted")
	}
}

// kubeadmTargets are what CertTargets makes of kubeadm's layout.
func kubeadmTargets(dir string) []pki.Target {
	ca := filepath.Join(dir, "ca.crt")
	t := func(base, usage string) pki.Target {
		return pki.Target{Path: filepath.Join(dir, base+".crt"), KeyPath: filepath.Join(dir, base+".key"), CAPath: ca, Usage: usage}
	}
	return []pki.Target{t("server", "etcd-server"), t("peer", "etcd-peer"), t("healthcheck-client", "etcdlet-client"),
		{Path: ca, Usage: "ca"}, t("../apiserver-etcd-client", "apiserver-etcd-client")}
}

func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}

func TestCertsCheckExitCodes(t *testing.T) {
	dir := testPKI(t)
	for _, tt := range []struct {
		name  string
		now   time.Time
		warn  time.Duration
		spoil func(t *testing.T)
		code  int
		says  []string
	}{
		{"fresh", issuedAt, pki.DefaultWarn, nil, 0, []string{"5 certificate files: 5 ok", "not after:  2031-06-01T12:00:00Z (in 365d0h)", "IP:10.0.0.10",
			"verified:   yes, against " + filepath.Join(dir, "ca.crt") + " (signed by CN=etcd-ca)", "usage:      etcd-server"}},
		{"within --warn", issuedAt.Add(340 * 24 * time.Hour), pki.DefaultWarn, nil, exitCertsExpiring, []string{"1 ok, 4 expiring", "expires in 25d0h"}},
		{"--warn 0", issuedAt.Add(340 * 24 * time.Hour), 0, nil, 0, nil},
		{"expired", issuedAt.Add(366 * 24 * time.Hour), pki.DefaultWarn, nil, exitCertsBroken, []string{"expired 1d0h ago", "4 expired"}},
		{"a key replaced", issuedAt, pki.DefaultWarn, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(dir, "healthcheck-client.key"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "peer.key"), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}, exitCertsBroken, []string{"key-mismatch", "is not this certificate's key"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.spoil != nil {
				tt.spoil(t)
			}
			var out bytes.Buffer
			err := runCertsCheck(&out, kubeadmTargets(dir), "text", tt.warn, tt.now)
			if got := exitCode(err); got != tt.code {
				t.Errorf("exit code %d (%v), want %d\n%s", got, err, tt.code, out.String())
			}
			for _, s := range tt.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output does not say %q:\n%s", s, out.String())
				}
			}
		})
	}
}

func TestCertsCheckJSON(t *testing.T) {
	dir := testPKI(t)
	var out bytes.Buffer
	if err := runCertsCheck(&out, kubeadmTargets(dir), "json", pki.DefaultWarn, issuedAt); err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Warn         string
		Certificates []struct {
			Path, Usage, CommonName, Status, Verification string
			NotAfter                                      time.Time
			RemainingSeconds                              int64
		}
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if rep.Warn != "720h0m0s" || len(rep.Certificates) != 5 {
		t.Fatalf("report %+v", rep)
	}
	c := rep.Certificates[0]
	if c.Path != filepath.Join(dir, "server.crt") || c.Usage != "etcd-server" || c.CommonName != "cp-0" || c.Status != "ok" ||
		c.Verification != pki.VerifyOK || !c.NotAfter.Equal(issuedAt.Add(pki.DefaultValidity)) || c.RemainingSeconds != int64(pki.DefaultValidity/time.Second) {
		t.Errorf("first certificate %+v", c)
	}
}

func renewCommand() (*cobra.Command, *bytes.Buffer) {
	var out bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	return cmd, &out
}

func TestCertsRenewFiles(t *testing.T) {
	dir := testPKI(t)
	before, _, err := pki.ReadCurrent(pki.KubeadmLayout(dir), pki.Profiles())
	if err != nil {
		t.Fatal(err)
	}
	listing := func() []string {
		var names []string
		for _, d := range []string{dir, filepath.Dir(dir)} {
			entries, err := os.ReadDir(d)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if !e.IsDir() {
					names = append(names, e.Name())
				}
			}
		}
		return names
	}
	o := certsRenewOptions{caCert: filepath.Join(dir, "ca.crt"), caKey: filepath.Join(dir, "ca.key"), outDir: dir, validity: pki.DefaultValidity, noRestart: true}
	renewAt := issuedAt.Add(335 * 24 * time.Hour)

	t.Run("dry run writes nothing", func(t *testing.T) {
		was := listing()
		cmd, out := renewCommand()
		dry := o
		dry.dryRun = true
		if err := runCertsRenew(cmd, dry, renewAt); err != nil {
			t.Fatal(err)
		}
		if now := listing(); !slices.Equal(now, was) {
			t.Errorf("files %v after a dry run, were %v", now, was)
		}
		for _, s := range []string{"Would renew (dry run, nothing written)", "not after: 2031-06-01T12:00:00Z -> 2032-05-01T12:00:00Z", "a new RSA 2048 key"} {
			if !strings.Contains(out.String(), s) {
				t.Errorf("output does not say %q:\n%s", s, out.String())
			}
		}
	})

	t.Run("renewed in place, old files kept", func(t *testing.T) {
		cmd, out := renewCommand()
		if err := runCertsRenew(cmd, o, renewAt); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		after, _, err := pki.ReadCurrent(pki.KubeadmLayout(dir), pki.Profiles())
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range after {
			old := before[i].Cert
			if !c.Cert.NotAfter.Equal(renewAt.Add(pki.DefaultValidity)) || c.Cert.SerialNumber.Cmp(old.SerialNumber) == 0 ||
				c.Cert.Subject.String() != old.Subject.String() || !slices.Equal(pki.SANs(c.Cert), pki.SANs(old)) {
				t.Errorf("%s: not after %s, subject %s, SANs %v; was %s, %s, %v", c.Profile.Name, c.Cert.NotAfter, c.Cert.Subject, pki.SANs(c.Cert),
					old.NotAfter, old.Subject, pki.SANs(old))
			}
		}
		var kept int
		for _, n := range listing() {
			if strings.HasSuffix(n, ".bak") {
				kept++
			}
		}
		if kept != 8 {
			t.Errorf("%d old files kept, want 8: %v", kept, listing())
		}
		if !strings.Contains(out.String(), "Not restarting the local member (--no-restart)") {
			t.Errorf("output:\n%s", out.String())
		}
		var check bytes.Buffer
		if err := runCertsCheck(&check, kubeadmTargets(dir), "text", pki.DefaultWarn, renewAt); err != nil {
			t.Errorf("certs check after the renewal: %v\n%s", err, check.String())
		}
	})

	t.Run("refusals", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			mod  func(*certsRenewOptions)
			want string
		}{
			{"--restart-only with --dry-run", func(o *certsRenewOptions) { o.restartOnly, o.dryRun = true, true }, "--restart-only renews nothing"},
			{"no validity", func(o *certsRenewOptions) { o.validity = 0 }, "must be positive"},
			{"nothing to renew", func(o *certsRenewOptions) { o.outDir = t.TempDir() }, "no certificate to renew"},
			{"over the CA", func(o *certsRenewOptions) { o.caCert = filepath.Join(dir, "server.crt") }, "would overwrite the CA's own file"},
		} {
			t.Run(tt.name, func(t *testing.T) {
				oo := o
				tt.mod(&oo)
				cmd, _ := renewCommand()
				if err := runCertsRenew(cmd, oo, renewAt); err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %v, want one saying %q", err, tt.want)
				}
			})
		}
	})
}
