package config

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"path/filepath"
	"time"
)

// Defaults of the backup and tasks sections.
const (
	DefaultSnapshotCompression = "gzip"
	DefaultRetentionPolicy     = RetentionExponential
	DefaultKeepFull            = 7
	DefaultAPIMinFullInterval  = time.Minute
	DefaultBackupAPIPort       = 8080
	DefaultSnapshotTimeout     = 15 * time.Minute
	DefaultDefragTimeout       = 30 * time.Minute
	DefaultCompactTimeout      = 10 * time.Minute
	DefaultDefragThreshold     = 0.2
	DefaultCompactRetain       = 10000
	DefaultTaskLockTTL         = 30 * time.Second
	DefaultTaskRequeue         = 15 * time.Second
)

// Retention policies: etcd-backup-restore's garbage-collection policies.
const (
	RetentionExponential = "Exponential"
	RetentionLimitBased  = "LimitBased"
)

// Snapshot store providers.
const (
	ProviderLocal = "local"
	ProviderS3    = "s3"
)

// Backup is the "backup" section: where snapshots go, when they are taken,
// how long they are kept, and etcd-backup-restore's HTTP API on the node.
// Snapshots use backup-restore's format and object names, so either tool
// reads the other's.
type Backup struct {
	Store BackupStore `yaml:"store,omitempty"`
	// Compression of snapshot objects: gzip (the default), lzw, zlib or none.
	Compression string `yaml:"compression"`
	// Schedule takes snapshots at these intervals (0: never). Every agent
	// schedules; a full snapshot is skipped when the store already has one
	// younger than the interval, so a shared store gets one per interval.
	Schedule BackupSchedule `yaml:"schedule,omitempty"`
	// Retention prunes snapshot objects (never etcd data dirs) after every
	// scheduled full snapshot.
	Retention BackupRetention `yaml:"retention"`
	// API is etcd-backup-restore's HTTP API (/snapshot/full, /snapshot/delta,
	// /snapshot/latest, /healthz) on the node address, which etcd-druid's
	// EtcdOpsTask controller calls.
	API BackupAPI `yaml:"api,omitempty"`
}

// BackupStore is where snapshot objects go; objects are named
// <prefix>/v2/<Full|Incr>-<start>-<last>-<unix>[.gz][.final].
type BackupStore struct {
	// Provider is local or s3; empty switches snapshots off.
	Provider string `yaml:"provider,omitempty"`
	// Directory (local) holds the objects, created 0700.
	Directory string `yaml:"directory,omitempty"`
	// Prefix of the object keys; defaults to cluster.name.
	Prefix string   `yaml:"prefix,omitempty"`
	S3     *S3Store `yaml:"s3,omitempty"`
}

// S3Store is an S3-compatible object store.
type S3Store struct {
	Bucket string `yaml:"bucket"`
	// Endpoint of an S3-compatible server (https://…); empty is AWS.
	Endpoint string `yaml:"endpoint,omitempty"`
	Region   string `yaml:"region,omitempty"`
	// ForcePathStyle addresses the bucket in the path (most non-AWS
	// servers need it).
	ForcePathStyle bool `yaml:"forcePathStyle,omitempty"`
	// CredentialsDir holds the files accessKeyID and secretAccessKey
	// (etcd-backup-restore's layout, a mounted Secret works as is).
	CredentialsDir string `yaml:"credentialsDir"`
	// CAFile verifies the endpoint's certificate instead of the system CAs.
	CAFile string `yaml:"caFile,omitempty"`
}

// BackupSchedule holds snapshot intervals.
type BackupSchedule struct {
	Full  time.Duration `yaml:"full,omitempty"`
	Delta time.Duration `yaml:"delta,omitempty"`
}

// BackupRetention says which snapshot objects to keep.
type BackupRetention struct {
	// Policy is Exponential (the default: every snapshot of the last
	// hour, the newest full of each hour of the last day, of each day of
	// the last week, of each week of the last four; no number of new
	// snapshots pushes history out) or LimitBased (KeepFull).
	Policy string `yaml:"policy"`
	// KeepFull full snapshots (and the deltas after the oldest kept)
	// stay, with policy LimitBased.
	KeepFull int `yaml:"keepFull,omitempty"`
	// MaxAge drops older objects too (0: no age limit); the newest full
	// snapshot and its deltas always stay.
	MaxAge time.Duration `yaml:"maxAge,omitempty"`
}

