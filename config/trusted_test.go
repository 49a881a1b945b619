package config

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/config/trust/trusttest"
)

// The layouts are made with package trusttest.
const nobody = trusttest.Nobody

var (
	mkfile = trusttest.File
	mkdir  = trusttest.Dir
	chown  = trusttest.Chown
)

// checkFilesLines runs CheckFiles and returns its problems, one a line.
func checkFilesLines(cfg *Config) []string {
	if err := cfg.CheckFiles(); err != nil {
		return strings.Split(err.Error(), "\n")
	}
	return nil
}

// wantLines fails unless got has one line per want, each containing it.
func wantLines(t *testing.T, got, want []string) {
	t.Helper()
	ok := len(got) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = strings.Contains(got[i], want[i])
	}
	if !ok {
		t.Fatalf("problems:\n  %s\nwant lines containing:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// The directories etcdlet keeps what it acts on in are held to the rule
// of the files: a planted operator.json or snapshot must be impossible.
func TestTrustedDirectories(t *testing.T) {
	trusttest.RequireRoot(t)
	tests := []struct {
		name string
		// setup makes the layout under root and sets the fields under test.
		setup func(t *testing.T, root string, cfg *Config)
		// want are parts of the problems, one per line; ROOT is root.
		want []string
	}{
		{"all in a private directory, not created yet", func(t *testing.T, root string, cfg *Config) {
			mkdir(t, filepath.Join(root, "var/lib/etcdlet"), 0o755)
			cfg.Agent.StateDir = filepath.Join(root, "var/lib/etcdlet/agent")
			cfg.Etcd.DataDir = filepath.Join(root, "var/lib/etcdlet/etcd")
			cfg.Backup.Store = BackupStore{Provider: ProviderLocal, Directory: filepath.Join(root, "var/lib/etcdlet/snapshots")}
		}, nil},
		{"state dir in another user's directory", func(t *testing.T, root string, cfg *Config) {
			home := mkdir(t, filepath.Join(root, "home/user"), 0o755)
			chown(t, home, nobody, nobody)
			cfg.Agent.StateDir = filepath.Join(home, "state")
		}, []string{`agent.stateDir: "ROOT/home/user/state": must be a directory only root can change: ROOT/home/user/state does not exist yet; ROOT/home/user, where it would be created: ` +
			`ROOT/home/user is owned by uid 65534, must be owned by root: another user could change what etcdlet acts on (chown root ROOT/home/user)`}},
		{"state dir owned by another user", func(t *testing.T, root string, cfg *Config) {
			cfg.Agent.StateDir = mkdir(t, filepath.Join(root, "state"), 0o700)
			chown(t, cfg.Agent.StateDir, nobody, nobody)
		}, []string{`agent.stateDir: "ROOT/state": must be a directory only root can change: ROOT/state: ROOT/state is owned by uid 65534`}},
		{"group-writable state dir", func(t *testing.T, root string, cfg *Config) {
			cfg.Agent.StateDir = mkdir(t, filepath.Join(root, "state"), 0o770)
		}, []string{`agent.stateDir: "ROOT/state": must be a directory only root can change: ROOT/state: ROOT/state is writable by group (mode 0770), must be writable by its owner only: another user could change what etcdlet acts on (chmod go-w ROOT/state)`}},
		{"state dir in a sticky world-writable directory, not created yet", func(t *testing.T, root string, cfg *Config) {
			tmp := mkdir(t, filepath.Join(root, "tmp"), 0o777|fs.ModeSticky)
			cfg.Agent.StateDir = filepath.Join(tmp, "state")
		}, []string{`agent.stateDir: "ROOT/tmp/state": must be a directory only root can change: ROOT/tmp/state does not exist yet; ROOT/tmp, where it would be created: ROOT/tmp is writable by others (mode 0777)`}},
		{"state dir created in a sticky world-writable directory", func(t *testing.T, root string, cfg *Config) {
			mkdir(t, filepath.Join(root, "tmp"), 0o777|fs.ModeSticky)
			cfg.Agent.StateDir = mkdir(t, filepath.Join(root, "tmp/state"), 0o700)
		}, nil},
		{"data dir in another user's directory", func(t *testing.T, root string, cfg *Config) {
			home := mkdir(t, filepath.Join(root, "home/user"), 0o755)
			chown(t, home, nobody, nobody)
			cfg.Etcd.DataDir = mkdir(t, filepath.Join(home, "etcd"), 0o700)
		}, []string{`etcd.dataDir: "ROOT/home/user/etcd": must be in a directory only root can change (the data dir is created and moved aside there): ROOT/home/user: ROOT/home/user is owned by uid 65534`}},
		{"data dir owned by etcd's own user in a private directory", func(t *testing.T, root string, cfg *Config) {
			cfg.Etcd.DataDir = mkdir(t, filepath.Join(root, "lib/etcd"), 0o700)
			chown(t, cfg.Etcd.DataDir, nobody, nobody)
		}, nil},
		{"snapshot store writable by group", func(t *testing.T, root string, cfg *Config) {
			dir := mkdir(t, filepath.Join(root, "snapshots"), 0o775)
			cfg.Backup.Store = BackupStore{Provider: ProviderLocal, Directory: dir}
		}, []string{`backup.store.directory: "ROOT/snapshots": must be a directory only root can change: ROOT/snapshots: ROOT/snapshots is writable by group (mode 0775)`}},
		{"snapshot store in another user's directory", func(t *testing.T, root string, cfg *Config) {
			home := mkdir(t, filepath.Join(root, "home/user"), 0o755)
			chown(t, home, nobody, nobody)
			cfg.Backup.Store = BackupStore{Provider: ProviderLocal, Directory: filepath.Join(home, "snapshots")}
		}, []string{`backup.store.directory: "ROOT/home/user/snapshots": must be a directory only root can change: ROOT/home/user/snapshots does not exist yet; ROOT/home/user, where it would be created: ROOT/home/user is owned by uid 65534`}},
		{"S3 credentials in a sticky world-writable directory", func(t *testing.T, root string, cfg *Config) {
			dir := mkdir(t, filepath.Join(root, "creds"), 0o777|fs.ModeSticky)
			mkfile(t, filepath.Join(dir, "accessKeyID"), 0o600)
			mkfile(t, filepath.Join(dir, "secretAccessKey"), 0o600)
			cfg.Backup.Store = BackupStore{Provider: ProviderS3, S3: &S3Store{Bucket: "b", CredentialsDir: dir}}
		}, []string{`backup.store.s3.credentialsDir: "ROOT/creds": must be a directory only root can change: ROOT/creds: ROOT/creds is writable by others (mode 0777)`}},
		{"S3 credentials in a private directory", func(t *testing.T, root string, cfg *Config) {
			dir := mkdir(t, filepath.Join(root, "creds"), 0o700)
			mkfile(t, filepath.Join(dir, "accessKeyID"), 0o600)
			mkfile(t, filepath.Join(dir, "secretAccessKey"), 0o600)
			cfg.Backup.Store = BackupStore{Provider: ProviderS3, S3: &S3Store{Bucket: "b", CredentialsDir: dir}}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			cfg := &Config{}
			tt.setup(t, root, cfg)
			var want []string
			for _, w := range tt.want {
				want = append(want, strings.ReplaceAll(w, "ROOT", root))
			}
			wantLines(t, checkFilesLines(cfg), want)
		})
	}
}

// Keys and credentials readable by a group other than root's are refused,
// wherever etcdlet reads them: named in the configuration (CheckFiles) or
// read at run time (CheckSecret).
func TestSecretsReadableByGroup(t *testing.T) {
	trusttest.RequireRoot(t)
	tests := []struct {
		name     string
		mode     fs.FileMode
		gid      int
		wantRule string // "" when accepted
	}{
		{"0600, kubeadm's mode", 0o600, 0, ""},
		{"0640 with root's group", 0o640, 0, ""},
		{"0640 with another group", 0o640, nobody, "is readable by group 65534 (mode 0640): a private key or credential must be readable by root only, as kubeadm writes them (chmod g-r PATH, or chgrp root PATH)"},
		{"0604, readable by others", 0o604, 0, "is readable by others (mode 0604): a private key or credential must be readable by root only (chmod o-r PATH)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			secret := func(name string) string {
				p := mkfile(t, filepath.Join(dir, name), tt.mode)
				chown(t, p, 0, tt.gid)
				return p
			}
			key, kubeconfig := secret("server.key"), secret("kubeconfig")
			creds := mkdir(t, filepath.Join(dir, "creds"), 0o700)
			id, s3secret := secret("creds/accessKeyID"), secret("creds/secretAccessKey")
			cert := mkfile(t, filepath.Join(dir, "server.crt"), 0o644)
			chown(t, cert, 0, nobody) // a certificate is public: readable by anyone
			cfg := &Config{}
			cfg.Etcd.TLS.Client = TLSFiles{CertFile: cert, KeyFile: key}
			cfg.Kubernetes.Kubeconfig = kubeconfig
			cfg.Backup.Store = BackupStore{Provider: ProviderS3, S3: &S3Store{Bucket: "b", CredentialsDir: creds}}
			var want []string
			if tt.wantRule != "" {
				for _, f := range []struct{ field, path string }{
					{"etcd.tls.client.keyFile", key}, {"kubernetes.kubeconfig", kubeconfig},
					{"backup.store.s3.credentialsDir", id}, {"backup.store.s3.credentialsDir", s3secret},
				} {
					want = append(want, fmt.Sprintf("%s: %q: %s", f.field, f.path, strings.ReplaceAll(tt.wantRule, "PATH", f.path)))
				}
			}
			wantLines(t, checkFilesLines(cfg), want)

			fi, err := os.Stat(key)
			if err != nil {
				t.Fatal(err)
			}
			switch err := CheckSecret(key, fi); {
			case tt.wantRule == "" && err != nil:
				t.Errorf("CheckSecret = %v, want accepted", err)
			case tt.wantRule != "" && (err == nil || err.Error() != strings.ReplaceAll(tt.wantRule, "PATH", key)):
				t.Errorf("CheckSecret = %v, want %s", err, strings.ReplaceAll(tt.wantRule, "PATH", key))
			}
		})
	}
}

