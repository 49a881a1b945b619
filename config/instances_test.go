package config

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// mainInstance is the packaged layout of a host's first cluster
// (etcdlet.service, /etc/etcdlet/config.yaml).
const mainInstance = `cluster: {name: etcd-main}
members: {source: file, file: /etc/etcdlet/members}
node: {address: 192.0.2.10}
etcd: {runtime: static-pod, dataDir: /var/lib/etcdlet/etcd, insecure: true}
agent: {stateDir: /var/lib/etcdlet/agent}
backup: {store: {provider: local, directory: /var/lib/etcdlet/snapshots}, schedule: {full: 12h}}
`

// eventsInstance is a second cluster on the same host
// (etcdlet@events.service, /etc/etcdlet/events.yaml) laid out as
// docs/operations.md says: every port, directory and name its own, the
// snapshots in the same directory under its own prefix.
const eventsInstance = `cluster: {name: etcd-events}
members: {source: file, file: /etc/etcdlet/members}
node: {address: 192.0.2.10}
etcd: {runtime: static-pod, dataDir: /var/lib/etcdlet/events/etcd, clientPort: 2383, peerPort: 2384, listenMetricsURL: "http://127.0.0.1:2386", insecure: true}
staticPod: {podName: etcd-events}
agent: {stateDir: /var/lib/etcdlet/events/agent, listen: "127.0.0.1:9480", peerPort: 2385}
backup: {store: {provider: local, directory: /var/lib/etcdlet/snapshots}, schedule: {full: 12h}}
`

func parseInstance(t *testing.T, yaml string) *Config {
	t.Helper()
	cfg, err := Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the instance's own configuration is invalid: %v", err)
	}
	return cfg
}

func TestInstanceConflicts(t *testing.T) {
	tests := []struct {
		name string
		// edit changes the events instance.
		from, to string
		// want are the fields of the events instance reported, each with
		// a word of its rule.
		want []string
	}{
		{name: "own ports, directories and names"},
		{"the same client port", "clientPort: 2383", "clientPort: 2379",
			[]string{`etcd.clientPort: 2379: the etcd client listener (etcd.clientPort) of /etc/etcdlet/config.yaml uses port 2379 too`}},
		{"its peer port is the other's client port", "peerPort: 2384", "peerPort: 2379",
			[]string{`etcd.peerPort: 2379: the etcd client listener (etcd.clientPort) of /etc/etcdlet/config.yaml uses port 2379 too`}},
		{"the same metrics listener", `listenMetricsURL: "http://127.0.0.1:2386"`, `listenMetricsURL: "http://127.0.0.1:2381"`,
			[]string{`etcd.listenMetricsURL: "http://127.0.0.1:2381": the etcd metrics listener`}},
		{"the same agent listener", `listen: "127.0.0.1:9480"`, `listen: "127.0.0.1:9479"`,
			[]string{`agent.listen: "127.0.0.1:9479": the agent listener`}},
		{"the same agent peer port", "peerPort: 2385", "peerPort: 2382",
			[]string{`agent.peerPort: 2382: the agent peer endpoint`}},
		{"the same data dir", "dataDir: /var/lib/etcdlet/events/etcd", "dataDir: /var/lib/etcdlet/etcd",
			[]string{`etcd.dataDir: "/var/lib/etcdlet/etcd": overlaps etcd.dataDir (/var/lib/etcdlet/etcd) of /etc/etcdlet/config.yaml`}},
		{"a state dir inside the other's data dir", "stateDir: /var/lib/etcdlet/events/agent", "stateDir: /var/lib/etcdlet/etcd/events",
			[]string{`agent.stateDir: "/var/lib/etcdlet/etcd/events": overlaps etcd.dataDir`}},
		{"the same snapshot prefix", "snapshots}", "snapshots, prefix: etcd-main}",
			[]string{`backup.store.directory: "/var/lib/etcdlet/snapshots/etcd-main": overlaps backup.store.directory`}},
		{"the same cluster on the same host", "name: etcd-events}", "name: etcd-main}",
			[]string{`cluster.name: "etcd-main": /etc/etcdlet/config.yaml runs a member of the same cluster on this host`,
				// the default snapshot prefix follows the name
				`backup.store.directory: "/var/lib/etcdlet/snapshots/etcd-main"`}},
		{"the same pod", "podName: etcd-events", "podName: etcd",
			[]string{`staticPod.podName: "etcd": /etc/etcdlet/config.yaml writes the same manifest /etc/kubernetes/manifests/etcd.yaml`}},
	}
	main := parseInstance(t, mainInstance)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(eventsInstance, tt.from) {
				t.Fatalf("the events instance has no %q", tt.from)
			}
			events := parseInstance(t, strings.Replace(eventsInstance, tt.from, tt.to, 1))
			got := events.ConflictsWith(main, "/etc/etcdlet/config.yaml")
			for _, want := range tt.want {
				if !slices.ContainsFunc(got, func(e FieldError) bool { return strings.Contains(e.Error(), want) }) {
					t.Errorf("problems:\n%v\nwant one with %q", got, want)
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("%d problems, want %d:\n%v", len(got), len(tt.want), got)
			}
			// The rule holds both ways: the other instance is refused too.
			if back := main.ConflictsWith(events, "/etc/etcdlet/events.yaml"); len(back) == 0 != (len(got) == 0) {
				t.Errorf("one way %d problems, the other way %d:\n%v", len(got), len(back), back)
			}
		})
	}
}

