package config

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

var (
	dns1123Label    = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	flagNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)
	logLevels       = []string{"debug", "info", "warn", "error"}
)

// ownedEtcdFlags are the etcd flags etcdlet sets itself. Setting one in
// etcd.extraArgs is a validation error, never a silent override: each maps
// to the config field (or the mechanism) that controls it.
var ownedEtcdFlags = map[string]string{
	"name":                        "derived from cluster.name and the node address",
	"data-dir":                    "set etcd.dataDir",
	"wal-dir":                     "etcdlet moves the data dir aside as one unit; a separate WAL dir would be left behind",
	"initial-cluster":             "derived from the member list",
	"initial-cluster-state":       "decided by etcdlet's membership engine",
	"initial-cluster-token":       "set cluster.token",
	"initial-advertise-peer-urls": "derived from the node address and etcd.peerPort",
	"advertise-client-urls":       "derived from the node address and etcd.clientPort",
	"listen-peer-urls":            "derived from the node address and etcd.peerPort",
	"listen-client-urls":          "derived from the node address and etcd.clientPort",
	"listen-client-http-urls":     "etcdlet owns the client listeners",
	"listen-metrics-urls":         "set etcd.listenMetricsURL",
	"cert-file":                   "set etcd.tls.client.certFile",
	"key-file":                    "set etcd.tls.client.keyFile",
	"trusted-ca-file":             "set etcd.tls.client.caFile",
	"client-cert-auth":            "switched on by etcd.tls.client.caFile",
	"auto-tls":                    "set etcd.tls.client",
	"peer-cert-file":              "set etcd.tls.peer.certFile",
	"peer-key-file":               "set etcd.tls.peer.keyFile",
	"peer-trusted-ca-file":        "set etcd.tls.peer.caFile",
	"peer-client-cert-auth":       "switched on by etcd.tls.peer.caFile",
	"peer-auto-tls":               "set etcd.tls.peer",
	"force-new-cluster":           "it discards the membership etcdlet manages; recover by hand, never through etcdlet",
	"discovery":                   "membership comes from the member list",
	"discovery-srv":               "membership comes from the member list",
	"discovery-srv-name":          "membership comes from the member list",
	"discovery-proxy":             "membership comes from the member list",
	"logger":                      "etcdlet routes etcd's log into its own",
	"log-outputs":                 "etcdlet routes etcd's log into its own",
	"log-level":                   "set etcd.logLevel",
}

// OwnedEtcdFlag reports whether etcdlet sets the etcd flag itself, and
// which config field controls it.
func OwnedEtcdFlag(name string) (how string, owned bool) {
	how, owned = ownedEtcdFlags[name]
	return how, owned
}

// ExtraArgRule returns the rule an etcd.extraArgs name breaks, or "" when
// it may be set. It rejects what is not a flag name, the flags etcdlet sets
// itself, and flags that would take over what etcdlet sets. Values are
// checked by package etcdflags, which skips the names this rejects.
func ExtraArgRule(name string) string {
	switch how, owned := ownedEtcdFlags[name]; {
	case owned:
		return fmt.Sprintf("etcdlet sets --%s itself: %s", name, how)
	case name == "strict-reconfig-check":
		return "must not be set: it must stay on, so that etcd itself refuses a membership change that would leave too few connected members, the last line of defence behind etcdlet's own checks"
	case name == "config-file":
		return "must not be set: etcd ignores every other flag when --config-file is set, so it would override everything etcdlet sets"
	case strings.HasPrefix(name, "discovery-"):
		return fmt.Sprintf("must not be set: --%s configures etcd's discovery, and membership comes from the member list", name)
	case !flagNamePattern.MatchString(name):
		return "must be an etcd flag name without leading dashes, e.g. snapshot-count"
	}
	return ""
}

