// Package config holds etcdlet's configuration file: its types, defaults,
// strict loading and validation, including the rules for the externally
// managed list of member addresses.
//
// Field names in YAML are camelCase and documented field by field in
// docs/config.md; every validation problem is reported as a FieldError that
// names the field path, the offending value and the rule it breaks.
package config

import "time"

// Defaults applied by Load before validation. They are exported so that the
// documentation, the CLI help and the tests quote one source.
const (
	DefaultClientPort        = 2379
	DefaultPeerPort          = 2380
	DefaultListenMetricsURL  = "http://127.0.0.1:2381"
	DefaultDataDir           = "/var/lib/etcdlet/etcd"
	DefaultStateDir          = "/var/lib/etcdlet/agent"
	DefaultAgentListen       = "127.0.0.1:9479"
	DefaultReconcileInterval = 5 * time.Second
	DefaultIdleInterval      = 30 * time.Second
	DefaultCallTimeout       = 2 * time.Second
	DefaultLockTTL           = 15 * time.Second
	DefaultAgentPeerPort     = 2382
	DefaultLearnerTimeout    = 10 * time.Minute
	DefaultRemovalHoldDown   = 2 * time.Second
	DefaultMoveAsideLimit    = 3
	DefaultMoveAsideWindow   = time.Hour
	DefaultEtcdLogLevel      = "warn"
	DefaultLogLevel          = "info"
	DefaultLogFormat         = LogFormatAuto
)

// Member address sources.
const (
	SourceStatic = "static"
	SourceFile   = "file"
	// SourceEtcdResource is etcd-druid's Etcd resource (kubernetes.etcd):
	// its spec.externallyManagedMemberAddresses, watched.
	SourceEtcdResource = "etcd-resource"
	// SourceCluster is the list etcdlet keeps in the cluster's own
	// keyspace, changed with etcdlet members add|remove|set from any host
	// and watched by every agent; members.seeds are where a host that is
	// not yet a member reads it.
	SourceCluster = "cluster"
)

// sourceNames is every members.source, for error messages.
const sourceNames = "static, file, etcd-resource or cluster"

// Ways a new cluster may form (cluster.bootstrap).
const (
	// BootstrapExplicit: a new cluster forms only on an operator's act on
	// one node (etcdlet bootstrap --approve, or cluster.founder naming it):
	// that node founds a one-member cluster of itself, and the others join
	// it as learners. Fresh nodes never form a cluster by themselves. The
	// default, as kubeadm init, k3s --cluster-init and talosctl bootstrap
	// make the first cluster an explicit act.
	BootstrapExplicit = "explicit"
	// BootstrapConsent: fresh nodes bootstrap the listed nodes together once
	// every listed node's agent confirms it is fresh (the consent protocol),
	// for automated labs.
	BootstrapConsent = "consent"
	// BootstrapNever: this node never founds a cluster; it only joins one.
	// Always in force with members.source etcd-resource: the API server that
	// serves that list runs on the cluster, so the cluster exists.
	BootstrapNever = "never"
)

// Runtimes for the local etcd member.
const (
	RuntimeEmbedded  = "embedded"
	RuntimeStaticPod = "static-pod"
)