// BackupAPI is etcd-backup-restore's HTTP API on the node address.
type BackupAPI struct {
	// Port on the node address; 0 switches the API off.
	Port int `yaml:"port,omitempty"`
	// TLS (certFile, keyFile) serves https; the certificate needs the node
	// address as an IP SAN, which druid dials. CAFile asks every client
	// for a certificate signed by it (etcd-druid v0.38 presents none: use
	// AllowedClients for druid).
	TLS TLSFiles `yaml:"tls,omitempty"`
	// AllowedClients are the networks (CIDR, or single addresses) whose
	// clients may connect; any other is disconnected before TLS. For
	// druid: its pod network, or the addresses of the nodes it runs on.
	AllowedClients []string `yaml:"allowedClients,omitempty"`
	// Insecure serves off loopback without TLS or without client
	// authentication: anyone who reaches the port can order snapshots and
	// read the names of the stored ones.
	Insecure bool `yaml:"insecure,omitempty"`
	// MinFullInterval: a full snapshot ordered within this interval of the
	// newest full one in the store gets that one, so that no rate of
	// requests fills the store (0: every request takes one).
	MinFullInterval time.Duration `yaml:"minFullInterval"`
}

// Tasks is the "tasks" section: ops tasks run by the agent.
type Tasks struct {
	// LockTTL of the cluster-wide task lock: how long a task lock outlives
	// an agent killed while it held it.
	LockTTL time.Duration `yaml:"lockTTL"`
	// RequeueInterval between attempts of a step that asked to be retried.
	RequeueInterval time.Duration `yaml:"requeueInterval"`
	SnapshotTimeout time.Duration `yaml:"snapshotTimeout"`
	Defrag          DefragTask    `yaml:"defrag"`
	Compact         CompactTask   `yaml:"compact"`
}

// DefragTask tunes the rolling defragmentation.
type DefragTask struct {
	// Threshold is the free fraction of a member's backend below which it
	// is skipped.
	Threshold float64       `yaml:"threshold"`
	Timeout   time.Duration `yaml:"timeout"`
	// Schedule runs it at this interval (0: never); the cluster-wide
	// record of the last run keeps it to one per interval.
	Schedule time.Duration `yaml:"schedule,omitempty"`
}

// CompactTask tunes compaction.
type CompactTask struct {
	// Retain revisions before the current one stay readable.
	Retain   int64         `yaml:"retain"`
	Timeout  time.Duration `yaml:"timeout"`
	Schedule time.Duration `yaml:"schedule,omitempty"`
}

// SnapshotsEnabled reports whether a snapshot store is configured.
func (b Backup) SnapshotsEnabled() bool { return b.Store.Provider != "" }

func (c *Config) applyBackupDefaults(explicit map[string]bool) {
	b := &c.Backup
	if b.Compression == "" {
		b.Compression = DefaultSnapshotCompression
	}
	if b.Store.Prefix == "" {
		b.Store.Prefix = c.Cluster.Name
	}
	if b.Retention.Policy == "" {
		b.Retention.Policy = DefaultRetentionPolicy
	}
	if b.Retention.Policy == RetentionLimitBased {
		setUnlessExplicit(explicit, "backup.retention.keepFull", &b.Retention.KeepFull, DefaultKeepFull)
	}
	setUnlessExplicit(explicit, "backup.api.minFullInterval", &b.API.MinFullInterval, DefaultAPIMinFullInterval)
	t := &c.Tasks
	setUnlessExplicit(explicit, "tasks.lockTTL", &t.LockTTL, DefaultTaskLockTTL)
	setUnlessExplicit(explicit, "tasks.requeueInterval", &t.RequeueInterval, DefaultTaskRequeue)
	setUnlessExplicit(explicit, "tasks.snapshotTimeout", &t.SnapshotTimeout, DefaultSnapshotTimeout)
	setUnlessExplicit(explicit, "tasks.defrag.threshold", &t.Defrag.Threshold, DefaultDefragThreshold)
	setUnlessExplicit(explicit, "tasks.defrag.timeout", &t.Defrag.Timeout, DefaultDefragTimeout)
	setUnlessExplicit(explicit, "tasks.compact.retain", &t.Compact.Retain, DefaultCompactRetain)
	setUnlessExplicit(explicit, "tasks.compact.timeout", &t.Compact.Timeout, DefaultCompactTimeout)
}

