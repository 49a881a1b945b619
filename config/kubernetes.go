package config

import (
	"path/filepath"
	"regexp"
	"time"
)

// Defaults of the kubernetes section.
const (
	// DefaultKubernetesQPS and DefaultKubernetesBurst bound the agent's rate
	// of API calls. At steady state it makes a few per minute; the limit
	// only matters when it catches up after an outage, when every agent of
	// the cluster calls at once.
	DefaultKubernetesQPS   = 5
	DefaultKubernetesBurst = 10
	// DefaultKubernetesCallTimeout bounds every API call.
	DefaultKubernetesCallTimeout = 10 * time.Second
	// DefaultPacemakerRefresh is how often the PacemakerCluster writer
	// rewrites an unchanged status, so that a stale one means the writer
	// is gone.
	DefaultPacemakerRefresh = 30 * time.Second
	// DefaultDruidHeartbeat is etcd-druid's default spec.etcd.heartbeatDuration.
	DefaultDruidHeartbeat = 10 * time.Second
)

// EtcdResourceMembersFile is where, under agent.stateDir, the agent keeps
// the last good list read from the Etcd resource (members.source
// etcd-resource), so that it keeps working while the API server is away.
const EtcdResourceMembersFile = "etcd-resource-members"

// Kubernetes is the "kubernetes" section: what etcdlet reports to the
// Kubernetes API and reads from it. Reporting is best-effort: the API
// server runs on this etcd cluster, and never blocks membership.
type Kubernetes struct {
	// Kubeconfig is the credentials file (docs/kubernetes.md discusses the
	// kubelet's and a dedicated one). Required when anything below is set.
	Kubeconfig string `yaml:"kubeconfig,omitempty"`
	// QPS and Burst limit the client's request rate.
	QPS   float32 `yaml:"qps"`
	Burst int     `yaml:"burst"`
	// CallTimeout bounds every API call.
	CallTimeout time.Duration `yaml:"callTimeout"`
	// Etcd names etcd-druid's Etcd resource of this cluster: the agent
	// renews this member's Lease, reads the Etcd's protection annotation,
	// and (members.source: etcd-resource) its member addresses.
	Etcd *EtcdResource `yaml:"etcd,omitempty"`
	// PacemakerCluster switches on writing OpenShift's PacemakerCluster
	// status (the version is pacemaker.apiVersion; needs pacemaker.enabled).
	PacemakerCluster *PacemakerClusterReport `yaml:"pacemakerCluster,omitempty"`
	// Events names the object Events are recorded on when there is no
	// Etcd resource (with kubernetes.etcd, Events go to the Etcd).
	Events *EventObject `yaml:"events,omitempty"`
}

// EtcdResource names an etcd-druid Etcd (druid.gardener.cloud/v1alpha1).
type EtcdResource struct {
	Namespace string `yaml:"namespace"`
	Name      string `yaml:"name"`
	// HeartbeatInterval is how often the member Lease is renewed. Empty:
	// the Etcd's spec.etcd.heartbeatDuration, else druid's default (10s).
	HeartbeatInterval time.Duration `yaml:"heartbeatInterval,omitempty"`
}

// PacemakerClusterReport tunes the PacemakerCluster status writer.
type PacemakerClusterReport struct {
	// RefreshInterval: an unchanged status is rewritten this often.
	RefreshInterval time.Duration `yaml:"refreshInterval"`
	// StaleAfter: a status not updated for this long is taken over by an
	// agent that is not on pacemaker's DC node. Default 3 × RefreshInterval.
	StaleAfter time.Duration `yaml:"staleAfter"`
	// NodeName is this host's pacemaker node name. Empty: the node whose
	// addresses include node.address, else the one named like the host.
	NodeName string `yaml:"nodeName,omitempty"`
}

// EventObject is the object Events are recorded on.
type EventObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Namespace  string `yaml:"namespace,omitempty"`
	Name       string `yaml:"name"`
}

// Enabled reports whether the agent talks to Kubernetes at all.
func (k Kubernetes) Enabled() bool {
	return k.Etcd != nil || k.PacemakerCluster != nil || k.Events != nil
}

// EtcdResourceMembers is the path of the persisted Etcd resource list.
func (c *Config) EtcdResourceMembers() string { return c.ListRules().EtcdResourceMembers() }

// EtcdResourceMembers is the path of the persisted Etcd resource list.
func (r ListRules) EtcdResourceMembers() string {
	return filepath.Join(r.StateDir, EtcdResourceMembersFile)
}

func (k *Kubernetes) applyDefaults(explicit map[string]bool) {
	setUnlessExplicit(explicit, "kubernetes.qps", &k.QPS, DefaultKubernetesQPS)
	setUnlessExplicit(explicit, "kubernetes.burst", &k.Burst, DefaultKubernetesBurst)
	setUnlessExplicit(explicit, "kubernetes.callTimeout", &k.CallTimeout, DefaultKubernetesCallTimeout)
	if p := k.PacemakerCluster; p != nil {
		setUnlessExplicit(explicit, "kubernetes.pacemakerCluster.refreshInterval", &p.RefreshInterval, DefaultPacemakerRefresh)
		setUnlessExplicit(explicit, "kubernetes.pacemakerCluster.staleAfter", &p.StaleAfter, 3*p.RefreshInterval)
	}
}

