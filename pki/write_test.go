package pki

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// issueSet issues a member's set with a fresh CA at testNow.
func issueSet(t *testing.T) (testCA, *Set) {
	t.Helper()
	ca := newTestCA(t, caSpec{})
	set, err := Issue(ca.CA, Request{NodeName: "cp-0", Addresses: addrs(t, "10.0.0.10", "fd00::10"), Validity: DefaultValidity, KeyType: KeyECDSA, Now: testNow}, Profiles())
	if err != nil {
		t.Fatal(err)
	}
	return ca, set
}

// listDir names the entries of dir, sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestInstallFresh(t *testing.T) {
	// A restrictive umask must not change the modes written.
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)

	ca, set := issueSet(t)
	root := t.TempDir()
	l := KubeadmLayout(filepath.Join(root, "kubernetes", "pki", "etcd"))
	rep, err := Install(ca.CA, set, l, WriteOptions{Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.MovedAside) != 0 || len(rep.Written) != 8 {
		t.Fatalf("report %+v", rep)
	}
	for _, d := range []string{filepath.Join(root, "kubernetes"), l.PKIDir, l.EtcdDir} {
		if m := mode(t, d); m != DirMode {
			t.Errorf("%s: mode %o, want %o", d, m, DirMode)
		}
	}
	for _, is := range set.Certs {
		certPath, keyPath := l.CertPath(is.Profile), l.KeyPath(is.Profile)
		if m := mode(t, keyPath); m != 0o600 {
			t.Errorf("%s: mode %o, want 600", keyPath, m)
		}
		if m := mode(t, certPath); m != 0o644 {
			t.Errorf("%s: mode %o, want 644", certPath, m)
		}
		certPEM, _ := os.ReadFile(certPath)
		keyPEM, _ := os.ReadFile(keyPath)
		onDisk := is
		onDisk.CertPEM, onDisk.KeyPEM = certPEM, keyPEM
		if err := Verify(ca.CA, onDisk, testNow); err != nil {
			t.Errorf("%s on disk: %v", is.Profile.Name, err)
		}
	}
	if got := listDir(t, l.EtcdDir); !slices.Equal(got, []string{"healthcheck-client.crt", "healthcheck-client.key", "peer.crt", "peer.key", "server.crt", "server.key"}) {
		t.Errorf("etcd dir holds %v", got)
	}
	if got := listDir(t, l.PKIDir); !slices.Equal(got, []string{"apiserver-etcd-client.crt", "apiserver-etcd-client.key", "etcd"}) {
		t.Errorf("pki dir holds %v", got)
	}
}

func TestInstallExistingDirKeepsItsMode(t *testing.T) {
	ca, set := issueSet(t)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(ca.CA, set, Layout{EtcdDir: dir, PKIDir: dir}, WriteOptions{Now: testNow}); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, dir); m != 0o755 {
		t.Errorf("existing dir mode changed to %o", m)
	}
}

