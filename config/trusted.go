package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/etcdlet/etcdlet/config/trust"
)

// The rules for the files and directories etcdlet acts on, in one place:
// CheckFiles applies them to what the configuration names, and the agent
// and the commands to what they read at run time (CheckSecret,
// CheckTrustedFile).

// untrusted is the rule a file breaks that someone other than root could
// have changed (err from trust.Check names what and how to fix it).
func untrusted(err error) string { return "must be a file only root can change: " + err.Error() }

// checkTrustedFile reports a file that cannot be opened, that someone
// other than root could change, or, for a secret (a private key,
// credentials), that someone other than root can read.
func checkTrustedFile(errs *Errors, field, path string, secret bool) {
	f, fi, err := openRegular(path, true)
	if err != nil {
		errs.add(field, path, "%v", err)
		return
	}
	f.Close()
	if err := trust.Check(path); err != nil {
		errs.add(field, path, "%s", untrusted(err))
	}
	if rule := secretReadRule(path, fi); secret && rule != "" {
		errs.add(field, path, "%s", rule)
	}
}

// CheckTrustedFile applies CheckFiles' rules to a file the configuration
// names only through another file (a program or a key named in the
// kubeconfig): it can be read, only root can change it, and a secret only
// root can read. Problems are reported under field.
func CheckTrustedFile(field, path string, secret bool) Errors {
	var errs Errors
	if !filepath.IsAbs(path) {
		errs.add(field, path, "must be an absolute path")
		return errs
	}
	checkTrustedFile(&errs, field, path, secret)
	return errs
}

// secretReadRule returns the rule a file holding a secret breaks when
// someone other than root can read it, "" when it breaks none. Whoever
// reads a key or a credential acts as etcd, as the agent or as its backup
// with every key of the cluster. A group may read it only when it is
// root's, or the group etcdlet runs as when that is not root (the usual
// way to let a service user read a key); kubeadm writes them 0600.
func secretReadRule(path string, fi fs.FileInfo) string {
	perm := fi.Mode().Perm()
	if perm&0o004 != 0 {
		return fmt.Sprintf("is readable by others (mode %04o): a private key or credential must be readable by root only (chmod o-r %s)", perm, path)
	}
	if perm&0o040 == 0 {
		return ""
	}
	gid := -1
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		gid = int(st.Gid)
	}
	if gid == 0 || gid == os.Getegid() {
		return ""
	}
	return fmt.Sprintf("is readable by group %d (mode %04o): a private key or credential must be readable by root only, as kubeadm writes them (chmod g-r %s, or chgrp root %s)",
		gid, perm, path, path)
}

// CheckSecret applies the rules for a secret to one just read at run time
// (the task API token, the S3 credentials), with fi the file's information
// from that read: only root can change it and only root can read it.
func CheckSecret(path string, fi fs.FileInfo) error {
	if err := trust.Check(path); err != nil {
		return errors.New(untrusted(err))
	}
	if rule := secretReadRule(path, fi); rule != "" {
		return errors.New(rule)
	}
	return nil
}

// checkDirs reports a directory etcdlet keeps what it acts on in that
// someone other than root could change. A planted operator.json in the
// state dir lets a node bootstrap alone; an object planted in the snapshot
// store is what restore takes for the newest snapshot; whoever can rename
// in the data dir's parent swaps the data etcd starts from or where it is
// moved aside to. The directories need not exist yet (the agent creates
// them): then the one they will be created in is checked.
func (c *Config) checkDirs(errs *Errors) {
	if d := c.Agent.StateDir; filepath.IsAbs(d) {
		checkTrustedDir(errs, "agent.stateDir", d, d, "must be a directory only root can change")
	}
	if d := c.Etcd.DataDir; filepath.IsAbs(d) {
		checkTrustedDir(errs, "etcd.dataDir", d, filepath.Dir(d),
			"must be in a directory only root can change (the data dir is created and moved aside there)")
	}
}

// checkTrustedDir reports under field (value as the user wrote it) the
// directory dir when trust.CheckDir refuses it; rule starts the message.
func checkTrustedDir(errs *Errors, field, value, dir, rule string) {
	if err := trust.CheckDir(dir); err != nil {
		errs.add(field, value, "%s: %v", rule, err)
	}
}
