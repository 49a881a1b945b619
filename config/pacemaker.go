package config

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/etcdlet/etcdlet/config/trust"
)

// Defaults of the pacemaker section.
const (
	// DefaultPacemakerInterval is how often the agent polls pacemaker.
	DefaultPacemakerInterval = 15 * time.Second
	// The tools' paths as Debian (pacemaker-cli-utils, corosync) and RHEL
	// (pacemaker-cli, corosync) install them. etcdlet runs as root: a
	// program is never looked up in PATH.
	DefaultCrmMon          = "/usr/sbin/crm_mon"
	DefaultCibadmin        = "/usr/sbin/cibadmin"
	DefaultCorosyncCmapctl = "/usr/sbin/corosync-cmapctl"
	// DefaultCommandTimeout matches the OpenShift collector's per-command
	// limit; crm_mon normally answers in well under a second.
	DefaultCommandTimeout = 10 * time.Second
	// DefaultMaxOutputBytes matches the OpenShift collector's limit; a
	// 32-node, 2,000-resource crm_mon document is about 2 MiB.
	DefaultMaxOutputBytes = 10 << 20
	DefaultKubeletAgent   = "systemd:kubelet"
	DefaultEtcdAgent      = "ocf:heartbeat:podman-etcd"
	DefaultAPIVersion     = PacemakerAPIV1
	// DefaultExpectedNodes is Two Node OpenShift with Fencing.
	DefaultExpectedNodes = 2
)

// API versions of etcd.openshift.io's PacemakerCluster.
const (
	PacemakerAPIV1       = "v1"
	PacemakerAPIV1alpha1 = "v1alpha1"
)

// Pacemaker is the "pacemaker" section: whether and how etcdlet polls
// pacemaker and builds the OpenShift PacemakerCluster status.
type Pacemaker struct {
	// Enabled switches polling on in the agent.
	Enabled bool `yaml:"enabled"`
	// Interval is the time between polls.
	Interval time.Duration `yaml:"interval"`
	// CrmMon is the absolute path of crm_mon. The tools are never looked
	// up in PATH: whoever controls the agent's PATH would otherwise choose
	// what runs as root.
	CrmMon string `yaml:"crmMon"`
	// Cibadmin is the absolute path of cibadmin, which reads the CIB
	// configuration (fencing targets, node_ip_map).
	Cibadmin string `yaml:"cibadmin"`
	// CorosyncCmapctl is the absolute path of corosync-cmapctl, which
	// reads corosync's node list from the running daemon.
	CorosyncCmapctl string `yaml:"corosyncCmapctl"`
	// CorosyncConf, when set, is read for the node list instead of asking
	// the running corosync.
	CorosyncConf string `yaml:"corosyncConf,omitempty"`
	// CIBFile, when set, makes the collector work offline: crm_mon runs
	// with CIB_file=<file>, the CIB is read from the file instead of
	// cibadmin, and corosync-cmapctl is not asked (the file need not
	// describe this host's cluster).
	CIBFile string `yaml:"cibFile,omitempty"`
	// CommandTimeout bounds each command.
	CommandTimeout time.Duration `yaml:"commandTimeout"`
	// MaxOutputBytes bounds what is read from a command's output; a
	// command that writes more is killed.
	MaxOutputBytes int64 `yaml:"maxOutputBytes"`
	// KubeletAgent and EtcdAgent select the resources by agent,
	// "class:[provider:]type", with path.Match wildcards per part.
	KubeletAgent string `yaml:"kubeletAgent"`
	EtcdAgent    string `yaml:"etcdAgent"`
	// KubeletResources and EtcdResources, when set, select the resources
	// by id (primitive, clone, group or bundle id) instead of by agent.
	KubeletResources []string `yaml:"kubeletResources,omitempty"`
	EtcdResources    []string `yaml:"etcdResources,omitempty"`
	// APIVersion of etcd.openshift.io to build: "v1" or "v1alpha1".
	APIVersion string `yaml:"apiVersion"`
	// ExpectedNodes is the node count NodeCountAsExpected checks (1–5).
	ExpectedNodes int `yaml:"expectedNodes"`
}

// DefaultPacemaker returns the section's defaults (polling off), for
// commands that run without a configuration file.
func DefaultPacemaker() Pacemaker {
	p := Pacemaker{}
	p.applyDefaults(nil)
	return p
}

// applyDefaults fills every field left at its zero value, except numbers
// the file sets explicitly (paths in explicit; see Config.applyDefaults).
func (o *Pacemaker) applyDefaults(explicit map[string]bool) {
	setUnlessExplicit(explicit, "pacemaker.interval", &o.Interval, DefaultPacemakerInterval)
	setDefault(&o.CrmMon, DefaultCrmMon)
	setDefault(&o.Cibadmin, DefaultCibadmin)
	setDefault(&o.CorosyncCmapctl, DefaultCorosyncCmapctl)
	setDefault(&o.KubeletAgent, DefaultKubeletAgent)
	setDefault(&o.EtcdAgent, DefaultEtcdAgent)
	setDefault(&o.APIVersion, DefaultAPIVersion)
	setUnlessExplicit(explicit, "pacemaker.commandTimeout", &o.CommandTimeout, DefaultCommandTimeout)
	setUnlessExplicit(explicit, "pacemaker.maxOutputBytes", &o.MaxOutputBytes, DefaultMaxOutputBytes)
	setUnlessExplicit(explicit, "pacemaker.expectedNodes", &o.ExpectedNodes, DefaultExpectedNodes)
}

