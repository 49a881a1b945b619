package manifest

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

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
etcd: {runtime: static-pod, dataDir: /var/lib/etcd, insecure: true}
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
  insecure: true
  extraArgs: {snapshot-count: "10000", quota-backend-bytes: "8589934592", experimental-flag-of-a-newer-etcd: "on"}
agent: {stateDir: /var/lib/etcdlet}
`

// etcd35 runs kubeadm's etcd image of Kubernetes 1.33 and before: etcd
// 3.5, which knows the tuning only as experimental flags.
const etcd35 = `cluster: {name: etcd-main}
members: {source: static, addresses: [192.0.2.10, 192.0.2.11, 192.0.2.12]}
etcd: {runtime: static-pod, dataDir: /var/lib/etcd, insecure: true}
staticPod: {image: "registry.k8s.io/etcd:3.5.21-0"}
agent: {stateDir: /var/lib/etcdlet}
`

// flatPKI keeps client and peer certificates in one flat directory that
// also holds keys etcd must not see (ca.key, sa.key, front-proxy-ca.key,
// …), and uses one CA for clients and peers.
const flatPKI = `cluster: {name: etcd-main}
members: {source: static, addresses: [192.0.2.10, 192.0.2.11, 192.0.2.12]}
etcd:
  runtime: static-pod
  dataDir: /var/lib/etcd
  tls:
    client: {certFile: /etc/kubernetes/pki/etcd-server.crt, keyFile: /etc/kubernetes/pki/etcd-server.key, caFile: /etc/kubernetes/pki/etcd-ca.crt}
    peer: {certFile: /etc/kubernetes/pki/etcd-peer.crt, keyFile: /etc/kubernetes/pki/etcd-peer.key, caFile: /etc/kubernetes/pki/etcd-ca.crt}
agent: {stateDir: /var/lib/etcdlet}
`

// eventsCluster is a second cluster on the same hosts (Gardener's
// etcd-events, or kubeadm's events split out), with its own pod name,
// ports and directories: its pod must not look like kubeadm's etcd.
const eventsCluster = `cluster: {name: etcd-events}
members: {source: static, addresses: [192.0.2.10, 192.0.2.11, 192.0.2.12]}
etcd: {runtime: static-pod, dataDir: /var/lib/etcdlet/events/etcd, clientPort: 2383, peerPort: 2384, listenMetricsURL: "http://127.0.0.1:2386", insecure: true}
staticPod: {podName: etcd-events}
agent: {stateDir: /var/lib/etcdlet/events/agent}
`

// specFor is the spec of the member at self, with every configured address
// in the initial cluster.
func specFor(t *testing.T, cfg *config.Config, self, state string) runtime.Spec {
	t.Helper()
	scheme := identity.SchemeFrom(cfg)
	addrs, errs := cfg.DesiredMembers()
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	return runtime.BuildSpec(runtime.SettingsFrom(cfg), scheme.For(netip.MustParseAddr(self)), identity.InitialCluster(scheme.ForAll(addrs)), state)
}

func TestGoldenManifests(t *testing.T) {
	tests := []struct {
		name, config, self, state string
	}{
		{"ipv4-bootstrap", ipv4, "192.0.2.10", runtime.StateNew},
		{"ipv6-tls-join", ipv6TLS, "2001:db8::12", runtime.StateExisting},
		{"extra-args", extraArgs, "192.0.2.10", runtime.StateNew},
		{"flat-pki-shared-ca", flatPKI, "192.0.2.11", runtime.StateNew},
		{"etcd-3.5-image", etcd35, "192.0.2.10", runtime.StateNew},
		{"second-cluster-pod-name", eventsCluster, "192.0.2.11", runtime.StateExisting},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, tt.config)
			spec := specFor(t, cfg, tt.self, tt.state)
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
				t.Fatalf("%v (run go test ./daemon/runtime/staticpod/manifest -update)", err)
			}
			if string(got) != string(want) {
				t.Errorf("manifest differs from %s:\n%s", golden, got)
			}
			// The manifest decodes strictly into a Pod equal to the built one.
			back, err := Unmarshal(got)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.Spec.Containers[0].Command, pod.Spec.Containers[0].Command) || back.Annotations[SpecHashAnnotation] != pod.Annotations[SpecHashAnnotation] ||
				!reflect.DeepEqual(back.Spec.Volumes, pod.Spec.Volumes) || !reflect.DeepEqual(back.Spec.Containers[0].VolumeMounts, pod.Spec.Containers[0].VolumeMounts) ||
				!reflect.DeepEqual(back.Spec.Containers[0].SecurityContext, pod.Spec.Containers[0].SecurityContext) || !reflect.DeepEqual(back.Spec.SecurityContext, pod.Spec.SecurityContext) {
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
	spec := runtime.BuildSpec(runtime.SettingsFrom(cfg), self, "etcd-main-2001:db8::10=https://[2001:db8::10]:2380,etcd-main-2001:db8::12=https://[2001:db8::12]:2380", runtime.StateExisting)
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

// TestTLSFilesAreMountedOneByOne checks the mounts against the configuration
// (not against the builder's own list of files): no hostPath volume exposes
// a directory holding a TLS file, and every TLS file the configuration names
// is mounted read-only, at its own path, exactly once.
func TestTLSFilesAreMountedOneByOne(t *testing.T) {
	const head = `cluster: {name: etcd-main}