func (c *Config) validateBackup(errs *Errors) {
	b := c.Backup
	switch b.Compression {
	case "gzip", "lzw", "zlib", "none":
	default:
		errs.add("backup.compression", b.Compression, "must be gzip, lzw, zlib or none")
	}
	s := b.Store
	switch s.Provider {
	case "":
		if b.Schedule.Full != 0 || b.Schedule.Delta != 0 || b.API.Port != 0 {
			errs.add("backup.store.provider", nil, "required with backup.schedule or backup.api: local or s3")
		}
	case ProviderLocal:
		if requireAbsPath(errs, "backup.store.directory", s.Directory) && nested(c.Etcd.DataDir, s.Directory) {
			errs.add("backup.store.directory", s.Directory, "must not be inside or contain etcd.dataDir (%s): moving a data dir aside would take the snapshots with it", c.Etcd.DataDir)
		}
		if s.S3 != nil {
			errs.add("backup.store.s3", "set", "only used with provider s3")
		}
	case ProviderS3:
		c.validateS3(errs, s.S3)
		if s.Directory != "" {
			errs.add("backup.store.directory", s.Directory, "only used with provider local")
		}
	default:
		errs.add("backup.store.provider", s.Provider, "must be local or s3 (or empty: no snapshots)")
	}
	if s.Prefix != "" && (s.Prefix[0] == '/' || filepath.Clean(s.Prefix) != s.Prefix) {
		errs.add("backup.store.prefix", s.Prefix, "must be a clean relative key prefix like etcd-main or clusters/etcd-main")
	}
	for _, d := range []struct {
		path  string
		value time.Duration
		min   time.Duration
	}{{"backup.schedule.full", b.Schedule.Full, time.Minute}, {"backup.schedule.delta", b.Schedule.Delta, 10 * time.Second},
		{"tasks.defrag.schedule", c.Tasks.Defrag.Schedule, 10 * time.Minute}, {"tasks.compact.schedule", c.Tasks.Compact.Schedule, time.Minute}} {
		if d.value != 0 && d.value < d.min {
			errs.add(d.path, d.value, "must be 0 (off) or at least %s", d.min)
		}
	}
	if b.Schedule.Delta != 0 && b.Schedule.Full == 0 {
		errs.add("backup.schedule.delta", b.Schedule.Delta, "needs backup.schedule.full: a delta builds on the last full snapshot")
	}
	switch r := b.Retention; r.Policy {
	case RetentionExponential:
		if r.KeepFull != 0 {
			errs.add("backup.retention.keepFull", r.KeepFull, "only used with backup.retention.policy LimitBased (the policy is Exponential)")
		}
	case RetentionLimitBased:
		if r.KeepFull < 1 {
			errs.add("backup.retention.keepFull", r.KeepFull, "must be at least 1: the newest full snapshot is never pruned")
		}
	default:
		errs.add("backup.retention.policy", r.Policy, "must be Exponential or LimitBased")
	}
	if b.Retention.MaxAge < 0 {
		errs.add("backup.retention.maxAge", b.Retention.MaxAge, "must not be negative")
	}
	if b.API.Port != 0 {
		c.validateBackupAPI(errs)
	}
	t := c.Tasks
	if t.LockTTL < 5*time.Second || t.LockTTL > 10*time.Minute {
		errs.add("tasks.lockTTL", t.LockTTL, "must be between 5s and 10m")
	}
	if t.RequeueInterval < 100*time.Millisecond || t.RequeueInterval > 10*time.Minute {
		errs.add("tasks.requeueInterval", t.RequeueInterval, "must be between 100ms and 10m")
	}
	if t.Defrag.Threshold < 0 || t.Defrag.Threshold > 1 {
		errs.add("tasks.defrag.threshold", t.Defrag.Threshold, "must be a fraction from 0 to 1")
	}
	if t.Compact.Retain < 0 {
		errs.add("tasks.compact.retain", t.Compact.Retain, "must not be negative")
	}
	for _, d := range []struct {
		path  string
		value time.Duration
	}{{"tasks.snapshotTimeout", t.SnapshotTimeout}, {"tasks.defrag.timeout", t.Defrag.Timeout}, {"tasks.compact.timeout", t.Compact.Timeout}} {
		if d.value < 10*time.Second || d.value > 24*time.Hour {
			errs.add(d.path, d.value, "must be between 10s and 24h")
		}
	}
}