// A secret read at run time is held to the owner rule too.
func TestCheckSecretOwner(t *testing.T) {
	trusttest.RequireRoot(t)
	token := mkfile(t, filepath.Join(t.TempDir(), "token"), 0o600)
	chown(t, token, nobody, 0)
	fi, err := os.Stat(token)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckSecret(token, fi); err == nil || !strings.Contains(err.Error(), "must be a file only root can change: "+token+": "+token+" is owned by uid 65534") {
		t.Fatalf("CheckSecret of another user's token = %v, want the owner rule", err)
	}
}

// The pacemaker programs are checked before any runs, whether polling is
// enabled or not: etcdlet pacemaker status runs them either way.
func TestCheckPrograms(t *testing.T) {
	trusttest.RequireRoot(t)
	dir := t.TempDir()
	trusted := mkfile(t, filepath.Join(dir, "bin/cibadmin"), 0o755)
	planted := mkfile(t, filepath.Join(dir, "bin/crm_mon"), 0o755)
	chown(t, planted, nobody, nobody)
	writable := mkfile(t, filepath.Join(dir, "bin/corosync-cmapctl"), 0o775)
	o := DefaultPacemaker()
	o.CrmMon, o.Cibadmin, o.CorosyncCmapctl = planted, trusted, writable
	want := []string{
		fmt.Sprintf(`pacemaker.crmMon: %q: must be a file only root can change: %s: %s is owned by uid 65534`, planted, planted, planted),
		fmt.Sprintf(`pacemaker.corosyncCmapctl: %q: must be a file only root can change: %s: %s is writable by group (mode 0775)`, writable, writable, writable),
	}
	var got []string
	if err := o.CheckPrograms(); err != nil {
		got = strings.Split(err.Error(), "\n")
	}
	wantLines(t, got, want)

	// A missing program is left to the run, which reports it.
	o.CrmMon, o.CorosyncCmapctl = filepath.Join(dir, "bin/missing"), trusted
	if err := o.CheckPrograms(); err != nil {
		t.Fatalf("CheckPrograms with a missing program = %v, want nil", err)
	}
}
