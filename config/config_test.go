package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// base is a valid configuration; each case appends or replaces lines.
const base = `cluster:
  name: etcd-main
members:
  source: static
  addresses: [192.0.2.1, 192.0.2.2, 192.0.2.3]
`

// parseAndValidate returns the problems of a configuration. The cases of
// other rules run on a node whose etcd traffic is secured, as every real
// node's is: when the YAML configures no etcd TLS and does not opt out, it
// gets kubeadm's certificate paths. TestTransportSecurity tests that rule.
func parseAndValidate(t *testing.T, yaml string) []string {
	t.Helper()
	cfg, err := Parse([]byte(yaml))
	if err == nil {
		if e := &cfg.Etcd; !e.TLS.Client.Enabled() && !e.TLS.Peer.Enabled() && !e.Insecure {
			e.TLS.Client = TLSFiles{CertFile: "/etc/kubernetes/pki/etcd/server.crt", KeyFile: "/etc/kubernetes/pki/etcd/server.key", CAFile: "/etc/kubernetes/pki/etcd/ca.crt"}
			e.TLS.Peer = TLSFiles{CertFile: "/etc/kubernetes/pki/etcd/peer.crt", KeyFile: "/etc/kubernetes/pki/etcd/peer.key", CAFile: "/etc/kubernetes/pki/etcd/ca.crt"}
		}
		err = cfg.Validate()
	}
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

func TestValidationRules(t *testing.T) {
	dir := t.TempDir()
	cert := filepath.Join(dir, "server.crt")
	if err := os.WriteFile(cert, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		yaml string
		want []string // exact lines, in order
	}{
		{"valid with defaults", base, nil},
		{"empty file", "", []string{
			"cluster.name: required: the member name prefix, e.g. etcd-main",
			"members.source: required: static, file, etcd-resource or cluster",
		}},
		{"unknown field", base + "etcd:\n  datadir: /x\n", []string{
			"etcd.datadir: unknown field (line 7); known fields here: allowInsecureExtraArgs, clientPort, dataDir, dataDirMustBeMount, extraArgs, insecure, listenMetricsURL, logLevel, moveAsideLimit, moveAsideWindow, peerPort, runtime, tls",
		}},
		{"duplicate key", base + "cluster:\n  name: other\n", []string{
			"cluster: defined twice (lines 1 and 6)",
		}},
		{"wrong type", base + "etcd:\n  clientPort: two\n", []string{
			`etcd.clientPort: "two": must be a whole number (line 7)`,
		}},
		{"bad duration", base + "agent:\n  callTimeout: 5\n", []string{
			`agent.callTimeout: "5": must be a duration such as 500ms, 5s or 1m (line 7)`,
		}},
		{"cluster name", strings.Replace(base, "etcd-main", "Etcd_Main", 1), []string{
			`cluster.name: "Etcd_Main": must be at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit`,
		}},
		{"replicas below one", strings.Replace(base, "name: etcd-main", "name: etcd-main\n  replicas: 0", 1), []string{
			"cluster.replicas: 0: must be between 1 and 9 when set (etcd recommends at most 7 members)",
		}},
		{"replicas differ from list", strings.Replace(base, "name: etcd-main", "name: etcd-main\n  replicas: 5", 1), []string{
			`members.addresses: "3 entries": must have exactly cluster.replicas (5) entries`,
		}},
		{"token", base[:len("cluster:\n  name: etcd-main\n")] + "  token: a,b\n" + base[len("cluster:\n  name: etcd-main\n"):], []string{
			`cluster.token: "a,b": must not contain spaces, ',' or '='`,
		}},
		{"bootstrap modes", strings.Replace(base, "name: etcd-main", "name: etcd-main\n  bootstrap: automatic", 1), []string{
			`cluster.bootstrap: "automatic": must be explicit, consent or never`,
		}},
		{"consent", strings.Replace(base, "name: etcd-main", "name: etcd-main\n  bootstrap: consent", 1), nil},
		{"never", strings.Replace(base, "name: etcd-main", "name: etcd-main\n  bootstrap: never", 1), nil},
		{"a founder", strings.Replace(base, "name: etcd-main", "name: etcd-main\n  founder: 192.0.2.2", 1), nil},
		{"a founder the list does not name founds nothing, and is no error", strings.Replace(base, "name: etcd-main", "name: etcd-main\n  founder: 192.0.2.9", 1), nil},
		{"a founder that is no address", strings.Replace(base, "name: etcd-main", "name: etcd-main\n  founder: cp1", 1), []string{
			`cluster.founder: "cp1": must be an IPv4 or IPv6 address (unable to parse IP)`,
		}},
		{"a founder in consent mode", strings.Replace(base, "name: etcd-main", "name: etcd-main\n  bootstrap: consent\n  founder: 192.0.2.1", 1), []string{
			`cluster.founder: "192.0.2.1": only used with cluster.bootstrap explicit (it is consent): it names the node that founds the cluster on its first start`,
		}},
		{"address rules", strings.Replace(base, "[192.0.2.1, 192.0.2.2, 192.0.2.3]",
			"[192.0.2.1, 192.0.2.1, 2001:DB8::1, '::ffff:192.0.2.9', 10.0.0.256, 'fe80::1', 0.0.0.0, 224.0.0.1, 'fd00::1%eth0']", 1), []string{
			`members.addresses[1]: "192.0.2.1": duplicate of members.addresses[0]`,
			`members.addresses[2]: "2001:DB8::1": must be in canonical form: write 2001:db8::1`,
			`members.addresses[3]: "::ffff:192.0.2.9": IPv4-mapped IPv6 addresses are ambiguous: write 192.0.2.9`,
			`members.addresses[4]: "10.0.0.256": must be an IPv4 or IPv6 address (IPv4 field has value >255)`,
			`members.addresses[5]: "fe80::1": IPv6 link-local addresses need a zone, which etcd URLs cannot carry`,
			`members.addresses[6]: "0.0.0.0": must be a unicast address a member can listen on`,
			`members.addresses[7]: "224.0.0.1": must be a unicast address a member can listen on`,
			`members.addresses[8]: "fd00::1%eth0": must not carry an IPv6 zone`,
		}},
		{"static without addresses", "cluster:\n  name: etcd-main\nmembers:\n  source: static\n", []string{
			"members.addresses: required with members.source static: list at least one member IP",
		}},
		{"file source needs an absolute path", "cluster:\n  name: etcd-main\nmembers:\n  source: file\n  file: members\n", []string{
			`members.file: "members": must be an absolute path`,
		}},
		{"file source with addresses", "cluster:\n  name: etcd-main\nmembers:\n  source: file\n  file: /m\n  addresses: [192.0.2.1]\n", []string{
			`members.addresses: "192.0.2.1": only used with members.source static`,
		}},
		{"cluster source: seeds are member IPs, each once, and need TLS off loopback", "cluster:\n  name: etcd-main\n  bootstrap: consent\n  founder: 10.0.0.1\nmembers:\n  source: cluster\n  file: /m\n  seeds: [10.0.0.1, 10.0.0.01, \"fd00::2\", 10.0.0.1]\n", []string{
			`cluster.bootstrap: "consent": must be explicit or never with members.source cluster: the list lives in the cluster, so before there is one no list names the nodes that would consent; 'etcdlet bootstrap --approve' on the first host founds it`,
			`cluster.founder: "10.0.0.1": not used with members.source cluster: the first host founds the cluster with 'etcdlet bootstrap --approve', which also writes its first list`,
			`members.file: "/m": only used with members.source file (cluster keeps its list in agent.stateDir)`,
			`members.seeds[1]: "10.0.0.01": must be an IPv4 or IPv6 address (IPv4 field has octet with leading zero)`,
			`members.seeds[3]: "10.0.0.1": listed twice`,
		}},
		{"seeds with another source", "cluster:\n  name: etcd-main\nmembers:\n  source: static\n  addresses: [127.0.0.1]\n  seeds: [127.0.0.2]\n", []string{
			`members.seeds: "127.0.0.2": only used with members.source cluster`,
		}},
		{"unknown source", "cluster:\n  name: etcd-main\nmembers:\n  source: etcd-cr\n", []string{
			`members.source: "etcd-cr": must be static, file, etcd-resource or cluster`,
		}},
		{"node address", base + "node:\n  address: 192.0.2.01\n", []string{
			`node.address: "192.0.2.01": must be an IPv4 or IPv6 address (IPv4 field has octet with leading zero)`,
		}},
		{"etcd fields", base + "etcd:\n  runtime: docker\n  dataDir: var/lib/etcd\n  clientPort: 70000\n  peerPort: -5\n  listenMetricsURL: tcp://127.0.0.1\n  logLevel: loud\n", []string{
			`etcd.runtime: "docker": must be embedded or static-pod`,
			`etcd.dataDir: "var/lib/etcd": must be an absolute path`,
			"etcd.clientPort: 70000: must be between 1 and 65535",
			"etcd.peerPort: -5: must be between 1 and 65535",
			`etcd.listenMetricsURL: "tcp://127.0.0.1": must be an http or https URL with a host and a port and no path, e.g. http://127.0.0.1:2381`,
			`etcd.logLevel: "loud": must be one of debug, info, warn, error`,
		}},
		{"same ports", base + "etcd:\n  clientPort: 2380\n", []string{
			"etcd.peerPort: 2380: must differ from etcd.clientPort",
		}},
		{"metrics host", base + "etcd:\n  listenMetricsURL: http://metrics.local:2381\n", []string{
			`etcd.listenMetricsURL: "http://metrics.local:2381": host must be an IP address or localhost`,
		}},
		{"tls pairs and paths", base + "etcd:\n  tls:\n    client:\n      certFile: " + cert + "\n    peer:\n      caFile: pki/ca.crt\n", []string{
			"etcd.tls.client: certFile and keyFile must be set together",
			"etcd.tls.peer: certFile and keyFile must be set together",
			`etcd.tls.peer.caFile: "pki/ca.crt": must be an absolute path`,
			`members.addresses[0]: "192.0.2.1": ` + transportRule("etcd.tls.client and etcd.tls.peer"),
		}},
		{"extra args owned by etcdlet", base + "etcd:\n  extraArgs:\n    name: x\n    initial-cluster: a=b\n    --snapshot-count: '5'\n    snapshot-count: '10000'\n", []string{
			`etcd.extraArgs.--snapshot-count: "5": must be an etcd flag name without leading dashes, e.g. snapshot-count`,
			`etcd.extraArgs.initial-cluster: "a=b": etcdlet sets --initial-cluster itself: derived from the member list`,
			`etcd.extraArgs.name: "x": etcdlet sets --name itself: derived from cluster.name and the node address`,
		}},
		{"agent fields", base + "etcd:\n  dataDir: /var/lib/etcd\nagent:\n  stateDir: /var/lib/etcd/etcdlet\n  listen: 9479\n  reconcileInterval: 10ms\n  lockTTL: 5500ms\n  callTimeout: 2m\n  logLevel: trace\n  logFormat: xml\n", []string{
			`agent.stateDir: "/var/lib/etcd/etcdlet": must not be inside etcd.dataDir (/var/lib/etcd) or contain it: the data dir is moved aside as a unit`,
			`agent.listen: "9479": must be host:port, e.g. 127.0.0.1:9479`,
			`agent.reconcileInterval: "10ms": must be at least 100ms`,
			`agent.lockTTL: "5.5s": must be whole seconds, at least 5s (an etcd lease TTL)`,
			`agent.callTimeout: "2m0s": must be between 100ms and 1m`,
			`agent.logLevel: "trace": must be one of debug, info, warn, error`,
			`agent.logFormat: "xml": must be auto, text or json`,
		}},
		{"call timeout against lock TTL", base + "agent:\n  callTimeout: 6s\n  lockTTL: 15s\n", []string{
			`agent.callTimeout: "6s": must be at most a third of agent.lockTTL (15s), so that the writer's locked section (lockTTL less two call timeouts) ends well before the lock can expire`,
		}},
		{"static pod fields", strings.Replace(base, "source: static", "source: static", 1) + "etcd:\n  runtime: static-pod\n  dataDir: /etc/kubernetes/manifests/data\nstaticPod:\n  image: 'etcd 3.7'\n  imagePullPolicy: Sometimes\n  command: ' '\n  cpuRequest: lots\n  memoryRequest: -1Gi\n", []string{
			`staticPod.manifestDir: "/etc/kubernetes/manifests": must not contain etcd.dataDir or agent.stateDir: the kubelet reads every file in it`,
			`staticPod.image: "etcd 3.7": must be a container image reference, [host[:port]/]lower-case/path[:tag][@digest], e.g. registry.k8s.io/etcd:3.7.3-0`,
			`staticPod.imagePullPolicy: "Sometimes": must be Always, IfNotPresent or Never`,
			`staticPod.command: " ": must name the etcd executable in the image, not be blank`,
			`staticPod.cpuRequest: "lots": must be a Kubernetes quantity such as 100m or 100Mi`,
			`staticPod.memoryRequest: "-1Gi": must not be negative`,
		}},
		{"static pod defaults are valid", base + "etcd:\n  runtime: static-pod\n", nil},
		{"static pod fields are checked for the embedded runtime too", base + "staticPod:\n  imagePullPolicy: Sometimes\n", []string{
			`staticPod.imagePullPolicy: "Sometimes": must be Always, IfNotPresent or Never`,
		}},
		{"manifest dir inside the data dir", base + "etcd:\n  runtime: static-pod\n  dataDir: /var/lib/etcd\nstaticPod:\n  manifestDir: /var/lib/etcd/manifests\n", []string{
			`staticPod.manifestDir: "/var/lib/etcd/manifests": must not be inside etcd.dataDir (/var/lib/etcd): the data dir is moved aside as a unit, and the kubelet's manifests would go with it`,
		}},
		{"manifest dir is the data dir", base + "etcd:\n  runtime: static-pod\n  dataDir: /var/lib/etcd\nstaticPod:\n  manifestDir: /var/lib/etcd/\n", []string{
			`staticPod.manifestDir: "/var/lib/etcd/": must not contain etcd.dataDir or agent.stateDir: the kubelet reads every file in it`,
		}},
		{"zero resource requests", base + "staticPod:\n  cpuRequest: '0'\n  memoryRequest: '0'\n", nil},
		{"protection interval", base + "protection:\n  enabled: false\n  interval: 10ms\n", []string{
			`protection.interval: "10ms": must be at least 1s`,
		}},
		{"agent listen host", base + "agent:\n  listen: example.com:9479\n", []string{
			`agent.listen: "example.com:9479": host must be an IP address or localhost`,
		}},
		{"metrics https needs client TLS", base + "etcd:\n  insecure: true\n  listenMetricsURL: https://127.0.0.1:2381\n", []string{
			`etcd.listenMetricsURL: "https://127.0.0.1:2381": https needs etcd.tls.client: etcd serves https metrics with the client certificate`,
		}},
		{"metrics https with client TLS", base + "etcd:\n  insecure: true\n  listenMetricsURL: https://127.0.0.1:2381\n  tls:\n    client:\n      certFile: /pki/server.crt\n      keyFile: /pki/server.key\n", nil},
		{"metrics https with peer TLS only", base + "etcd:\n  insecure: true\n  listenMetricsURL: https://127.0.0.1:2381\n  tls:\n    peer:\n      certFile: /pki/peer.crt\n      keyFile: /pki/peer.key\n", []string{
			`etcd.listenMetricsURL: "https://127.0.0.1:2381": https needs etcd.tls.client: etcd serves https metrics with the client certificate`,
		}},
		{"metrics port out of range", base + "etcd:\n  listenMetricsURL: http://127.0.0.1:99999\n", []string{
			`etcd.listenMetricsURL: "http://127.0.0.1:99999": port must be between 1 and 65535`,
		}},
		{"metrics port zero", base + "etcd:\n  listenMetricsURL: http://127.0.0.1:0\n", []string{
			`etcd.listenMetricsURL: "http://127.0.0.1:0": port must be between 1 and 65535`,
		}},
		{"metrics on the client loopback listener", base + "etcd:\n  listenMetricsURL: http://127.0.0.1:2379\n", []string{
			`etcd.listenMetricsURL: "http://127.0.0.1:2379": must not overlap the etcd client listener 127.0.0.1:2379: no two listeners may use the same port on the same address or a wildcard one`,
		}},
		{"metrics on the member IP client listener", base + "node:\n  address: 192.0.2.2\netcd:\n  clientPort: 2381\n  listenMetricsURL: https://192.0.2.2:2381\n", []string{
			`etcd.listenMetricsURL: "https://192.0.2.2:2381": must not overlap the etcd client listener 192.0.2.2:2381: no two listeners may use the same port on the same address or a wildcard one`,
		}},
		{"metrics wildcard on the peer port", base + "etcd:\n  listenMetricsURL: https://0.0.0.0:2380\n", []string{
			`etcd.listenMetricsURL: "https://0.0.0.0:2380": must not overlap the etcd peer listener 192.0.2.1:2380: no two listeners may use the same port on the same address or a wildcard one`,
		}},
		{"IPv6 wildcard covers IPv4 members", base + "etcd:\n  listenMetricsURL: https://[::]:2379\n", []string{
			`etcd.listenMetricsURL: "https://[::]:2379": must not overlap the etcd client listener 192.0.2.1:2379: no two listeners may use the same port on the same address or a wildcard one`,
		}},
		{"IPv4 wildcard leaves IPv6 members alone", strings.Replace(base, "192.0.2.1, 192.0.2.2, 192.0.2.3", "2001:db8::1", 1) + "etcd:\n  listenMetricsURL: https://0.0.0.0:2380\n", nil},
		{"agent on the metrics listener", base + "agent:\n  listen: 127.0.0.1:2381\n", []string{
			`agent.listen: "127.0.0.1:2381": must not overlap the etcd metrics listener 127.0.0.1:2381: no two listeners may use the same port on the same address or a wildcard one`,
		}},
		{"agent on localhost and the client port", base + "agent:\n  listen: localhost:2379\n", []string{
			`agent.listen: "localhost:2379": must not overlap the etcd client listener 127.0.0.1:2379: no two listeners may use the same port on the same address or a wildcard one`,
		}},
		{"agent on the peer listener", base + "node:\n  address: 192.0.2.3\nagent:\n  listen: 192.0.2.3:2380\n", []string{
			`agent.listen: "192.0.2.3:2380": must not overlap the etcd peer listener 192.0.2.3:2380: no two listeners may use the same port on the same address or a wildcard one`,
			`agent.listen: "192.0.2.3:2380": ` + agentListenRule,
		}},
		{"agent wildcard on the metrics port", base + "agent:\n  listen: '[::]:2381'\n", []string{
			`agent.listen: "[::]:2381": must not overlap the etcd metrics listener 127.0.0.1:2381: no two listeners may use the same port on the same address or a wildcard one`,
			`agent.listen: "[::]:2381": ` + agentListenRule,
		}},
		{"unknown member IP under a wildcard", "cluster:\n  name: etcd-main\nmembers:\n  source: file\n  file: /m\netcd:\n  listenMetricsURL: https://[::]:2380\n", []string{
			`etcd.listenMetricsURL: "https://[::]:2380": must not overlap the etcd peer listener <member IP>:2380: no two listeners may use the same port on the same address or a wildcard one`,
		}},
		{"a loopback member listens for clients on its own IP only", "cluster:\n  name: etcd-main\nmembers:\n  source: static\n  addresses: [127.0.0.2, 127.0.0.3]\nnode:\n  address: 127.0.0.2\netcd:\n  listenMetricsURL: http://127.0.0.1:2379\nagent:\n  listen: 127.0.0.3:2380\n", nil},
		{"agent port 0 never overlaps", base + "agent:\n  listen: 127.0.0.1:0\n", nil},
		{"agent peer endpoint on the etcd peer port", base + "node:\n  address: 192.0.2.3\nagent:\n  peerPort: 2380\n", []string{
			`agent.peerPort: 2380: must not overlap the etcd peer listener 192.0.2.3:2380: no two listeners may use the same port on the same address or a wildcard one`,
		}},
		{"metrics wildcard on the agent peer port", base + "etcd:\n  listenMetricsURL: https://0.0.0.0:2382\n", []string{
			`agent.peerPort: 2382: must not overlap the etcd metrics listener 0.0.0.0:2382: no two listeners may use the same port on the same address or a wildcard one`,
		}},
		{"idle interval below the reconcile interval", base + "agent:\n  reconcileInterval: 10s\n  idleInterval: 5s\n", []string{
			`agent.idleInterval: "5s": must be between agent.reconcileInterval (10s) and 5m`,
		}},
		{"idle interval too long", base + "agent:\n  idleInterval: 6m\n", []string{
			`agent.idleInterval: "6m0s": must be between agent.reconcileInterval (5s) and 5m`,
		}},
		{"a long reconcile interval moves the idle default along", base + "agent:\n  reconcileInterval: 1m\n", nil},
		{"learner timeout too short", base + "agent:\n  learnerTimeout: 1s\n", []string{
			`agent.learnerTimeout: "1s": must be at least 5s: a learner needs time to catch up`,
		}},
		{"move-aside limit and window", base + "etcd:\n  moveAsideLimit: 0\n  moveAsideWindow: 10s\n", []string{
			`etcd.moveAsideLimit: 0: must be at least 1`,
			`etcd.moveAsideWindow: "10s": must be at least 1m`,
		}},
		{"explicit zero ports", base + "etcd:\n  clientPort: 0\n  peerPort: 0\n", []string{
			"etcd.clientPort: 0: must be between 1 and 65535",
			"etcd.peerPort: 0: must be between 1 and 65535",
		}},
		{"explicit zero durations and counts", base + "protection:\n  interval: 0s\nagent:\n  reconcileInterval: 0s\n  callTimeout: 0s\n  lockTTL: 0s\npacemaker:\n  interval: 0s\n  commandTimeout: 0s\n  maxOutputBytes: 0\n  expectedNodes: 0\n", []string{
			`protection.interval: "0s": must be at least 1s`,
			`agent.reconcileInterval: "0s": must be at least 100ms`,
			`agent.lockTTL: "0s": must be whole seconds, at least 5s (an etcd lease TTL)`,
			`agent.callTimeout: "0s": must be between 100ms and 1m`,
			`pacemaker.interval: "0s": must be at least 1s`,
			`pacemaker.commandTimeout: "0s": must be greater than 0 and at most 10m0s`,
			"pacemaker.maxOutputBytes: 0: must be between 65536 and 1073741824",
			"pacemaker.expectedNodes: 0: must be between 1 and 5 (the API carries at most 5 nodes)",
		}},
		{"null means the default", base + "etcd:\n  clientPort: null\n  peerPort: ~\nagent:\n  callTimeout:\n", nil},
		{"float for a whole number", base + "etcd:\n  clientPort: 2379.0\n", []string{
			`etcd.clientPort: "2379.0": must be a whole number (line 7)`,
		}},
		{"quoted whole number", strings.Replace(base, "name: etcd-main", "name: etcd-main\n  replicas: '3'", 1), []string{
			`cluster.replicas: "3": must be an unquoted whole number, not a quoted string (line 3)`,
		}},
		{"quoted boolean", base + "protection:\n  enabled: 'false'\n", []string{
			`protection.enabled: "false": must be an unquoted true or false, not a quoted string (line 7)`,
		}},
		{"YAML 1.1 booleans", base + "protection:\n  enabled: no\npacemaker:\n  enabled: On\n", []string{
			`protection.enabled: "no": must be true or false; yes, no, on and off are strings in YAML 1.2 (line 7)`,
			`pacemaker.enabled: "On": must be true or false; yes, no, on and off are strings in YAML 1.2 (line 9)`,
		}},
		{"not a boolean", base + "protection:\n  enabled: 1\n", []string{
			`protection.enabled: "1": must be true or false (line 7)`,
		}},
		{"extra args that take etcd over", base + "etcd:\n  runtime: static-pod\n  extraArgs:\n    config-file: /etc/etcd/etcd.conf.yml\n    discovery-endpoints: http://192.0.2.9:2379\n    wal-dir: /var/lib/etcd-wal\n", []string{
			`etcd.extraArgs.config-file: "/etc/etcd/etcd.conf.yml": must not be set: etcd ignores every other flag when --config-file is set, so it would override everything etcdlet sets`,
			`etcd.extraArgs.discovery-endpoints: "http://192.0.2.9:2379": must not be set: --discovery-endpoints configures etcd's discovery, and membership comes from the member list`,
			`etcd.extraArgs.wal-dir: "/var/lib/etcd-wal": etcdlet sets --wal-dir itself: etcdlet moves the data dir aside as one unit; a separate WAL dir would be left behind`,
		}},
		{"certificate renewal without TLS", base + "etcd:\n  insecure: true\ncertificates:\n  autoRenew: true\n", []string{
			"certificates.autoRenew: true: needs etcd.tls.client and etcd.tls.peer: without TLS there is no certificate to renew",
		}},
		{"certificate renewal outside kubeadm's layout", base + "etcd:\n  tls:\n    client: {certFile: /pki/etcd.pem, keyFile: /pki/etcd-key.pem, caFile: /pki/ca.pem}\n" +
			"    peer: {certFile: /pki/etcd.pem, keyFile: /pki/etcd-key.pem, caFile: /pki/ca.pem}\ncertificates:\n  autoRenew: true\n", []string{
			"certificates.autoRenew: true: renews kubeadm's layout, server.crt and peer.crt in one directory (as etcdlet certs issue writes them); etcd.tls.client.certFile is /pki/etcd.pem, etcd.tls.peer.certFile /pki/etcd.pem",
		}},
		{"a renewal that would be due again at once", base + "certificates:\n  renewBefore: 8760h\n  validity: 8761h\n", []string{
			`certificates.validity: "8761h0m0s": must exceed certificates.renewBefore (8760h0m0s) by at least 24h0m0s: a renewed certificate must not be due again at once`,
		}},
		{"renewBefore out of range", base + "certificates:\n  renewBefore: 10m\n", []string{
			`certificates.renewBefore: "10m0s": must be between 1h0m0s and 17520h0m0s`,
		}},
		{"the strict reconfiguration check stays on", base + "etcd:\n  extraArgs:\n    strict-reconfig-check: \"false\"\n", []string{
			`etcd.extraArgs.strict-reconfig-check: "false": must not be set: it must stay on, so that etcd itself refuses a membership change that would leave too few connected members, the last line of defence behind etcdlet's own checks`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseAndValidate(t, tt.yaml)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
			}
		})
	}
}

