// Package manifest renders the kubelet static pod that runs the local
// etcd member (etcd.runtime: static-pod). Pod is a pure builder with golden
// tests; writing the manifest is the static-pod runtime's business.
package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/runtime"
)

// Names and annotations of the manifest.
const (
	Namespace = "kube-system"
	// SpecHashAnnotation carries a hash of the rendered pod spec: it
	// changes exactly when the kubelet will restart etcd.
	SpecHashAnnotation = "etcdlet.io/spec-hash"
	// DisableProtectionAnnotation on the manifest on disk hands it to the
	// operator: etcdlet neither reverts nor rewrites it while it is there.
	DisableProtectionAnnotation = "etcdlet.io/disable-protection"
	// AdvertiseClientURLsAnnotation is what kubeadm reads from etcd pods to
	// find the cluster's client endpoints.
	AdvertiseClientURLsAnnotation = "kubeadm.kubernetes.io/etcd.advertise-client-urls"
	// DataVolume names the data dir's volume. Never kubeadm's "etcd-data":
	// `kubeadm reset` looks for a volume of that name in etcd.yaml and
	// deletes the contents of its hostPath. Without it, reset says "No
	// etcd config found. Assuming external etcd" and leaves the data alone.
	DataVolume = "etcdlet-data"
)

// Pod builds the static pod for a member spec. It is pure: the same spec
// and configuration give byte-identical manifests, so the writer can skip
// writes that would change nothing (and restart nothing).
func Pod(spec runtime.Spec, sp config.StaticPod) (*corev1.Pod, error) {
	metrics, err := url.Parse(spec.ListenMetricsURL)
	if err != nil || metrics.Port() == "" {
		return nil, fmt.Errorf("metrics URL %q: a URL with a port is needed for the probes", spec.ListenMetricsURL)
	}
	port, err := strconv.Atoi(metrics.Port())
	if err != nil {
		return nil, fmt.Errorf("metrics URL %q: %w", spec.ListenMetricsURL, err)
	}
	cpu, err := resource.ParseQuantity(sp.CPURequest)
	if err != nil {
		return nil, fmt.Errorf("staticPod.cpuRequest %q: %w", sp.CPURequest, err)
	}
	memory, err := resource.ParseQuantity(sp.MemoryRequest)
	if err != nil {
		return nil, fmt.Errorf("staticPod.memoryRequest %q: %w", sp.MemoryRequest, err)
	}
	volumes, mounts := volumes(spec)
	probe := func(path string, delay, failures, period int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Host: metrics.Hostname(), Path: path, Port: intstr.FromInt(port), Scheme: corev1.URIScheme(strings.ToUpper(metrics.Scheme)),
			}},
			InitialDelaySeconds: delay, TimeoutSeconds: 15, FailureThreshold: failures, PeriodSeconds: period,
		}
	}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: sp.PodName, Namespace: Namespace,
			// kubeadm finds the cluster's client endpoints in the pods
			// labelled component=etcd: only its own cluster's pod, named
			// etcd, may carry that label (a second cluster's would
			// add that cluster's endpoints to kubeadm's).
			Labels:      map[string]string{"component": sp.PodName, "tier": "control-plane"},
			Annotations: map[string]string{AdvertiseClientURLsAnnotation: spec.AdvertiseClientURL},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:            "etcd",
				Image:           sp.Image,
				ImagePullPolicy: corev1.PullPolicy(sp.ImagePullPolicy),
				Command:         Command(spec, sp.Command),
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory,
				}},
				VolumeMounts: mounts,
				// etcd needs no privilege beyond reading its certificates
				// and owning its data dir: no capabilities (it listens on
				// unprivileged ports, and runs as root, the owner of the data dir
				// and of the files it reads), no way to gain any through a
				// setuid binary, and a read-only root filesystem, since etcd
				// writes only to its data dir, which is a hostPath mount
				// (validation refuses --wal-dir, so the WAL stays in it too).
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: new(false),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					ReadOnlyRootFilesystem:   new(true),
				},
				// kubeadm's probe timings: a slow disk must not get etcd
				// killed while it replays its WAL, and readiness reacts in
				// seconds.
				StartupProbe:   probe("/livez", 10, 24, 10),
				LivenessProbe:  probe("/livez", 10, 8, 10),
				ReadinessProbe: probe("/readyz", 0, 3, 1),
			}},
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			// Seccomp RuntimeDefault, as kubeadm sets on its etcd pod, for
			// every container of the pod. It is valid for a hostNetwork
			// static pod: a seccomp profile filters system calls and is
			// independent of the namespaces the pod shares with the host,
			// the kubelet applies it to static pods like to any other, and
			// the runtime's default profile allows everything etcd calls
			// (file and socket I/O, fsync, mmap, epoll).
			SecurityContext: &corev1.PodSecurityContext{
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Volumes: volumes,
		},
	}
	hash, err := specHash(pod.Spec)
	if err != nil {
		return nil, err
	}
	pod.Annotations[SpecHashAnnotation] = hash
	return pod, nil
}