// Validate checks every field and returns an Errors list (nil when valid).
// It does not read the members file; ReadDesired does.
func (c *Config) Validate() error {
	var errs Errors
	c.validateCluster(&errs)
	c.validateMembers(&errs)
	c.validateNode(&errs)
	c.validateEtcd(&errs)
	c.validateStaticPod(&errs)
	c.Protection.validate(&errs)
	c.validateAgent(&errs)
	c.checkListeners(&errs)
	c.validateSecurity(&errs)
	c.Pacemaker.validate(&errs)
	c.validateKubernetes(&errs)
	c.validateBackup(&errs)
	c.validateCertificates(&errs)
	return errs.Err()
}

func (c *Config) validateCluster(errs *Errors) {
	switch name := c.Cluster.Name; {
	case name == "":
		errs.add("cluster.name", nil, "required: the member name prefix, e.g. etcd-main")
	case len(name) > 63 || !dns1123Label.MatchString(name):
		errs.add("cluster.name", name, "must be at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit")
	}
	if r := c.Cluster.Replicas; r != nil && (*r < 1 || *r > MaxMembers) {
		errs.add("cluster.replicas", *r, "must be between 1 and %d when set (etcd recommends at most 7 members)", MaxMembers)
	}
	if t := c.Cluster.Token; t != "" && strings.ContainsAny(t, " \t\n,=") {
		errs.add("cluster.token", t, "must not contain spaces, ',' or '='")
	}
	c.validateBootstrap(errs)
}

// validateBootstrap checks cluster.bootstrap and cluster.founder against
// each other and against the list's source: a setting the agent would not
// follow is an error, never silently ignored.
func (c *Config) validateBootstrap(errs *Errors) {
	b := c.Cluster.Bootstrap
	switch {
	case b != BootstrapExplicit && b != BootstrapConsent && b != BootstrapNever:
		errs.add("cluster.bootstrap", b, "must be %s, %s or %s", BootstrapExplicit, BootstrapConsent, BootstrapNever)
	case c.Members.Source == SourceEtcdResource && b != BootstrapNever:
		errs.add("cluster.bootstrap", b, "must be %s (or left out) with members.source %s: the API server that serves the list runs on the cluster, so the cluster exists, and a node that bootstrapped would found a second one",
			BootstrapNever, SourceEtcdResource)
	case c.Members.Source == SourceCluster && b == BootstrapConsent:
		errs.add("cluster.bootstrap", b, "must be %s or %s with members.source %s: the list lives in the cluster, so before there is one no list names the nodes that would consent; 'etcdlet bootstrap --approve' on the first host founds it",
			BootstrapExplicit, BootstrapNever, SourceCluster)
	}
	f := c.Cluster.Founder
	if f == "" {
		return
	}
	// Not checked against the list: lists change over a cluster's life, and
	// a founder the list no longer names founds nothing.
	switch _, ok := checkAddress(errs, AddressEntry{Where: "cluster.founder", Text: f}); {
	case !ok:
	case c.Members.Source == SourceEtcdResource:
		errs.add("cluster.founder", f, "not used with members.source %s: such a node never founds a cluster, it joins the one that serves the list", SourceEtcdResource)
	case c.Members.Source == SourceCluster:
		errs.add("cluster.founder", f, "not used with members.source %s: the first host founds the cluster with 'etcdlet bootstrap --approve', which also writes its first list", SourceCluster)
	case b != BootstrapExplicit:
		errs.add("cluster.founder", f, "only used with cluster.bootstrap %s (it is %s): it names the node that founds the cluster on its first start", BootstrapExplicit, b)
	}
}