members: {source: static, addresses: [192.0.2.10]}
etcd:
  runtime: static-pod
  dataDir: /var/lib/etcd
`
	tests := []struct {
		name, config, self string
		// The TLS volumes, in order; the data volume comes first in every case.
		wantVolumes []string
	}{
		{"no TLS", ipv4, "192.0.2.10", nil},
		{"kubeadm layout, peer files elsewhere, shared CA", ipv6TLS, "2001:db8::12",
			[]string{"etcd-client-cert", "etcd-client-key", "etcd-client-ca", "etcd-peer-cert", "etcd-peer-key"}},
		{"one flat directory, shared CA", flatPKI, "192.0.2.10",
			[]string{"etcd-client-cert", "etcd-client-key", "etcd-client-ca", "etcd-peer-cert", "etcd-peer-key"}},
		{"client only, no CA", head + `  insecure: true
  tls:
    client: {certFile: /etc/kubernetes/pki/etcd-server.crt, keyFile: /etc/kubernetes/pki/etcd-server.key}
agent: {stateDir: /var/lib/etcdlet}
`, "192.0.2.10", []string{"etcd-client-cert", "etcd-client-key"}},
		{"peer only", head + `  insecure: true
  tls:
    peer: {certFile: /etc/kubernetes/pki/etcd-peer.crt, keyFile: /etc/kubernetes/pki/etcd-peer.key, caFile: /etc/kubernetes/pki/etcd-ca.crt}
agent: {stateDir: /var/lib/etcdlet}
`, "192.0.2.10", []string{"etcd-peer-cert", "etcd-peer-key", "etcd-peer-ca"}},
		{"separate CAs", head + `  tls:
    client: {certFile: /etc/pki/etcd/server.crt, keyFile: /etc/pki/etcd/server.key, caFile: /etc/pki/etcd/client-ca.crt}
    peer: {certFile: /etc/pki/etcd/peer.crt, keyFile: /etc/pki/etcd/peer.key, caFile: /etc/pki/etcd/peer-ca.crt}
agent: {stateDir: /var/lib/etcdlet}
`, "192.0.2.10", []string{"etcd-client-cert", "etcd-client-key", "etcd-client-ca", "etcd-peer-cert", "etcd-peer-key", "etcd-peer-ca"}},
		{"certificate and key in one PEM, used by both roles", head + `  tls:
    client: {certFile: /etc/pki/etcd/member.pem, keyFile: /etc/pki/etcd/member.pem, caFile: /etc/pki/etcd/ca.crt}
    peer: {certFile: /etc/pki/etcd/member.pem, keyFile: /etc/pki/etcd/member.pem, caFile: /etc/pki/etcd/ca.crt}
