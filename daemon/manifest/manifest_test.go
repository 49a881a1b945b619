package manifest

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/runtime"
)

var update = flag.Bool("update", false, "rewrite testdata/*.yaml")

// cfgFor is a parsed, defaulted and validated configuration.
func cfgFor(t *testing.T, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test configuration invalid: %v", err)
	}
	return cfg
}

const ipv4 = `cluster: {name: etcd-main}
members: {source: static, addresses: [192.0.2.10, 192.0.2.11, 192.0.2.12]}
etcd: {runtime: static-pod, dataDir: /var/lib/etcd}
agent: {stateDir: /var/lib/etcdlet}
`

const ipv6TLS = `cluster: {name: etcd-main}
members: {source: static, addresses: ["2001:db8::10", "2001:db8::11", "2001:db8::12"]}
etcd:
  runtime: static-pod
  dataDir: /var/lib/etcd
  listenMetricsURL: "http://[::1]:2381"
  tls:
    client: {certFile: /etc/kubernetes/pki/etcd/server.crt, keyFile: /etc/kubernetes/pki/etcd/server.key, caFile: /etc/kubernetes/pki/etcd/ca.crt}
    peer: {certFile: /etc/etcdlet/pki/peer.crt, keyFile: /etc/etcdlet/pki/peer.key, caFile: /etc/kubernetes/pki/etcd/ca.crt}
staticPod: {image: "registry.example/etcd:3.6.16-0", imagePullPolicy: Always, cpuRequest: 200m, memoryRequest: 1Gi}
agent: {stateDir: /var/lib/etcdlet, listen: "[::1]:9479"}
`

const extraArgs = `cluster: {name: etcd-main}
members: {source: static, addresses: [192.0.2.10]}
etcd:
  runtime: static-pod
  dataDir: /var/lib/etcd
  extraArgs: {snapshot-count: "10000", quota-backend-bytes: "8589934592", experimental-flag-of-a-newer-etcd: "on"}
agent: {stateDir: /var/lib/etcdlet}
`

func TestGoldenManifests(t *testing.T) {
	tests := []struct {
		name, config, self, state string
	}{
		{"ipv4-bootstrap", ipv4, "192.0.2.10", runtime.StateNew},
		{"ipv6-tls-join", ipv6TLS, "2001:db8::12", runtime.StateExisting},
		{"extra-args", extraArgs, "192.0.2.10", runtime.StateNew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, tt.config)
			scheme := identity.SchemeFrom(cfg)
			addrs, errs := cfg.DesiredMembers()
			if len(errs) > 0 {
				t.Fatal(errs)
			}
			spec := runtime.BuildSpec(cfg, scheme.For(netip.MustParseAddr(tt.self)), identity.InitialCluster(scheme.ForAll(addrs)), tt.state)
			pod, err := Pod(spec, cfg.StaticPod)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", tt.name+".yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./daemon/manifest -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("manifest differs from %s:\n%s", golden, got)
			}
			// The manifest decodes strictly into a Pod equal to the built one.
			back, err := Unmarshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Spec.Containers[0].Command, pod.Spec.Containers[0].Command) || back.Annotations[SpecHashAnnotation] != pod.Annotations[SpecHashAnnotation] {
				t.Error("the manifest does not decode back to the built pod")
			}
			again, _ := Pod(spec, cfg.StaticPod)
			if again.Annotations[SpecHashAnnotation] != pod.Annotations[SpecHashAnnotation] {
				t.Error("rendering is not deterministic")
			}
		})
	}
}

func TestCommandLine(t *testing.T) {
	cfg := cfgFor(t, ipv6TLS)
	scheme := identity.SchemeFrom(cfg)
	self := scheme.For(netip.MustParseAddr("2001:db8::12"))
	spec := runtime.BuildSpec(cfg, self, "etcd-main-2001:db8::10=https://[2001:db8::10]:2380,etcd-main-2001:db8::12=https://[2001:db8::12]:2380", runtime.StateExisting)
	spec.ExtraArgs = map[string]string{"name": "never-overrides", "snapshot-count": "5000"}
	want := []string{
		"etcd",
		"--advertise-client-urls=https://[2001:db8::12]:2379",
		"--cert-file=/etc/kubernetes/pki/etcd/server.crt",
		"--client-cert-auth=true",
		"--data-dir=/var/lib/etcd",
		"--initial-advertise-peer-urls=https://[2001:db8::12]:2380",
		"--initial-cluster=etcd-main-2001:db8::10=https://[2001:db8::10]:2380,etcd-main-2001:db8::12=https://[2001:db8::12]:2380",
		"--initial-cluster-state=existing",
		"--initial-cluster-token=etcd-main",
		"--key-file=/etc/kubernetes/pki/etcd/server.key",
		"--listen-client-urls=https://[2001:db8::12]:2379,https://[::1]:2379",
		"--listen-metrics-urls=http://[::1]:2381",
		"--listen-peer-urls=https://[2001:db8::12]:2380",
		"--log-level=warn",
		"--name=etcd-main-2001:db8::12",
		"--peer-cert-file=/etc/etcdlet/pki/peer.crt",
		"--peer-client-cert-auth=true",
		"--peer-key-file=/etc/etcdlet/pki/peer.key",
		"--peer-trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt",
		"--snapshot-count=5000",
		"--trusted-ca-file=/etc/kubernetes/pki/etcd/ca.crt",
	}
	if got := Command(spec, "etcd"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("command line:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestOwnedFlagsAreRejectedByValidation(t *testing.T) {
	cfg, err := config.Parse([]byte(strings.Replace(extraArgs, `snapshot-count: "10000"`, `initial-cluster: "x=http://192.0.2.9:2380", name: other`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	err = cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "etcd.extraArgs.initial-cluster") || !strings.Contains(err.Error(), "etcd.extraArgs.name") {
		t.Errorf("owned flags in extraArgs must fail validation, got %v", err)
	}
}

func TestOptsOut(t *testing.T) {
	for content, want := range map[string]bool{
		"metadata:\n  annotations:\n    etcdlet.io/disable-protection: \"\"\n":     true,
		"metadata:\n  annotations:\n    etcdlet.io/disable-protection: \"true\"\n": true,
		"metadata:\n  annotations:\n    other: x\n":                                false,
		"not: [valid": false,
	} {
		if got := OptsOut([]byte(content)); got != want {
			t.Errorf("OptsOut(%q) = %v, want %v", content, got, want)
		}
	}
}