func (c *Config) validateMembers(errs *Errors) {
	m := c.Members
	if m.Source != SourceCluster && len(m.Seeds) > 0 {
		errs.add("members.seeds", strings.Join(m.Seeds, ","), "only used with members.source %s", SourceCluster)
	}
	switch m.Source {
	case SourceStatic:
		if len(m.Addresses) == 0 {
			errs.add("members.addresses", nil, "required with members.source static: list at least one member IP")
		}
		if m.File != "" {
			errs.add("members.file", m.File, "only used with members.source file")
		}
		_, listErrs := ValidateAddressList("members.addresses", StaticEntries(m.Addresses), c.Cluster.Replicas)
		*errs = append(*errs, listErrs...)
	case SourceFile:
		if len(m.Addresses) > 0 {
			errs.add("members.addresses", strings.Join(m.Addresses, ","), "only used with members.source static")
		}
		requireAbsPath(errs, "members.file", m.File)
	case SourceEtcdResource, SourceCluster:
		if len(m.Addresses) > 0 {
			errs.add("members.addresses", strings.Join(m.Addresses, ","), "only used with members.source static")
		}
		if m.File != "" {
			errs.add("members.file", m.File, "only used with members.source file (%s keeps its list in agent.stateDir)", m.Source)
		}
		if m.Source == SourceCluster {
			c.validateSeeds(errs)
		}
	case "":
		errs.add("members.source", nil, "required: %s", sourceNames)
	default:
		errs.add("members.source", m.Source, "must be %s", sourceNames)
	}
}

// validateSeeds checks members.seeds: member IPs, each once. They are
// not a member list (no replicas rule): only where to read one.
func (c *Config) validateSeeds(errs *Errors) {
	seen := map[netip.Addr]bool{}
	for i, s := range c.Members.Seeds {
		ip, ok := checkAddress(errs, AddressEntry{Where: fmt.Sprintf("members.seeds[%d]", i), Text: s})
		if ok && seen[ip] {
			errs.add(fmt.Sprintf("members.seeds[%d]", i), s, "listed twice")
		}
		seen[ip] = true
	}
}

func (c *Config) validateNode(errs *Errors) {
	if a := c.Node.Address; a != "" {
		checkAddress(errs, AddressEntry{Where: "node.address", Text: a})
	}
}

func (c *Config) validateEtcd(errs *Errors) {
	e := c.Etcd
	if e.Runtime != RuntimeEmbedded && e.Runtime != RuntimeStaticPod {
		errs.add("etcd.runtime", e.Runtime, "must be %s or %s", RuntimeEmbedded, RuntimeStaticPod)
	}
	requireAbsPath(errs, "etcd.dataDir", e.DataDir)
	checkPort(errs, "etcd.clientPort", e.ClientPort)
	checkPort(errs, "etcd.peerPort", e.PeerPort)
	if e.ClientPort == e.PeerPort && validPort(e.ClientPort) {
		errs.add("etcd.peerPort", e.PeerPort, "must differ from etcd.clientPort")
	}
	if u := checkListenURL(errs, "etcd.listenMetricsURL", e.ListenMetricsURL); u != nil && u.Scheme == "https" && e.TLS.Client.CertFile == "" {
		errs.add("etcd.listenMetricsURL", e.ListenMetricsURL, "https needs etcd.tls.client: etcd serves https metrics with the client certificate")
	}
	checkTLSFiles(errs, "etcd.tls.client", e.TLS.Client)
	checkTLSFiles(errs, "etcd.tls.peer", e.TLS.Peer)
	for _, name := range slices.Sorted(maps.Keys(e.ExtraArgs)) {
		if rule := ExtraArgRule(name); rule != "" {
			errs.add("etcd.extraArgs."+name, e.ExtraArgs[name], "%s", rule)
		}
	}
	if !slices.Contains(logLevels, e.LogLevel) {
		errs.add("etcd.logLevel", e.LogLevel, "must be one of %s", strings.Join(logLevels, ", "))
	}
	if e.MoveAsideLimit < 1 {
		errs.add("etcd.moveAsideLimit", e.MoveAsideLimit, "must be at least 1")
	}
	if e.MoveAsideWindow < time.Minute {
		errs.add("etcd.moveAsideWindow", e.MoveAsideWindow, "must be at least 1m")
	}
}