// validateBackupAPI: off loopback, the API needs https and a way to tell
// its callers apart (client certificates or an allow-list of networks),
// unless insecure says otherwise: an unauthenticated caller could keep the
// task slot busy and read snapshot names.
func (c *Config) validateBackupAPI(errs *Errors) {
	a := c.Backup.API
	checkPort(errs, "backup.api.port", a.Port)
	if (a.TLS.CertFile == "") != (a.TLS.KeyFile == "") {
		errs.add("backup.api.tls", "certFile/keyFile", "needs both certFile and keyFile")
	}
	if a.TLS.CAFile != "" && a.TLS.CertFile == "" {
		errs.add("backup.api.tls.caFile", a.TLS.CAFile, "needs certFile and keyFile: client certificates are asked for over https only")
	}
	requireAbsIfSet(errs, "backup.api.tls.certFile", a.TLS.CertFile)
	requireAbsIfSet(errs, "backup.api.tls.keyFile", a.TLS.KeyFile)
	requireAbsIfSet(errs, "backup.api.tls.caFile", a.TLS.CAFile)
	for i, n := range a.AllowedClients {
		path := fmt.Sprintf("backup.api.allowedClients[%d]", i)
		p, err := parseNetwork(n)
		switch {
		case err != nil:
			errs.add(path, n, "%v", err)
		case p.Bits() == 0:
			errs.add(path, n, "allows every client: list the networks of the API's callers, or set backup.api.insecure: true to say that anyone may call it")
		}
	}
	if a.MinFullInterval < 0 || a.MinFullInterval > time.Hour {
		errs.add("backup.api.minFullInterval", a.MinFullInterval, "must be between 0 and 1h")
	}
	tlsOn, clientAuth := a.TLS.CertFile != "", a.TLS.CAFile != "" || len(a.AllowedClients) > 0
	switch {
	case c.nodeOnLoopback():
	case a.Insecure && tlsOn && clientAuth:
		errs.add("backup.api.insecure", true, "must not be set with https and client authentication (tls.caFile or allowedClients): it would have no effect, and would read as if the API were open")
	case a.Insecure:
	case !tlsOn:
		errs.add("backup.api.tls", nil, "required off loopback (the API is served on the node address): set certFile and keyFile, or backup.api.insecure: true to serve plaintext")
	case !clientAuth:
		errs.add("backup.api", nil, "needs client authentication off loopback: tls.caFile (clients present a certificate signed by it) or allowedClients (the networks of the callers, e.g. etcd-druid's pod network, which presents no certificate), or backup.api.insecure: true to let anyone who reaches the port order snapshots")
	}
}

// parseNetwork reads an allowedClients entry: a network in CIDR notation
// without host bits (10.0.0.0/8), or one address (a /32 or /128).
func parseNetwork(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" || a.String() != s {
			return netip.Prefix{}, fmt.Errorf("must be an address in canonical form (%s) without a zone", a.WithZone(""))
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, errors.New("must be a network in CIDR notation (10.0.0.0/8, fd00::/64) or one address")
	}
	if p.Masked() != p || p.String() != s {
		return netip.Prefix{}, fmt.Errorf("must be written as the network it means, %s", p.Masked())
	}
	return p, nil
}