func TestInstallExisting(t *testing.T) {
	for _, tc := range []struct {
		name     string
		existing []string // files present before, relative to the etcd dir
		force    bool
	}{
		{name: "one key exists", existing: []string{"server.key"}},
		{name: "a certificate and the apiserver client key exist", existing: []string{"peer.crt", "../apiserver-etcd-client.key"}},
		{name: "everything exists, forced", existing: []string{"server.crt", "server.key", "peer.crt", "peer.key", "healthcheck-client.crt", "healthcheck-client.key", "../apiserver-etcd-client.crt", "../apiserver-etcd-client.key"}, force: true},
		{name: "one key exists, forced", existing: []string{"server.key"}, force: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ca, set := issueSet(t)
			root := t.TempDir()
			l := KubeadmLayout(filepath.Join(root, "pki", "etcd"))
			if err := os.MkdirAll(l.EtcdDir, 0o700); err != nil {
				t.Fatal(err)
			}
			oldContent := map[string][]byte{}
			for _, rel := range tc.existing {
				p := filepath.Clean(filepath.Join(l.EtcdDir, rel))
				oldContent[p] = []byte("old " + rel + "\n")
				if err := os.WriteFile(p, oldContent[p], 0o640); err != nil {
					t.Fatal(err)
				}
			}
			before := map[string][]string{l.EtcdDir: listDir(t, l.EtcdDir), l.PKIDir: listDir(t, l.PKIDir)}

			rep, err := Install(ca.CA, set, l, WriteOptions{Now: testNow, Force: tc.force})
			if !tc.force {
				var ee *ExistsError
				if !errors.As(err, &ee) {
					t.Fatalf("err = %v, want *ExistsError", err)
				}
				var want []string
				for p := range oldContent {
					want = append(want, p)
					if !strings.Contains(err.Error(), p) {
						t.Errorf("error %q does not name %s", err, p)
					}
				}
				slices.Sort(want)
				got := slices.Sorted(slices.Values(ee.Paths))
				if !slices.Equal(got, want) {
					t.Errorf("refused for %v, want %v", got, want)
				}
				// Nothing changed: same entries, same content.
				for d, names := range before {
					if got := listDir(t, d); !slices.Equal(got, names) {
						t.Errorf("%s holds %v, before %v", d, got, names)
					}
				}
				for p, c := range oldContent {
					if got, _ := os.ReadFile(p); !bytes.Equal(got, c) {
						t.Errorf("%s changed", p)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.MovedAside) != len(tc.existing) {
				t.Fatalf("moved aside %v, want %d files", rep.MovedAside, len(tc.existing))
			}
			for _, m := range rep.MovedAside {
				if want := m.From + ".20300601T120000Z.bak"; m.To != want {
					t.Errorf("backup %s, want %s", m.To, want)
				}
				if got, _ := os.ReadFile(m.To); !bytes.Equal(got, oldContent[m.From]) {
					t.Errorf("backup %s holds %q, want the old content", m.To, got)
				}
				if got := mode(t, m.To); got != 0o640 {
					t.Errorf("backup %s has mode %o, want the old 640", m.To, got)
				}
				if got, _ := os.ReadFile(m.From); bytes.Equal(got, oldContent[m.From]) {
					t.Errorf("%s still holds the old content", m.From)
				}
			}
			for _, is := range set.Certs {
				if m := mode(t, l.KeyPath(is.Profile)); m != 0o600 {
					t.Errorf("%s: mode %o after replacing", l.KeyPath(is.Profile), m)
				}
				if m := mode(t, l.CertPath(is.Profile)); m != 0o644 {
					t.Errorf("%s: mode %o after replacing", l.CertPath(is.Profile), m)
				}
			}

			// Again in the same second: the earlier backups stay, the new
			// ones get another name.
			set2, err := Issue(ca.CA, Request{NodeName: "cp-0", Addresses: addrs(t, "10.0.0.10"), Validity: DefaultValidity, KeyType: KeyRSA, Now: testNow}, Profiles())
			if err != nil {
				t.Fatal(err)
			}
			rep2, err := Install(ca.CA, set2, l, WriteOptions{Now: testNow, Force: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep2.MovedAside) != 8 {
				t.Fatalf("second run moved aside %d files, want 8", len(rep2.MovedAside))
			}
			for _, m := range rep2.MovedAside {
				if want := m.From + ".20300601T120000Z-2.bak"; slices.ContainsFunc(rep.MovedAside, func(o Moved) bool { return o.From == m.From }) && m.To != want {
					t.Errorf("second backup %s, want %s", m.To, want)
				}
			}
			for _, m := range rep.MovedAside {
				if got, _ := os.ReadFile(m.To); !bytes.Equal(got, oldContent[m.From]) {
					t.Errorf("first backup %s was overwritten", m.To)
				}
			}
		})
	}
}

func TestWriteAbortLeavesNothing(t *testing.T) {
	ca, set := issueSet(t)
	dir := t.TempDir()
	l := Layout{EtcdDir: dir, PKIDir: dir}
	existing := l.KeyPath(Profiles()[0])
	if err := os.WriteFile(existing, []byte("old key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var staged map[string][]byte
	_, err := Install(ca.CA, set, l, WriteOptions{Now: testNow, Force: true, BeforeRename: func(s map[string][]byte) error {
		staged = s
		return errors.New("refused by the test")
	}})
	if err == nil || !strings.Contains(err.Error(), "refused by the test") || !strings.Contains(err.Error(), "nothing was installed") {
		t.Fatalf("err = %v", err)
	}
	if len(staged) != 8 {
		t.Errorf("BeforeRename saw %d files, want 8", len(staged))
	}
	if got := listDir(t, dir); !slices.Equal(got, []string{"server.key"}) {
		t.Errorf("dir holds %v after an aborted write, want only the old server.key", got)
	}
	if got, _ := os.ReadFile(existing); string(got) != "old key\n" {
		t.Errorf("existing file changed: %q", got)
	}
}

func TestInstallRefusesWhatDoesNotVerify(t *testing.T) {
	_, set := issueSet(t)
	other := newTestCA(t, caSpec{})
	dir := t.TempDir()
	_, err := Install(other.CA, set, Layout{EtcdDir: dir, PKIDir: dir}, WriteOptions{Now: testNow})
	if err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("err = %v, want a verification failure", err)
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Errorf("dir holds %v", got)
	}
}

func TestWriteRefusesDirectoryAndDuplicates(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "server.crt")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Write([]File{{Path: sub, Data: []byte("x"), Mode: 0o644}}, WriteOptions{Force: true}); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("err = %v", err)
	}
	p := filepath.Join(dir, "a")
	if _, err := Write([]File{{Path: p, Mode: 0o644}, {Path: p + "/", Mode: 0o644}}, WriteOptions{}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("err = %v", err)
	}
}

func TestBackupNames(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "server.key")
	if err := os.WriteFile(p, []byte("v1"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2031, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	rep, err := Write([]File{{Path: p, Data: []byte("v2"), Mode: 0o600}}, WriteOptions{Force: true, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if want := p + ".20310102T020405Z.bak"; len(rep.MovedAside) != 1 || rep.MovedAside[0].To != want {
		t.Fatalf("moved aside %v, want %s (UTC)", rep.MovedAside, want)
	}
	if got, _ := os.ReadFile(p); string(got) != "v2" {
		t.Fatalf("%s holds %q", p, got)
	}
}