// Log formats for the agent's own log.
const (
	LogFormatAuto = "auto" // text on a terminal, JSON otherwise
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// Config is the whole etcdlet configuration file.
type Config struct {
	Cluster    Cluster    `yaml:"cluster"`
	Members    Members    `yaml:"members"`
	Node       Node       `yaml:"node"`
	Etcd       Etcd       `yaml:"etcd"`
	StaticPod  StaticPod  `yaml:"staticPod"`
	Protection Protection `yaml:"protection"`
	Agent      Agent      `yaml:"agent"`
	Pacemaker  Pacemaker  `yaml:"pacemaker"`
	Kubernetes Kubernetes `yaml:"kubernetes"`
	Backup     Backup     `yaml:"backup"`
	Tasks      Tasks      `yaml:"tasks"`
	// Certificates renews the member's certificates before they expire.
	Certificates Certificates `yaml:"certificates"`

	// Digest is the SHA-256, in hex, of the file content Load read (see
	// FileDigest); empty for a configuration from Parse. It tells whether
	// the file on disk is still the one in force.
	Digest string `yaml:"-"`
}

// Cluster identifies the etcd cluster that the member list describes.
type Cluster struct {
	// Name is the member name prefix: members are named "<name>-<ip>".
	Name string `yaml:"name"`
	// Replicas, when set, is the exact length every member list must have
	// (etcd-druid's spec.replicas in externally managed mode).
	Replicas *int `yaml:"replicas,omitempty"`
	// Token is the initial-cluster-token used when the listed nodes bootstrap
	// a new cluster together. Defaults to Name, so that every node derives
	// the same member IDs from the same list without coordination.
	Token string `yaml:"token,omitempty"`
	// Bootstrap says how a new cluster may form: BootstrapExplicit (the
	// default), BootstrapConsent or BootstrapNever (the default, and the only
	// value, with members.source etcd-resource).
	Bootstrap string `yaml:"bootstrap,omitempty"`
	// Founder, with BootstrapExplicit, is the address of the one node that
	// founds the cluster when none exists yet: the initial configuration's
	// operator act, the same on every host. It is honoured once: only on a
	// node that was never a member and never founded a cluster, holds no
	// data, finds no listed etcd answering, and hears every other listed
	// node's agent confirm that it holds no data either.
	Founder string `yaml:"founder,omitempty"`
}

// Members says where the externally managed list of member IPs comes from.
type Members struct {
	Source    string   `yaml:"source"`
	Addresses []string `yaml:"addresses,omitempty"`
	File      string   `yaml:"file,omitempty"`
	// Seeds, with members.source cluster, are addresses of members whose
	// client URLs a host reads the list from before it finds itself in
	// it (a host that is listed also reads it from the listed members).
	Seeds []string `yaml:"seeds,omitempty"`
}

// Node describes this host.
type Node struct {
	// Address is this host's member IP. When empty it is detected as the one
	// listed address that is assigned to a local interface.
	Address string `yaml:"address,omitempty"`
}

// Etcd configures the local etcd member.
type Etcd struct {
	Runtime          string            `yaml:"runtime"`
	DataDir          string            `yaml:"dataDir"`
	ClientPort       int               `yaml:"clientPort"`
	PeerPort         int               `yaml:"peerPort"`
	ListenMetricsURL string            `yaml:"listenMetricsURL"`
	TLS              EtcdTLS           `yaml:"tls,omitempty"`
	ExtraArgs        map[string]string `yaml:"extraArgs,omitempty"`
	// LogLevel of the embedded etcd server's log (debug, info, warn, error).
	LogLevel string `yaml:"logLevel"`
	// DataDirMustBeMount refuses to run the member when the data dir is
	// not a mount point: a disk that failed to mount leaves an empty
	// directory, which must not read as "the data is gone, rejoin".
	DataDirMustBeMount bool `yaml:"dataDirMustBeMount,omitempty"`
	// MoveAsideLimit data dirs moved aside within MoveAsideWindow make the
	// node stop rejoining until the operator acknowledges: something is
	// flapping, and every rejoin copies the whole keyspace again.
	MoveAsideLimit  int           `yaml:"moveAsideLimit"`
	MoveAsideWindow time.Duration `yaml:"moveAsideWindow"`
	// Insecure accepts plaintext etcd traffic, or TLS without client
	// certificates, on member addresses off this host: anyone who reaches
	// them reads every key. Warned about on every start and in status.
	Insecure bool `yaml:"insecure,omitempty"`
	// AllowInsecureExtraArgs names flags that weaken etcd's security
	// (InsecureEtcdFlags) that etcd.extraArgs may set nonetheless.
	AllowInsecureExtraArgs []string `yaml:"allowInsecureExtraArgs,omitempty"`
}

// EtcdTLS holds the certificates of the local member. When a section has a
// certFile, traffic of that kind uses https.
type EtcdTLS struct {
	Client TLSFiles `yaml:"client,omitempty"`
	Peer   TLSFiles `yaml:"peer,omitempty"`
}

// TLSFiles names PEM files. CAFile is the CA that verifies the other side;
// on a server it also switches on client certificate authentication.
type TLSFiles struct {
	CertFile string `yaml:"certFile,omitempty"`
	KeyFile  string `yaml:"keyFile,omitempty"`
	CAFile   string `yaml:"caFile,omitempty"`
}

// Enabled reports whether the section configures TLS at all.
func (f TLSFiles) Enabled() bool { return f.CertFile != "" || f.KeyFile != "" || f.CAFile != "" }

// Agent configures etcdlet itself.
type Agent struct {
	StateDir string `yaml:"stateDir"`
	// Listen is the address of the agent's HTTP listener (/metrics,
	// /healthz, /readyz, /pacemaker, /tasks). Loopback only, unless
	// ListenTLS is set.
	Listen string `yaml:"listen"`
	// ListenTLS makes the agent listener serve https and require client
	// certificates signed by its caFile; needed for a non-loopback listen.
	ListenTLS TLSFiles `yaml:"listenTLS,omitempty"`
	// EtcdClientTLS is what etcdlet presents when it calls etcd. Defaults to
	// etcd.tls.client's certificate and key, trusting etcd.tls.client's CA.
	EtcdClientTLS TLSFiles `yaml:"etcdClientTLS,omitempty"`
	// PeerPort is the agent peer endpoint on the node address: other
	// agents ask it whether this node may bootstrap, and wake it when they
	// added it as a learner. TLS with etcd.tls.peer when that is set.
	PeerPort          int           `yaml:"peerPort"`
	ReconcileInterval time.Duration `yaml:"reconcileInterval"`
	// IdleInterval is the time between passes once the node is settled:
	// membership matches the list, every member a healthy voter, nothing
	// planned. Any event still triggers a pass at once.
	IdleInterval time.Duration `yaml:"idleInterval"`
	CallTimeout  time.Duration `yaml:"callTimeout"`
	LockTTL      time.Duration `yaml:"lockTTL"`
	// LearnerTimeout is how long a learner may stay unpromoted before the
	// writer removes it: it holds etcd's single learner slot meanwhile.
	LearnerTimeout time.Duration `yaml:"learnerTimeout"`
	// RemovalHoldDown is how long the member list must have held before a
	// healthy voter is removed: a list that flaps or is written in two
	// steps removes nobody. Dead members and joins never wait for it.
	RemovalHoldDown time.Duration `yaml:"removalHoldDown"`
	LogLevel        string        `yaml:"logLevel"`
	LogFormat       string        `yaml:"logFormat"`
}

// ClientScheme is the scheme of client URLs: https when the member has a
// client certificate.
func (e Etcd) ClientScheme() string { return scheme(e.TLS.Client.CertFile != "") }

// PeerScheme is the scheme of peer URLs: https when the member has a peer
// certificate.
func (e Etcd) PeerScheme() string { return scheme(e.TLS.Peer.CertFile != "") }

func scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}