// dns1123Subdomain is Kubernetes' rule for object names (dns1123Label,
// the one for namespaces, is also cluster.name's).
var dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

func (c *Config) validateKubernetes(errs *Errors) {
	k := c.Kubernetes
	if c.Members.Source == SourceEtcdResource && k.Etcd == nil {
		errs.add("kubernetes.etcd", nil, "required with members.source etcd-resource: the namespace and name of the Etcd whose spec.externallyManagedMemberAddresses is the list")
	}
	if !k.Enabled() {
		if k.Kubeconfig != "" {
			errs.add("kubernetes.kubeconfig", k.Kubeconfig, "only used with kubernetes.etcd, kubernetes.pacemakerCluster or kubernetes.events")
		}
		return
	}
	if k.Kubeconfig == "" {
		errs.add("kubernetes.kubeconfig", nil, "required with kubernetes.etcd, kubernetes.pacemakerCluster or kubernetes.events: the credentials etcdlet reports with (see docs/kubernetes.md)")
	} else {
		requireAbsPath(errs, "kubernetes.kubeconfig", k.Kubeconfig)
	}
	if k.QPS <= 0 || k.QPS > 100 {
		errs.add("kubernetes.qps", k.QPS, "must be above 0 and at most 100")
	}
	if k.Burst < 1 || k.Burst > 200 {
		errs.add("kubernetes.burst", k.Burst, "must be between 1 and 200")
	}
	if k.CallTimeout < time.Second || k.CallTimeout > 5*time.Minute {
		errs.add("kubernetes.callTimeout", k.CallTimeout, "must be between 1s and 5m")
	}
	if e := k.Etcd; e != nil {
		checkName(errs, "kubernetes.etcd.namespace", e.Namespace, dns1123Label, 63)
		checkName(errs, "kubernetes.etcd.name", e.Name, dns1123Subdomain, 253)
		if e.HeartbeatInterval != 0 && (e.HeartbeatInterval < time.Second || e.HeartbeatInterval > 5*time.Minute) {
			errs.add("kubernetes.etcd.heartbeatInterval", e.HeartbeatInterval, "must be between 1s and 5m when set (druid marks a member Unknown after its unknown threshold, 1m by default)")
		}
		// etcdlet names members <cluster.name>-<ip>; druid names the lease
		// of a member <etcd>-<ip>. The two must agree, or druid watches
		// leases no agent renews. (A memberNamePrefix on the Etcd is
		// checked when the Etcd is read.)
		if e.Name != "" && c.Cluster.Name != "" && e.Name != c.Cluster.Name {
			errs.add("kubernetes.etcd.name", e.Name, "must equal cluster.name (%s): etcd-druid names member %s-<ip> after the Etcd, and etcdlet names it after cluster.name", c.Cluster.Name, e.Name)
		}
	}
	if p := k.PacemakerCluster; p != nil {
		if !c.Pacemaker.Enabled {
			errs.add("kubernetes.pacemakerCluster", "set", "needs pacemaker.enabled: true (the status is built from pacemaker's state)")
		}
		if p.RefreshInterval < time.Second || p.RefreshInterval > 10*time.Minute {
			errs.add("kubernetes.pacemakerCluster.refreshInterval", p.RefreshInterval, "must be between 1s and 10m")
		}
		if p.NodeName != "" {
			checkName(errs, "kubernetes.pacemakerCluster.nodeName", p.NodeName, dns1123Subdomain, 253)
		}
		if c.Pacemaker.Interval > p.StaleAfter/2 {
			errs.add("pacemaker.interval", c.Pacemaker.Interval, "must be at most half of kubernetes.pacemakerCluster.staleAfter (%s): a status not refreshed by a poll for that long counts as stale", p.StaleAfter)
		}
		if p.StaleAfter < 2*p.RefreshInterval {
			errs.add("kubernetes.pacemakerCluster.staleAfter", p.StaleAfter, "must be at least twice refreshInterval (%s): a writer that is merely slow must not be taken over", p.RefreshInterval)
		}
	}
	if o := k.Events; o != nil {
		if o.APIVersion == "" {
			errs.add("kubernetes.events.apiVersion", nil, "required: the object's API version, e.g. v1")
		}
		if o.Kind == "" {
			errs.add("kubernetes.events.kind", nil, "required: the object's kind, e.g. ConfigMap")
		}
		if o.Namespace != "" {
			checkName(errs, "kubernetes.events.namespace", o.Namespace, dns1123Label, 63)
		}
		checkName(errs, "kubernetes.events.name", o.Name, dns1123Subdomain, 253)
	}
}

func checkName(errs *Errors, path, value string, pattern *regexp.Regexp, max int) {
	switch {
	case value == "":
		errs.add(path, nil, "required")
	case len(value) > max || !pattern.MatchString(value):
		errs.add(path, value, "must be a Kubernetes name: at most %d lower-case letters, digits, '-'%s, starting and ending with a letter or digit", max, map[bool]string{true: "", false: " and '.'"}[pattern == dns1123Label])
	}
}
