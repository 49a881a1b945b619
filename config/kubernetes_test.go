package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestKubernetesSection(t *testing.T) {
	const base = "cluster:\n  name: etcd-main\nmembers:\n  source: static\n  addresses: [192.0.2.1]\n"
	const resource = "cluster:\n  name: etcd-main\nmembers:\n  source: etcd-resource\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"druid reporting", base + "kubernetes:\n  kubeconfig: /etc/etcdlet/kubeconfig\n  etcd: {namespace: kube-system, name: etcd-main}\n", nil},
		{"etcd resource as the list", resource + "kubernetes:\n  kubeconfig: /etc/etcdlet/kubeconfig\n  etcd: {namespace: kube-system, name: etcd-main}\n", nil},
		{"etcd resource with a bootstrap that would found a second cluster", strings.Replace(resource, "name: etcd-main", "name: etcd-main\n  bootstrap: consent\n  founder: 192.0.2.1", 1) +
			"kubernetes:\n  kubeconfig: /k\n  etcd: {namespace: a, name: etcd-main}\n", []string{
			`cluster.bootstrap: "consent": must be never (or left out) with members.source etcd-resource: the API server that serves the list runs on the cluster, so the cluster exists, and a node that bootstrapped would found a second one`,
			`cluster.founder: "192.0.2.1": not used with members.source etcd-resource: such a node never founds a cluster, it joins the one that serves the list`,
		}},
		{"etcd resource with an explicit bootstrap", strings.Replace(resource, "name: etcd-main", "name: etcd-main\n  bootstrap: explicit", 1) +
			"kubernetes:\n  kubeconfig: /k\n  etcd: {namespace: a, name: etcd-main}\n", []string{
			`cluster.bootstrap: "explicit": must be never (or left out) with members.source etcd-resource: the API server that serves the list runs on the cluster, so the cluster exists, and a node that bootstrapped would found a second one`,
		}},
		{"etcd resource without the Etcd", resource, []string{
			`kubernetes.etcd: required with members.source etcd-resource: the namespace and name of the Etcd whose spec.externallyManagedMemberAddresses is the list`,
		}},
		{"etcd resource with a file", resource + "  file: /etc/etcdlet/members\nkubernetes:\n  kubeconfig: /k\n  etcd: {namespace: a, name: etcd-main}\n", []string{
			`members.file: "/etc/etcdlet/members": only used with members.source file (etcd-resource keeps its list in agent.stateDir)`,
		}},
		{"no kubeconfig", base + "kubernetes:\n  etcd: {namespace: kube-system, name: etcd-main}\n", []string{
			`kubernetes.kubeconfig: required with kubernetes.etcd, kubernetes.pacemakerCluster or kubernetes.events: the credentials etcdlet reports with (see docs/kubernetes.md)`,
		}},
		{"kubeconfig alone", base + "kubernetes:\n  kubeconfig: /k\n", []string{
			`kubernetes.kubeconfig: "/k": only used with kubernetes.etcd, kubernetes.pacemakerCluster or kubernetes.events`,
		}},
		{"bad names and limits", base + "kubernetes:\n  kubeconfig: k.conf\n  qps: 0\n  burst: 1000\n  callTimeout: 10ms\n  etcd: {namespace: Kube_System, name: etcd-main, heartbeatInterval: 500ms}\n", []string{
			`kubernetes.kubeconfig: "k.conf": must be an absolute path`,
			`kubernetes.qps: 0: must be above 0 and at most 100`,
			`kubernetes.burst: 1000: must be between 1 and 200`,
			`kubernetes.callTimeout: "10ms": must be between 1s and 5m`,
			`kubernetes.etcd.namespace: "Kube_System": must be a Kubernetes name: at most 63 lower-case letters, digits, '-', starting and ending with a letter or digit`,
			`kubernetes.etcd.heartbeatInterval: "500ms": must be between 1s and 5m when set (druid marks a member Unknown after its unknown threshold, 1m by default)`,
		}},
		{"etcd named unlike the cluster", base + "kubernetes:\n  kubeconfig: /k\n  etcd: {namespace: a, name: etcd-events}\n", []string{
			`kubernetes.etcd.name: "etcd-events": must equal cluster.name (etcd-main): etcd-druid names member etcd-events-<ip> after the Etcd, and etcdlet names it after cluster.name`,
		}},
		{"pacemaker status without pacemaker", base + "kubernetes:\n  kubeconfig: /k\n  pacemakerCluster: {refreshInterval: 10s, staleAfter: 15s}\n", []string{
			`kubernetes.pacemakerCluster: "set": needs pacemaker.enabled: true (the status is built from pacemaker's state)`,
			`pacemaker.interval: "15s": must be at most half of kubernetes.pacemakerCluster.staleAfter (15s): a status not refreshed by a poll for that long counts as stale`,
			`kubernetes.pacemakerCluster.staleAfter: "15s": must be at least twice refreshInterval (10s): a writer that is merely slow must not be taken over`,
		}},
		{"events object", base + "kubernetes:\n  kubeconfig: /k\n  events: {name: etcdlet}\n", []string{
			`kubernetes.events.apiVersion: required: the object's API version, e.g. v1`,
			`kubernetes.events.kind: required: the object's kind, e.g. ConfigMap`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := parseAndValidate(t, tc.yaml)
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

func TestKubernetesDefaults(t *testing.T) {
	cfg, err := Parse([]byte("cluster:\n  name: etcd-main\nmembers:\n  source: etcd-resource\nkubernetes:\n  kubeconfig: /k\n  etcd: {namespace: a, name: etcd-main}\n  pacemakerCluster: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	k := cfg.Kubernetes
	if k.QPS != DefaultKubernetesQPS || k.Burst != DefaultKubernetesBurst || k.CallTimeout != DefaultKubernetesCallTimeout {
		t.Errorf("client defaults: qps %v burst %d callTimeout %s", k.QPS, k.Burst, k.CallTimeout)
	}
	if p := k.PacemakerCluster; p.RefreshInterval != 30*time.Second || p.StaleAfter != 90*time.Second {
		t.Errorf("pacemakerCluster defaults: refresh %s, staleAfter %s; want 30s and 90s", p.RefreshInterval, p.StaleAfter)
	}
	if cfg.Cluster.Bootstrap != BootstrapNever || cfg.BootstrapMode() != BootstrapNever {
		t.Errorf("with members.source etcd-resource a node never bootstraps: cluster.bootstrap %q, mode %q", cfg.Cluster.Bootstrap, cfg.BootstrapMode())
	}
	if c := (Config{Members: Members{Source: SourceEtcdResource}, Cluster: Cluster{Bootstrap: BootstrapConsent}}); c.BootstrapMode() != BootstrapNever {
		t.Errorf("an unvalidated consent setting with members.source etcd-resource gives mode %q, want never", c.BootstrapMode())
	}
	if got, want := cfg.MembersFile(), "/var/lib/etcdlet/agent/etcd-resource-members"; got != want {
		t.Errorf("MembersFile() = %q, want %q (the kept copy of the Etcd's list)", got, want)
	}
}