// ClientNetworks is AllowedClients parsed (after validation).
func (a BackupAPI) ClientNetworks() []netip.Prefix {
	var out []netip.Prefix
	for _, n := range a.AllowedClients {
		if p, err := parseNetwork(n); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// backupWarnings: what backup.api.insecure lets anyone do, off loopback.
func (c *Config) backupWarnings() []string {
	a := c.Backup.API
	if a.Port == 0 || !a.Insecure || c.nodeOnLoopback() {
		return nil // on loopback it changes nothing
	}
	return []string{fmt.Sprintf("backup.api.insecure is set: anyone who reaches port %d of the node address can order snapshots and read the names of the stored ones", a.Port)}
}

func (c *Config) validateS3(errs *Errors, s *S3Store) {
	if s == nil {
		errs.add("backup.store.s3", nil, "required with provider s3: bucket and credentialsDir")
		return
	}
	if s.Bucket == "" {
		errs.add("backup.store.s3.bucket", nil, "required")
	}
	requireAbsPath(errs, "backup.store.s3.credentialsDir", s.CredentialsDir)
	requireAbsIfSet(errs, "backup.store.s3.caFile", s.CAFile)
	if s.Endpoint != "" {
		u, err := url.Parse(s.Endpoint)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/"):
			errs.add("backup.store.s3.endpoint", s.Endpoint, "must be an http or https URL with a host and no path, e.g. https://s3.example.com")
		case u.Scheme == "http" && !c.Etcd.Insecure:
			if ip, ok := listenHost(u.Hostname()); !ok || !ip.IsLoopback() {
				errs.add("backup.store.s3.endpoint", s.Endpoint, "must be https off loopback: snapshots hold every key (etcd.insecure allows plaintext)")
			}
		}
	}
}

// nodeOnLoopback reports whether node.address is a loopback address (the
// tests and the demo run every node on 127.0.0.x).
func (c *Config) nodeOnLoopback() bool {
	a, err := netip.ParseAddr(c.Node.Address)
	return err == nil && a.IsLoopback()
}

func requireAbsIfSet(errs *Errors, path, value string) {
	if value != "" {
		requireAbsPath(errs, path, value)
	}
}

// S3Credentials names the files of backup.store.s3.credentialsDir.
func (s S3Store) S3Credentials() (accessKeyID, secretAccessKey string) {
	return filepath.Join(s.CredentialsDir, "accessKeyID"), filepath.Join(s.CredentialsDir, "secretAccessKey")
}

// Scheme is the API's URL scheme.
func (b BackupAPI) Scheme() string { return scheme(b.TLS.CertFile != "") }

// checkBackupFiles checks the files and directories the backup section
// names on this host.
func (c *Config) checkBackupFiles(errs *Errors) {
	if d := c.Backup.Store.Directory; c.Backup.Store.Provider == ProviderLocal && filepath.IsAbs(d) {
		// restore takes the newest object it finds there for the data.
		checkTrustedDir(errs, "backup.store.directory", d, d, "must be a directory only root can change")
	}
	if s := c.Backup.Store.S3; s != nil && c.Backup.Store.Provider == ProviderS3 && filepath.IsAbs(s.CredentialsDir) {
		// Credentials: whoever reads them reads every snapshot, whoever
		// changes them chooses where snapshots go and come from.
		checkTrustedDir(errs, "backup.store.s3.credentialsDir", s.CredentialsDir, s.CredentialsDir, "must be a directory only root can change")
		id, secret := s.S3Credentials()
		checkTrustedFile(errs, "backup.store.s3.credentialsDir", id, true)
		checkTrustedFile(errs, "backup.store.s3.credentialsDir", secret, true)
		if s.CAFile != "" && filepath.IsAbs(s.CAFile) {
			checkTrustedFile(errs, "backup.store.s3.caFile", s.CAFile, false)
		}
	}
	if a := c.Backup.API; a.Port != 0 {
		if a.TLS.CertFile != "" && filepath.IsAbs(a.TLS.CertFile) {
			checkTrustedFile(errs, "backup.api.tls.certFile", a.TLS.CertFile, false)
		}
		if a.TLS.KeyFile != "" && filepath.IsAbs(a.TLS.KeyFile) {
			checkTrustedFile(errs, "backup.api.tls.keyFile", a.TLS.KeyFile, true)
		}
		if a.TLS.CAFile != "" && filepath.IsAbs(a.TLS.CAFile) {
			checkTrustedFile(errs, "backup.api.tls.caFile", a.TLS.CAFile, false)
		}
	}
}