func (c *Config) validateAgent(errs *Errors) {
	a := c.Agent
	if requireAbsPath(errs, "agent.stateDir", a.StateDir) && filepath.IsAbs(c.Etcd.DataDir) {
		if nested(a.StateDir, c.Etcd.DataDir) || nested(c.Etcd.DataDir, a.StateDir) {
			errs.add("agent.stateDir", a.StateDir, "must not be inside etcd.dataDir (%s) or contain it: the data dir is moved aside as a unit", c.Etcd.DataDir)
		}
	}
	if host, port, err := net.SplitHostPort(a.Listen); err != nil {
		errs.add("agent.listen", a.Listen, "must be host:port, e.g. 127.0.0.1:9479")
	} else {
		if _, ok := listenHost(host); !ok {
			errs.add("agent.listen", a.Listen, "host must be an IP address or localhost")
		}
		if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			errs.add("agent.listen", a.Listen, "port must be between 0 and 65535")
		}
	}
	checkPort(errs, "agent.peerPort", a.PeerPort)
	if a.LearnerTimeout < 5*time.Second {
		errs.add("agent.learnerTimeout", a.LearnerTimeout, "must be at least 5s: a learner needs time to catch up")
	}
	if a.RemovalHoldDown < 0 || a.RemovalHoldDown > time.Minute {
		errs.add("agent.removalHoldDown", a.RemovalHoldDown, "must be between 0 and 1m")
	}
	checkTLSFiles(errs, "agent.etcdClientTLS", a.EtcdClientTLS)
	if a.ReconcileInterval < 100*time.Millisecond {
		errs.add("agent.reconcileInterval", a.ReconcileInterval, "must be at least 100ms")
	}
	if a.IdleInterval < a.ReconcileInterval || a.IdleInterval > 5*time.Minute {
		errs.add("agent.idleInterval", a.IdleInterval, "must be between agent.reconcileInterval (%s) and 5m", a.ReconcileInterval)
	}
	if a.LockTTL < 5*time.Second || a.LockTTL%time.Second != 0 {
		errs.add("agent.lockTTL", a.LockTTL, "must be whole seconds, at least 5s (an etcd lease TTL)")
	}
	if a.CallTimeout < 100*time.Millisecond || a.CallTimeout > time.Minute {
		errs.add("agent.callTimeout", a.CallTimeout, "must be between 100ms and 1m")
	} else if a.CallTimeout*3 > a.LockTTL {
		errs.add("agent.callTimeout", a.CallTimeout, "must be at most a third of agent.lockTTL (%s), so that the writer's locked section (lockTTL less two call timeouts) ends well before the lock can expire", a.LockTTL)
	}
	if !slices.Contains(logLevels, a.LogLevel) {
		errs.add("agent.logLevel", a.LogLevel, "must be one of %s", strings.Join(logLevels, ", "))
	}
	if !slices.Contains([]string{LogFormatAuto, LogFormatText, LogFormatJSON}, a.LogFormat) {
		errs.add("agent.logFormat", a.LogFormat, "must be auto, text or json")
	}
}

func requireAbsPath(errs *Errors, path, value string) bool {
	switch {
	case value == "":
		errs.add(path, nil, "required: an absolute path")
	case !filepath.IsAbs(value):
		errs.add(path, value, "must be an absolute path")
	case filepath.Clean(value) == "/":
		errs.add(path, value, "must not be the root directory")
	default:
		return true
	}
	return false
}

func nested(parent, child string) bool {
	rel, err := filepath.Rel(filepath.Clean(parent), filepath.Clean(child))
	return err == nil && (rel == "." || (rel != ".." && !strings.HasPrefix(rel, "../")))
}

func checkPort(errs *Errors, path string, port int) {
	if !validPort(port) {
		errs.add(path, port, "must be between 1 and 65535")
	}
}