// Limits enforced by Validate.
const (
	minOutputBytes    = 64 << 10
	maxOutputBytes    = 1 << 30
	maxCommandTimeout = 10 * time.Minute
)

var (
	agentPattern      = regexp.MustCompile(`^([^:\s]+):(?:([^:\s]+):)?([^:\s]+)$`)
	resourceIDPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]*$`)
)

// Validate checks the section on its own (an Errors list, nil when valid),
// for callers that build it without a configuration file.
func (o Pacemaker) Validate() error {
	var errs Errors
	o.validate(&errs)
	return errs.Err()
}

// program is a file of the section: its field (under pacemaker.), its
// path and, for a program, an example path.
type program struct{ field, path, example string }

// programs are the tools the collector runs, as root.
func (o Pacemaker) programs() []program {
	return []program{
		{"crmMon", o.CrmMon, DefaultCrmMon},
		{"cibadmin", o.Cibadmin, DefaultCibadmin},
		{"corosyncCmapctl", o.CorosyncCmapctl, DefaultCorosyncCmapctl},
	}
}

// CheckPrograms refuses, before any of them runs, a program of the
// section that someone other than root could change: etcdlet runs them as
// root, whether polling is enabled or not (etcdlet pacemaker status runs
// them too), so every collector checks them (CheckFiles does only with
// polling enabled). A program that does not exist is left to the run,
// which reports pacemaker's state unknown with the reason.
func (o Pacemaker) CheckPrograms() error {
	var errs Errors
	for _, p := range o.programs() {
		if err := trust.Check(p.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs.add("pacemaker."+p.field, p.path, "%s", untrusted(err))
		}
	}
	return errs.Err()
}

func (o Pacemaker) validate(errs *Errors) {
	add := func(field string, value any, rule string, args ...any) {
		errs.add("pacemaker."+field, value, rule, args...)
	}
	if o.Interval < time.Second {
		add("interval", o.Interval, "must be at least 1s")
	}
	for _, p := range o.programs() {
		switch {
		case !filepath.IsAbs(p.path):
			add(p.field, p.path, "must be an absolute path (a program run as root is never looked up in PATH), e.g. %s", p.example)
		case strings.ContainsAny(p.path, "\x00\n"):
			add(p.field, p.path, "must not contain a NUL or newline character")
		}
	}
	for _, p := range []struct{ field, value string }{{"corosyncConf", o.CorosyncConf}, {"cibFile", o.CIBFile}} {
		if p.value != "" && !filepath.IsAbs(p.value) {
			add(p.field, p.value, "must be an absolute path")
		}
	}
	if o.CommandTimeout <= 0 || o.CommandTimeout > maxCommandTimeout {
		add("commandTimeout", o.CommandTimeout, "must be greater than 0 and at most %s", maxCommandTimeout)
	}
	if o.MaxOutputBytes < minOutputBytes || o.MaxOutputBytes > maxOutputBytes {
		add("maxOutputBytes", o.MaxOutputBytes, "must be between %d and %d", minOutputBytes, maxOutputBytes)
	}
	for _, p := range []struct{ field, value string }{{"kubeletAgent", o.KubeletAgent}, {"etcdAgent", o.EtcdAgent}} {
		if rule := agentRule(p.value); rule != "" {
			add(p.field, p.value, "%s", rule)
		}
	}
	for _, p := range []struct {
		field string
		ids   []string
	}{{"kubeletResources", o.KubeletResources}, {"etcdResources", o.EtcdResources}} {
		for i, id := range p.ids {
			if !resourceIDPattern.MatchString(id) {
				add(fmt.Sprintf("%s[%d]", p.field, i), id, "must be a pacemaker resource id (a letter or _, then letters, digits, '.', '_' or '-')")
			}
		}
	}
	for i, id := range o.EtcdResources {
		if slices.Contains(o.KubeletResources, id) {
			add(fmt.Sprintf("etcdResources[%d]", i), id, "is also listed in kubeletResources")
		}
	}
	if len(o.KubeletResources) == 0 && len(o.EtcdResources) == 0 && strings.EqualFold(o.KubeletAgent, o.EtcdAgent) {
		add("etcdAgent", o.EtcdAgent, "is the same as kubeletAgent: set kubeletResources and etcdResources to tell the resources apart")
	}
	if o.APIVersion != PacemakerAPIV1 && o.APIVersion != PacemakerAPIV1alpha1 {
		add("apiVersion", o.APIVersion, "must be %s or %s", PacemakerAPIV1, PacemakerAPIV1alpha1)
	}
	if o.ExpectedNodes < 1 || o.ExpectedNodes > 5 {
		add("expectedNodes", o.ExpectedNodes, "must be between 1 and 5 (the API carries at most 5 nodes)")
	}
}

// agentRule returns what is wrong with a resource-agent pattern, or "".
func agentRule(s string) string {
	m := agentPattern.FindStringSubmatch(strings.ReplaceAll(s, "::", ":"))
	if m == nil {
		return "must be <class>:[<provider>:]<type>"
	}
	class, provider := strings.ToLower(m[1]), m[2]
	for _, part := range m[1:] {
		if _, err := path.Match(part, ""); err != nil {
			return "has an invalid wildcard pattern: " + err.Error()
		}
	}
	switch {
	case class == "stonith":
		return "must not select fencing devices (class stonith)"
	case class == "ocf" && provider == "":
		return "must be ocf:<provider>:<type> for class ocf"
	case class != "ocf" && class != "*" && provider != "":
		return "must be <class>:<type> (only class ocf has a provider)"
	}
	return ""
}