agent: {stateDir: /var/lib/etcdlet}
`, "192.0.2.10", []string{"etcd-client-cert", "etcd-client-ca"}},
		{"one CA spelled two ways", head + `  tls:
    client: {certFile: /etc/pki/etcd/server.crt, keyFile: /etc/pki/etcd/server.key, caFile: /etc/pki/etcd/ca.crt}
    peer: {certFile: /etc/pki/etcd/peer.crt, keyFile: /etc/pki/etcd/peer.key, caFile: /etc/pki//etcd/./ca.crt}
agent: {stateDir: /var/lib/etcdlet}
`, "192.0.2.10", []string{"etcd-client-cert", "etcd-client-key", "etcd-client-ca", "etcd-peer-cert", "etcd-peer-key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := cfgFor(t, tt.config)
			spec := specFor(t, cfg, tt.self, runtime.StateNew)
			pod, err := Pod(spec, cfg.StaticPod)
			if err != nil {
				t.Fatal(err)
			}
			// The TLS files as the configuration names them, each once.
			var files []string
			for _, f := range []config.TLSFiles{cfg.Etcd.TLS.Client, cfg.Etcd.TLS.Peer} {
				for _, path := range []string{f.CertFile, f.KeyFile, f.CAFile} {
					if path != "" && !slices.Contains(files, filepath.Clean(path)) {
						files = append(files, filepath.Clean(path))
					}
				}
			}

			var names []string
			vols := map[string]corev1.Volume{}
			for _, v := range pod.Spec.Volumes {
				if errs := validation.IsDNS1123Label(v.Name); len(errs) > 0 {
					t.Errorf("volume name %q: %v", v.Name, errs)
				}
				if _, dup := vols[v.Name]; dup {
					t.Errorf("volume %q defined twice", v.Name)
				}
				vols[v.Name] = v
				if v.Name != DataVolume {
					names = append(names, v.Name)
				}
				if v.HostPath == nil {
					t.Errorf("volume %q is not a hostPath", v.Name)
					continue
				}
				// (a) A volume is a TLS file itself, of type File, or holds none.
				for _, file := range files {
					switch {
					case file == v.HostPath.Path:
						if v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathFile {
							t.Errorf("volume %q mounts TLS file %s with hostPath type %v, want File", v.Name, file, v.HostPath.Type)
						}
					case strings.HasPrefix(file, strings.TrimSuffix(v.HostPath.Path, "/")+"/"):
						t.Errorf("volume %q mounts directory %s, which holds TLS file %s", v.Name, v.HostPath.Path, file)
					}
				}
			}
			if !slices.Equal(names, tt.wantVolumes) {
				t.Errorf("TLS volumes %q, want %q", names, tt.wantVolumes)
			}
			if len(pod.Spec.Volumes) == 0 || pod.Spec.Volumes[0].Name != DataVolume || pod.Spec.Volumes[0].HostPath == nil || pod.Spec.Volumes[0].HostPath.Path != "/var/lib/etcd" {
				t.Errorf("the first volume must be the data dir, got %+v", pod.Spec.Volumes)
			}

			// (b) Every TLS file is mounted exactly once, read-only, at its
			// own path, from a volume of that same host path.
			mounts := pod.Spec.Containers[0].VolumeMounts
			for _, file := range files {
				var found []corev1.VolumeMount
				for _, m := range mounts {
					if filepath.Clean(m.MountPath) == file {
						found = append(found, m)
					}
				}
				if len(found) != 1 {
					t.Errorf("TLS file %s is mounted %d times, want once", file, len(found))
					continue
				}
				m := found[0]
				if !m.ReadOnly {
					t.Errorf("TLS file %s is mounted read-write (volume %q)", file, m.Name)
				}
				if v, ok := vols[m.Name]; !ok || v.HostPath == nil || v.HostPath.Path != file {
					t.Errorf("TLS file %s is mounted from volume %q, which is not that host file", file, m.Name)
				}
			}
			// Nothing else is mounted, and every mount has its volume.
			if len(mounts) != 1+len(files) || len(pod.Spec.Volumes) != len(mounts) {
				t.Errorf("%d mounts and %d volumes for the data dir and %d TLS files", len(mounts), len(pod.Spec.Volumes), len(files))
			}
			for _, m := range mounts {
				if _, ok := vols[m.Name]; !ok {
					t.Errorf("mount %q has no volume", m.Name)
				}
			}
			// Every file etcd's command line names is visible to it.
			for _, arg := range pod.Spec.Containers[0].Command[1:] {
				name, value, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
				if strings.HasSuffix(name, "-file") && !slices.ContainsFunc(mounts, func(m corev1.VolumeMount) bool { return filepath.Clean(m.MountPath) == filepath.Clean(value) }) {
					t.Errorf("--%s=%s is not mounted", name, value)
				}
			}
		})
	}
}

func TestSecurityContext(t *testing.T) {
	for name, config := range map[string]string{"ipv4": ipv4, "ipv6 TLS": ipv6TLS, "flat pki": flatPKI, "extra args": extraArgs} {
		t.Run(name, func(t *testing.T) {
			cfg := cfgFor(t, config)
			addrs, _ := cfg.DesiredMembers()
			pod, err := Pod(specFor(t, cfg, addrs[0].String(), runtime.StateNew), cfg.StaticPod)
			if err != nil {
				t.Fatal(err)
			}
			if len(pod.Spec.Containers) != 1 {
				t.Fatalf("%d containers, want 1", len(pod.Spec.Containers))
			}
			sc := pod.Spec.Containers[0].SecurityContext
			if sc == nil {
				t.Fatal("the etcd container has no securityContext")
			}
			if got := show(sc.AllowPrivilegeEscalation); got != "false" {
				t.Errorf("allowPrivilegeEscalation = %s, want false", got)
			}
			if got := show(sc.ReadOnlyRootFilesystem); got != "true" {
				t.Errorf("readOnlyRootFilesystem = %s, want true", got)
			}
			if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
				t.Errorf("capabilities = %+v, want drop [ALL] and add nothing", sc.Capabilities)
			}
			if sc.Privileged != nil && *sc.Privileged {
				t.Error("the etcd container is privileged")
			}
			// Seccomp RuntimeDefault at the pod level covers the container,
			// unless the container sets a profile of its own.
			if sc.SeccompProfile != nil {
				t.Errorf("container seccompProfile = %+v, want it inherited from the pod", sc.SeccompProfile)
			}
			if psc := pod.Spec.SecurityContext; psc == nil || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("pod securityContext = %+v, want seccompProfile RuntimeDefault", pod.Spec.SecurityContext)
			}
			// etcd writes only to its data dir: the one writable mount.
			for _, m := range pod.Spec.Containers[0].VolumeMounts {
				if !m.ReadOnly && m.MountPath != cfg.Etcd.DataDir {
					t.Errorf("mount %q at %s is writable; only the data dir may be", m.Name, m.MountPath)
				}
			}
		})
	}
}

// show renders an optional boolean field: true, false or unset.
func show(b *bool) string {
	if b == nil {
		return "unset"
	}
	return strconv.FormatBool(*b)
}