// TestInstanceConflictsOnUnknownAddresses: a configuration that does not
// say which of the listed addresses is this host's may be any of them;
// two such instances on one host with the same port are refused.
func TestInstanceConflictsOnUnknownAddresses(t *testing.T) {
	noAddress := func(yaml string) string { return strings.Replace(yaml, "node: {address: 192.0.2.10}\n", "", 1) }
	main := parseInstance(t, noAddress(mainInstance))
	events := parseInstance(t, noAddress(strings.Replace(eventsInstance, "peerPort: 2384", "peerPort: 2380", 1)))
	got := events.ConflictsWith(main, "/etc/etcdlet/config.yaml")
	if len(got) != 1 || got[0].Path != "etcd.peerPort" {
		t.Errorf("got %v, want the peer port refused", got)
	}
	if got := parseInstance(t, noAddress(eventsInstance)).ConflictsWith(main, "/etc/etcdlet/config.yaml"); len(got) != 0 {
		t.Errorf("own ports, unknown addresses: got %v", got)
	}
}

// TestInstancesOnOtherAddresses: two instances whose members bind
// different addresses of the host (each cluster on a network of its own)
// may share the peer ports, but not the client port: etcd listens for
// clients on the loopback address too.
func TestInstancesOnOtherAddresses(t *testing.T) {
	main := parseInstance(t, mainInstance)
	other := strings.NewReplacer("192.0.2.10", "198.51.100.10", "peerPort: 2384", "peerPort: 2380", "peerPort: 2385", "peerPort: 2382").Replace(eventsInstance)
	if got := parseInstance(t, other).ConflictsWith(main, "/etc/etcdlet/config.yaml"); len(got) != 0 {
		t.Errorf("peer listeners on other addresses: %v", got)
	}
	other = strings.Replace(other, "clientPort: 2383", "clientPort: 2379", 1)
	got := parseInstance(t, other).ConflictsWith(main, "/etc/etcdlet/config.yaml")
	if len(got) != 1 || got[0].Path != "etcd.clientPort" {
		t.Errorf("both client listeners bind 127.0.0.1:2379: got %v, want the client port refused", got)
	}
}

// TestInstanceExampleBesideTheMainCluster: the shipped example of a
// second cluster runs beside the main cluster's example and the packaged
// default layout, as docs/operations.md sets them up.
func TestInstanceExampleBesideTheMainCluster(t *testing.T) {
	events := parseInstance(t, readText(t, "examples/instance-events.yaml"))
	// The packaged default, filled in as its comments say.
	packaged := strings.NewReplacer(`name: ""`, "name: etcd-main", "addresses: []", "addresses: [127.0.0.2]").Replace(readText(t, "../packaging/config.yaml"))
	for main, yaml := range map[string]string{"examples/members-file.yaml": readText(t, "examples/members-file.yaml"), "../packaging/config.yaml": packaged} {
		cfg := parseInstance(t, yaml)
		if got := events.ConflictsWith(cfg, main); len(got) != 0 {
			t.Errorf("beside %s: %v", main, got)
		}
	}
}

func readText(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
