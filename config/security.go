package config

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
)

// MaxMembers is the most entries a member list may have. etcd recommends
// at most 7 voting members (every write waits for a majority, and more
// members make it slower, not safer); 9 leaves room for a replacement in
// flight. The cap also bounds what a runaway list can cost: each listed
// address is a connection the agent opens on every pass.
const MaxMembers = 9

// insecureEtcdFlags are etcd flags that weaken its security, with why.
// etcd.extraArgs may set one only when etcd.allowInsecureExtraArgs names
// it.
var insecureEtcdFlags = map[string]string{
	"enable-pprof":                      "it serves Go's profiler, with goroutine stacks and heap contents, to every client",
	"peer-skip-client-san-verification": "it lets any holder of a peer certificate from the CA join as a peer, whatever its address",
	"unsafe-no-fsync":                   "it acknowledges writes before they are on disk, so a power loss loses committed data",
	"tls-min-version":                   "it can admit TLS versions older than etcd's default TLS 1.2",
	"tls-max-version":                   "it can cap TLS below 1.3",
	"cipher-suites":                     "it replaces Go's vetted cipher suites, possibly with weak ones",
	"cors":                              "it lets web pages of other origins call etcd from a browser",
	"host-whitelist":                    "it is a browser-side DNS-rebinding defence; widening it exposes etcd to web pages",
}

// InsecureEtcdFlag reports whether an etcd flag weakens security, and why.
func InsecureEtcdFlag(name string) (why string, insecure bool) {
	why, insecure = insecureEtcdFlags[name]
	return why, insecure
}

// TransportSecured reports whether client and peer traffic both use TLS
// with a CA, so that every connection, either way, needs a certificate
// signed by it.
func (e Etcd) TransportSecured() bool {
	return complete(e.TLS.Client) && complete(e.TLS.Peer)
}

func complete(f TLSFiles) bool { return f.CertFile != "" && f.KeyFile != "" && f.CAFile != "" }

// PlaintextAllowed reports whether a member may use addr without TLS and
// client certificates: on a loopback address, or with etcd.insecure.
func (e Etcd) PlaintextAllowed(addr netip.Addr) bool {
	return e.TransportSecured() || e.Insecure || addr.IsLoopback()
}

// transportRule is the rule a member address off this host breaks when
// etcd traffic is not secured.
func (e Etcd) transportRule() string {
	var missing []string
	for _, s := range []struct {
		name  string
		files TLSFiles
	}{{"etcd.tls.client", e.TLS.Client}, {"etcd.tls.peer", e.TLS.Peer}} {
		if !complete(s.files) {
			missing = append(missing, s.name)
		}
	}
	return fmt.Sprintf("is not a loopback address, so etcd traffic on it needs TLS with client certificates: set %s with certFile, keyFile and caFile "+
		"(etcdlet certs issue creates them from an etcd CA), or set etcd.insecure: true to accept traffic that anyone on the network can read and write",
		strings.Join(missing, " and "))
}

// checkTransport refuses, among entries that are valid addresses, the
// first that would carry unsecured etcd traffic off this host. One error
// is enough: the fix is in etcd.tls, not in the list.
func (e Etcd) checkTransport(errs *Errors, entries []AddressEntry) {
	for _, entry := range entries {
		if addr, err := netip.ParseAddr(entry.Text); err == nil && !e.PlaintextAllowed(addr.Unmap()) {
			errs.add(entry.Where, entry.Text, "%s", e.transportRule())
			return
		}
	}
}

// validateSecurity applies the rules that keep etcd and the agent off the
// network unless they are authenticated there.
func (c *Config) validateSecurity(errs *Errors) {
	var known []AddressEntry
	if c.Node.Address != "" {
		known = append(known, AddressEntry{Where: "node.address", Text: c.Node.Address})
	}
	switch c.Members.Source {
	case SourceStatic:
		known = append(known, StaticEntries(c.Members.Addresses)...)
	case SourceCluster:
		// The list is read from the seeds: plaintext off loopback would
		// hand it to anyone on the path.
		for i, s := range c.Members.Seeds {
			known = append(known, AddressEntry{Where: fmt.Sprintf("members.seeds[%d]", i), Text: s})
		}
	}
	c.Etcd.checkTransport(errs, known)
	if c.Etcd.Insecure && c.Etcd.TransportSecured() {
		errs.add("etcd.insecure", true, "must not be set when etcd.tls.client and etcd.tls.peer are complete: it would have no effect, and would read as if traffic were plaintext")
	}

	if u := checkListenURL(&Errors{}, "etcd.listenMetricsURL", c.Etcd.ListenMetricsURL); u != nil {
		if addr, ok := listenHost(u.Hostname()); ok && !addr.IsLoopback() && (u.Scheme != "https" || c.Etcd.TLS.Client.CAFile == "") {
			errs.add("etcd.listenMetricsURL", c.Etcd.ListenMetricsURL,
				"must be on a loopback address, or https with etcd.tls.client.caFile set so that etcd asks scrapers for a client certificate: the metrics listener has no other authentication")
		}
	}

	if host, _, err := net.SplitHostPort(c.Agent.Listen); err == nil {
		if addr, ok := listenHost(host); ok && !addr.IsLoopback() && !complete(c.Agent.ListenTLS) {
			errs.add("agent.listen", c.Agent.Listen,
				"must be a loopback address unless agent.listenTLS sets certFile, keyFile and caFile (https with client certificates): /metrics and /pacemaker have no other authentication")
		}
	}
	checkTLSFiles(errs, "agent.listenTLS", c.Agent.ListenTLS)
	if f := c.Agent.ListenTLS; f.Enabled() && f.CAFile == "" {
		errs.add("agent.listenTLS.caFile", nil, "required with agent.listenTLS: the listener accepts only clients with a certificate signed by it")
	}

	for _, name := range slices.Sorted(maps.Keys(c.Etcd.ExtraArgs)) {
		if why, insecure := insecureEtcdFlags[name]; insecure && !slices.Contains(c.Etcd.AllowInsecureExtraArgs, name) {
			errs.add("etcd.extraArgs."+name, c.Etcd.ExtraArgs[name],
				"weakens etcd's security: %s; list it in etcd.allowInsecureExtraArgs to set it anyway", why)
		}
	}
	for i, name := range c.Etcd.AllowInsecureExtraArgs {
		if _, insecure := insecureEtcdFlags[name]; !insecure {
			errs.add(fmt.Sprintf("etcd.allowInsecureExtraArgs[%d]", i), name, "must be one of %s: only flags that weaken security need allowing",
				strings.Join(slices.Sorted(maps.Keys(insecureEtcdFlags)), ", "))
		}
	}
}

// SecurityWarnings are the settings that make this node less secure than
// etcdlet's defaults, for the log at every start and for status.
func (c *Config) SecurityWarnings() []string {
	var warnings []string
	if c.Etcd.Insecure {
		warnings = append(warnings, "etcd.insecure is set: etcd client and peer traffic off this host is not authenticated with client certificates "+
			"(and is plaintext without etcd.tls); anyone who reaches the member addresses can read and write every key, and a listed address joins without a certificate")
	}
	for _, name := range c.Etcd.AllowInsecureExtraArgs {
		if _, set := c.Etcd.ExtraArgs[name]; set {
			warnings = append(warnings, fmt.Sprintf("etcd.extraArgs sets --%s, allowed by etcd.allowInsecureExtraArgs: %s", name, insecureEtcdFlags[name]))
		}
	}
	return append(warnings, c.backupWarnings()...)
}