// ClientTLS returns the TLS files etcdlet uses as an etcd client: the
// explicit agent.etcdClientTLS, else the member's own client certificate.
func (c *Config) ClientTLS() TLSFiles {
	if c.Agent.EtcdClientTLS.Enabled() {
		return c.Agent.EtcdClientTLS
	}
	return c.Etcd.TLS.Client
}

// LockSection bounds the writer's locked section (re-observe, plan, act):
// the lease's TTL less two call timeouts, room for the unlock and for a
// keep-alive that comes late. Validation keeps it at least a call timeout.
func (a Agent) LockSection() time.Duration { return a.LockTTL - 2*a.CallTimeout }

// BootstrapMode is how a new cluster may form on this node: never with
// members.source etcd-resource, whatever cluster.bootstrap says (the API
// server that serves the list runs on the cluster, so a cluster exists and
// a bootstrap could only found a second one); otherwise cluster.bootstrap,
// explicit when it is empty (a Config built in code rather than loaded).
func (c *Config) BootstrapMode() string {
	switch {
	case c.Members.Source == SourceEtcdResource:
		return BootstrapNever
	case c.Cluster.Bootstrap == "":
		return BootstrapExplicit
	}
	return c.Cluster.Bootstrap
}

// BootstrapToken is the initial-cluster-token for a new cluster.
func (c *Config) BootstrapToken() string {
	if c.Cluster.Token != "" {
		return c.Cluster.Token
	}
	return c.Cluster.Name
}