// Command is etcd's command line: the executable, then every flag as
// --name=value sorted by name (as kubeadm renders it), so that the same
// spec always gives the same line.
func Command(spec runtime.Spec, executable string) []string {
	flags := map[string]string{
		"name":                        spec.Name,
		"data-dir":                    spec.DataDir,
		"listen-peer-urls":            strings.Join(spec.ListenPeerURLs, ","),
		"initial-advertise-peer-urls": spec.AdvertisePeerURL,
		"listen-client-urls":          strings.Join(spec.ListenClientURLs, ","),
		"advertise-client-urls":       spec.AdvertiseClientURL,
		"listen-metrics-urls":         spec.ListenMetricsURL,
		"initial-cluster":             spec.InitialCluster,
		"initial-cluster-state":       spec.InitialClusterState,
		"initial-cluster-token":       spec.Token,
		"log-level":                   spec.LogLevel,
	}
	for _, f := range tlsFiles(spec) {
		flags[f.flag()] = f.path
		if f.kind == "ca" {
			// A CA to verify the other side switches on certificate
			// authentication of that side.
			flags[f.flagPrefix()+"client-cert-auth"] = "true"
		}
	}
	// Config validation refuses extra args etcdlet owns; never let one
	// override an owned flag here either.
	for name, value := range spec.ExtraArgs {
		if _, owned := flags[name]; !owned {
			flags[name] = value
		}
	}
	cmd := []string{executable}
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		cmd = append(cmd, "--"+name+"="+flags[name])
	}
	return cmd
}

// tlsFile is one certificate, key or CA file that etcd's command line names.
type tlsFile struct {
	role string // "client" or "peer": the listener the file serves
	kind string // "cert", "key" or "ca"
	path string // as configured
}

// flagPrefix is what etcd puts before the names of the role's TLS flags.
func (f tlsFile) flagPrefix() string {
	if f.role == "peer" {
		return "peer-"
	}
	return ""
}

// flag is the etcd flag that names the file.
func (f tlsFile) flag() string {
	switch f.kind {
	case "cert":
		return f.flagPrefix() + "cert-file"
	case "key":
		return f.flagPrefix() + "key-file"
	default:
		return f.flagPrefix() + "trusted-ca-file"
	}
}

// volume names the volume that mounts the file when this is the file's
// first use, e.g. etcd-client-cert or etcd-peer-ca: a DNS-1123 label that
// says what the file is.
func (f tlsFile) volume() string { return "etcd-" + f.role + "-" + f.kind }

// tlsFiles lists the TLS files etcd reads, in a fixed order: client
// certificate, key and CA, then the peer's. A role without a certificate has
// no TLS (validation sets certificate and key together, and a CA alone
// configures nothing). The command line and the volumes both come from this
// list, so every file etcd is told about is mounted.
func tlsFiles(spec runtime.Spec) []tlsFile {
	var files []tlsFile
	for _, role := range []struct {
		name  string
		files config.TLSFiles
	}{{"client", spec.ClientTLS}, {"peer", spec.PeerTLS}} {
		if role.files.CertFile == "" {
			continue
		}
		files = append(files, tlsFile{role.name, "cert", role.files.CertFile}, tlsFile{role.name, "key", role.files.KeyFile})
		if role.files.CAFile != "" {
			files = append(files, tlsFile{role.name, "ca", role.files.CAFile})
		}
	}
	return files
}

// volumes mounts the data dir and each TLS file etcd reads, at the same
// path as on the host, so etcd's flags name host paths.
//
// The TLS files are mounted one by one (hostPath type File, read-only),
// never their directories: a directory such as a flat /etc/kubernetes/pki
// also holds keys etcd has no business reading (the cluster CA's ca.key,
// the service-account signing key sa.key). A file used twice (one CA for
// clients and peers) is mounted once, under the name of its first use in
// the order of tlsFiles, so names and order are stable and so is the spec
// hash.
func volumes(spec runtime.Spec) ([]corev1.Volume, []corev1.VolumeMount) {
	directoryOrCreate := corev1.HostPathDirectoryOrCreate
	vols := []corev1.Volume{{Name: DataVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: spec.DataDir, Type: &directoryOrCreate}}}}
	mounts := []corev1.VolumeMount{{Name: DataVolume, MountPath: spec.DataDir}}
	file := corev1.HostPathFile
	mounted := map[string]bool{}
	for _, f := range tlsFiles(spec) {
		// /etc/pki/ca.crt and /etc/pki//ca.crt are one file: one volume.
		// Validation requires every path to be absolute.
		path := filepath.Clean(f.path)
		if f.path == "" || mounted[path] {
			continue
		}
		mounted[path] = true
		vols = append(vols, corev1.Volume{Name: f.volume(), VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &file}}})
		mounts = append(mounts, corev1.VolumeMount{Name: f.volume(), MountPath: path, ReadOnly: true})
	}
	return vols, mounts
}

func specHash(spec corev1.PodSpec) (string, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("hash pod spec: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), nil
}

// Render builds the manifest for spec and renders it as YAML: the bytes
// the static-pod runtime writes and `etcdlet render` prints.
func Render(spec runtime.Spec, sp config.StaticPod) ([]byte, error) {
	pod, err := Pod(spec, sp)
	if err != nil {
		return nil, err
	}
	return Marshal(pod)
}

// Marshal renders the manifest as YAML.
func Marshal(pod *corev1.Pod) ([]byte, error) {
	b, err := yaml.Marshal(pod)
	if err != nil {
		return nil, fmt.Errorf("render manifest: %w", err)
	}
	return b, nil
}

// Unmarshal reads a manifest strictly: unknown fields are errors.
func Unmarshal(data []byte) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(data, pod); err != nil {
		return nil, fmt.Errorf("read manifest: %w", err)
	}
	return pod, nil
}

// OptsOut reports whether a manifest on disk carries the opt-out
// annotation. A file that does not parse does not opt out.
func OptsOut(data []byte) bool {
	var meta struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return false
	}
	_, ok := meta.Metadata.Annotations[DisableProtectionAnnotation]
	return ok
}