func TestCheckFiles(t *testing.T) {
	dir := t.TempDir()
	cert := filepath.Join(dir, "server.crt")
	if err := os.WriteFile(cert, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		files TLSFiles
		want  string // the whole rendered error; empty: none
	}{
		{"missing key", TLSFiles{CertFile: cert, KeyFile: filepath.Join(dir, "server.key")},
			`etcd.tls.client.keyFile: "` + dir + `/server.key": cannot be read: open ` + dir + `/server.key: no such file or directory`},
		// Validate reports "must be an absolute path"; once is enough.
		{"relative paths are left to Validate", TLSFiles{CertFile: "server.crt", KeyFile: "server.key"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &Config{Etcd: Etcd{TLS: EtcdTLS{Client: tt.files}}}
			got := ""
			if err := cfg.CheckFiles(); err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("CheckFiles() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestImageReferences(t *testing.T) {
	const rule = "must be a container image reference, [host[:port]/]lower-case/path[:tag][@digest], e.g. registry.k8s.io/etcd:3.7.3-0"
	digest := "@sha256:" + strings.Repeat("a", 64)
	tests := []struct {
		image string
		valid bool
	}{
		{"registry.k8s.io/etcd:3.7.3-0", true},
		{"registry.k8s.io/etcd:v3.7.0-RC1", true},
		{"registry.example.com:5000/etcd:v3.7.0-RC1", true},
		{"etcd", true},
		{"quay.io/coreos/etcd" + digest, true},
		{"quay.io/coreos/etcd:v3.7.0" + digest, true},
		{"localhost:5000/team/etcd_server__x:latest", true},
		{"[2001:db8::1]:5000/etcd:3.7", true},
		{"registry.k8s.io/Etcd:3.7.0-0", false},
		{"registry.k8s.io/etcd:.3.7", false},
		{"registry.k8s.io/etcd:" + strings.Repeat("x", 129), false},
		{":3.7", false},
		{"etcd::::", false},
		{"etcd 3.7", false},
		{"registry.k8s.io/etcd:3.7.3-0 ", false},
		{"etcd@sha256:abc", false},
		{"registry.k8s.io//etcd", false},
	}
	for _, tt := range tests {
		t.Run(tt.image, func(t *testing.T) {
			got := parseAndValidate(t, base+"etcd:\n  runtime: static-pod\nstaticPod:\n  image: '"+tt.image+"'\n")
			var want []string
			if !tt.valid {
				want = []string{`staticPod.image: "` + tt.image + `": ` + rule}
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("problems:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Etcd.Runtime != RuntimeEmbedded || cfg.Etcd.ClientPort != 2379 || cfg.Etcd.PeerPort != 2380 ||
		cfg.Etcd.ListenMetricsURL != "http://127.0.0.1:2381" || cfg.Agent.Listen != "127.0.0.1:9479" ||
		cfg.Etcd.DataDir != DefaultDataDir || cfg.Agent.StateDir != DefaultStateDir {
		t.Errorf("defaults not applied: %+v", cfg)
	}
	if cfg.Etcd.ClientScheme() != "http" || cfg.Etcd.PeerScheme() != "http" {
		t.Error("plain http expected without TLS")
	}
	if !cfg.Protection.On() || cfg.Protection.Interval != 10*time.Second || cfg.StaticPod.ManifestDir != "/etc/kubernetes/manifests" {
		t.Errorf("protection and static-pod defaults not applied: %+v %+v", cfg.Protection, cfg.StaticPod)
	}
	if cfg.Cluster.Bootstrap != BootstrapExplicit || cfg.BootstrapMode() != BootstrapExplicit {
		t.Errorf("a new cluster must be an explicit act by default: cluster.bootstrap %q, mode %q", cfg.Cluster.Bootstrap, cfg.BootstrapMode())
	}
	if (&Config{}).BootstrapMode() != BootstrapExplicit {
		t.Error("a configuration built in code must bootstrap explicitly too")
	}
	if cfg.BootstrapToken() != "etcd-main" {
		t.Errorf("token defaults to the cluster name, got %q", cfg.BootstrapToken())
	}
}

func TestMembersFile(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    []string
		errs    []string
	}{
		{"ips, comments, blank lines", "# control plane\n192.0.2.1\n\n  192.0.2.2  # second\r\n2001:db8::3\n", []string{"192.0.2.1", "192.0.2.2", "2001:db8::3"}, nil},
		{"empty file is an empty list", "", nil, nil},
		{"only comments", "# none yet\n", nil, nil},
		{"two on a line", "192.0.2.1 192.0.2.2\n", nil, []string{`members.file line 1: "192.0.2.1 192.0.2.2": one address per line`}},
		{"a port is not an address", "192.0.2.1:2380\n", nil, []string{`members.file line 1: "192.0.2.1:2380": must be an IPv4 or IPv6 address (unexpected character (at ":2380"))`}},
		{"a hostname is not an address", "master-0\n", nil, []string{`members.file line 1: "master-0": must be an IPv4 or IPv6 address (unable to parse IP)`}},
		{"duplicate across lines", "192.0.2.1\n# gap\n192.0.2.1\n", nil, []string{`members.file line 3: "192.0.2.1": duplicate of members.file line 1`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, errs := ParseMembersFile([]byte(tt.content))
			addrs, listErrs := ValidateAddressList("members.file", entries, nil)
			errs = append(errs, listErrs...)
			var got []string
			for _, a := range addrs {
				got = append(got, a.String())
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("addresses %v, want %v", got, tt.want)
			}
			var gotErrs []string
			for _, e := range errs {
				gotErrs = append(gotErrs, e.Error())
			}
			if strings.Join(gotErrs, "\n") != strings.Join(tt.errs, "\n") {
				t.Errorf("problems %q, want %q", gotErrs, tt.errs)
			}
		})
	}
}

func TestReadMembersFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "members")
	cfg := &Config{Members: Members{Source: SourceFile, File: path}}
	if _, errs := cfg.DesiredMembers(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "cannot be read") {
		t.Errorf("missing file: %v", errs)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("#", MaxMembersFileBytes+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errs := cfg.DesiredMembers(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "must be at most 1048576 bytes") {
		t.Errorf("oversized file: %v", errs)
	}
	if err := os.WriteFile(path, []byte("192.0.2.2\n192.0.2.1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	three := 3
	cfg.Cluster.Replicas = &three
	if addrs, errs := cfg.DesiredMembers(); addrs != nil || len(errs) != 1 {
		t.Errorf("a list that breaks a rule must yield no addresses: %v %v", addrs, errs)
	}
}

func TestExamplesAreValid(t *testing.T) {
	examples, _ := filepath.Glob("examples/*.yaml")
	if len(examples) == 0 {
		t.Fatal("no examples in config/examples")
	}
	for _, path := range examples {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("example does not validate:\n%v", err)
			}
		})
	}
}

// The digest of a loaded configuration is that of its file, which
// FileDigest gives without loading; it is no setting: two loads of
// different files that mean the same have no changed fields.
func TestDigestIsTheFileContent(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	base := "cluster:\n  name: etcd-main\nmembers:\n  source: static\n  addresses: [127.0.0.1]\n"
	if err := os.WriteFile(a, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(b, []byte("# the same, with a comment\n"+base), 0o600); err != nil {
		t.Fatal(err)
	}
	ca, err := Load(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := Load(b)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := FileDigest(a); err != nil || d != ca.Digest || len(d) != 64 {
		t.Errorf("FileDigest = %q, %v; Load's Digest %q", d, err, ca.Digest)
	}
	if ca.Digest == cb.Digest {
		t.Error("two files of different content have the same digest")
	}
	if changed := ChangedFields(ca, cb); len(changed) != 0 {
		t.Errorf("ChangedFields names %q for the same settings", changed)
	}
}