// applyDefaults fills every field the user left empty. A number (a port,
// a duration) gets its default only when the file leaves it out or null:
// explicit holds the paths the file sets, and an explicit 0 stays 0 for
// validation to reject, instead of silently becoming the default.
func (c *Config) applyDefaults(explicit map[string]bool) {
	if c.Members.Source == SourceEtcdResource {
		setDefault(&c.Cluster.Bootstrap, BootstrapNever)
	}
	setDefault(&c.Cluster.Bootstrap, BootstrapExplicit)
	setDefault(&c.Etcd.Runtime, RuntimeEmbedded)
	setDefault(&c.Etcd.DataDir, DefaultDataDir)
	setDefault(&c.Etcd.ListenMetricsURL, DefaultListenMetricsURL)
	setDefault(&c.Etcd.LogLevel, DefaultEtcdLogLevel)
	setUnlessExplicit(explicit, "etcd.clientPort", &c.Etcd.ClientPort, DefaultClientPort)
	setUnlessExplicit(explicit, "etcd.peerPort", &c.Etcd.PeerPort, DefaultPeerPort)
	setDefault(&c.Agent.StateDir, DefaultStateDir)
	setDefault(&c.Agent.Listen, DefaultAgentListen)
	setDefault(&c.Agent.LogLevel, DefaultLogLevel)
	setDefault(&c.Agent.LogFormat, DefaultLogFormat)
	setUnlessExplicit(explicit, "agent.reconcileInterval", &c.Agent.ReconcileInterval, DefaultReconcileInterval)
	setUnlessExplicit(explicit, "agent.idleInterval", &c.Agent.IdleInterval, max(DefaultIdleInterval, c.Agent.ReconcileInterval))
	setUnlessExplicit(explicit, "agent.callTimeout", &c.Agent.CallTimeout, DefaultCallTimeout)
	setUnlessExplicit(explicit, "agent.lockTTL", &c.Agent.LockTTL, DefaultLockTTL)
	setUnlessExplicit(explicit, "agent.peerPort", &c.Agent.PeerPort, DefaultAgentPeerPort)
	setUnlessExplicit(explicit, "agent.learnerTimeout", &c.Agent.LearnerTimeout, DefaultLearnerTimeout)
	setUnlessExplicit(explicit, "agent.removalHoldDown", &c.Agent.RemovalHoldDown, DefaultRemovalHoldDown)
	setUnlessExplicit(explicit, "etcd.moveAsideLimit", &c.Etcd.MoveAsideLimit, DefaultMoveAsideLimit)
	setUnlessExplicit(explicit, "etcd.moveAsideWindow", &c.Etcd.MoveAsideWindow, DefaultMoveAsideWindow)
	c.StaticPod.applyDefaults()
	setUnlessExplicit(explicit, "protection.interval", &c.Protection.Interval, DefaultProtectionInterval)
	c.Pacemaker.applyDefaults(explicit)
	c.Kubernetes.applyDefaults(explicit)
	c.applyBackupDefaults(explicit)
	c.applyCertificatesDefaults(explicit)
}

// setDefault sets a field the user left at its zero value.
func setDefault[T comparable](field *T, value T) {
	var zero T
	if *field == zero {
		*field = value
	}
}

// setUnlessExplicit sets a field at its zero value that the file does not
// set explicitly (path is the field's YAML path).
func setUnlessExplicit[T comparable](explicit map[string]bool, path string, field *T, value T) {
	if !explicit[path] {
		setDefault(field, value)
	}
}