// checkListenURL checks a listener URL and returns it parsed, or nil when
// it breaks a rule.
func checkListenURL(errs *Errors, path, value string) *url.URL {
	u, err := url.Parse(value)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Port() == "" || (u.Path != "" && u.Path != "/") {
		errs.add(path, value, "must be an http or https URL with a host and a port and no path, e.g. %s", DefaultListenMetricsURL)
		return nil
	}
	valid := true
	if _, ok := listenHost(u.Hostname()); !ok {
		errs.add(path, value, "host must be an IP address or localhost")
		valid = false
	}
	if p, err := strconv.Atoi(u.Port()); err != nil || p < 1 || p > 65535 {
		errs.add(path, value, "port must be between 1 and 65535")
		valid = false
	}
	if !valid {
		return nil
	}
	return u
}

// listenHost is the address a listener on host binds: an IP, or
// 127.0.0.1 for localhost (Go listens on the first IPv4 address a name
// resolves to).
func listenHost(host string) (netip.Addr, bool) {
	if host == "localhost" {
		return netip.AddrFrom4([4]byte{127, 0, 0, 1}), true
	}
	addr, err := netip.ParseAddr(host)
	return addr.Unmap(), err == nil
}

func checkTLSFiles(errs *Errors, path string, f TLSFiles) {
	if !f.Enabled() {
		return
	}
	if f.CertFile == "" || f.KeyFile == "" {
		errs.add(path, nil, "certFile and keyFile must be set together")
	}
	for _, file := range []struct{ field, value string }{{"certFile", f.CertFile}, {"keyFile", f.KeyFile}, {"caFile", f.CAFile}} {
		if file.value != "" && !filepath.IsAbs(file.value) {
			errs.add(path+"."+file.field, file.value, "must be an absolute path")
		}
	}
}

// CheckFiles checks the files the configuration names on this host: the
// TLS certificates and keys can be read, secrets (keys, credentials) are
// readable by root only, every file that decides what etcdlet trusts or
// runs (the certificates, the pacemaker programs and inputs) can only have
// been written by root (package trust), and so can the directories etcdlet
// keeps what it acts on in (see checkDirs). It is separate from Validate
// so that a configuration can be checked on another machine than the node.
func (c *Config) CheckFiles() error {
	var errs Errors
	c.checkDirs(&errs)
	for _, section := range []struct {
		path  string
		files TLSFiles
	}{{"etcd.tls.client", c.Etcd.TLS.Client}, {"etcd.tls.peer", c.Etcd.TLS.Peer}, {"agent.etcdClientTLS", c.Agent.EtcdClientTLS}, {"agent.listenTLS", c.Agent.ListenTLS}} {
		for _, file := range []struct{ field, value string }{{"certFile", section.files.CertFile}, {"keyFile", section.files.KeyFile}, {"caFile", section.files.CAFile}} {
			if file.value == "" || !filepath.IsAbs(file.value) {
				continue // Validate reports a relative path
			}
			checkTrustedFile(&errs, section.path+"."+file.field, file.value, file.field == "keyFile")
		}
	}
	if k := c.Kubernetes.Kubeconfig; k != "" && filepath.IsAbs(k) {
		// Credentials: whoever can change them chooses which API server
		// etcdlet trusts, whoever can read them acts as the agent.
		checkTrustedFile(&errs, "kubernetes.kubeconfig", k, true)
	}
	c.checkBackupFiles(&errs)
	if p := c.Pacemaker; p.Enabled {
		files := append(p.programs(), program{field: "cibFile", path: p.CIBFile}, program{field: "corosyncConf", path: p.CorosyncConf})
		for _, file := range files {
			if file.path != "" && filepath.IsAbs(file.path) {
				checkTrustedFile(&errs, "pacemaker."+file.field, file.path, false)
			}
		}
	}
	return errs.Err()
}
