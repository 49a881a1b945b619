package config

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Defaults of the staticPod and protection sections.
const (
	DefaultManifestDir = "/etc/kubernetes/manifests"
	// DefaultPodName is kubeadm's: its manifest etcd.yaml, its pod
	// etcd-<node>, which kubeadm itself reads.
	DefaultPodName = "etcd"
	// DefaultEtcdImage is the etcd release etcdlet itself is built with.
	DefaultEtcdImage          = "registry.k8s.io/etcd:3.7.3-0"
	DefaultImagePullPolicy    = "IfNotPresent"
	DefaultEtcdCommand        = "etcd"
	DefaultCPURequest         = "100m"
	DefaultMemoryRequest      = "100Mi"
	DefaultProtectionInterval = 10 * time.Second
)

// StaticPod configures the kubelet static pod of the local member
// (etcd.runtime: static-pod; validated whatever the runtime).
type StaticPod struct {
	// ManifestDir is the kubelet's staticPodPath; the manifest is
	// <manifestDir>/<podName>.yaml.
	ManifestDir string `yaml:"manifestDir"`
	// PodName names the pod (the kubelet's mirror pod is
	// <podName>-<node name>) and its manifest. A second cluster on the
	// same hosts (etcdlet@<name>.service) needs a name of its own.
	PodName         string `yaml:"podName"`
	Image           string `yaml:"image"`
	ImagePullPolicy string `yaml:"imagePullPolicy"`
	// Command is the etcd executable inside the image.
	Command       string `yaml:"command"`
	CPURequest    string `yaml:"cpuRequest"`
	MemoryRequest string `yaml:"memoryRequest"`
}

// Protection configures the protection of the files etcdlet renders.
type Protection struct {
	// Enabled defaults to true: an edit or deletion of a managed file made
	// by anyone else is reverted.
	Enabled *bool `yaml:"enabled,omitempty"`
	// Interval is the periodic check besides the file watch.
	Interval time.Duration `yaml:"interval"`
}

// On reports whether protection is enabled.
func (p Protection) On() bool { return p.Enabled == nil || *p.Enabled }

func (s *StaticPod) applyDefaults() {
	setDefault(&s.ManifestDir, DefaultManifestDir)
	setDefault(&s.PodName, DefaultPodName)
	setDefault(&s.Image, DefaultEtcdImage)
	setDefault(&s.ImagePullPolicy, DefaultImagePullPolicy)
	setDefault(&s.Command, DefaultEtcdCommand)
	setDefault(&s.CPURequest, DefaultCPURequest)
	setDefault(&s.MemoryRequest, DefaultMemoryRequest)
}

// podNamePattern is a DNS label, as a pod's name must be once the
// kubelet appended the node's name.
var podNamePattern = regexp.MustCompile(`^[a-z]([a-z0-9-]*[a-z0-9])?$`)

// maxPodNameLength leaves room in a DNS subdomain (253) for
// "-<node name>": a node name is a DNS subdomain too, but real ones are
// short, and kubeadm's "etcd" leaves 248.
const maxPodNameLength = 63

// imagePattern is a container image reference as the container runtimes
// parse it (the grammar of github.com/distribution/reference):
// [host[:port]/]path[:tag][@digest], where the host may have upper-case
// letters, the path components are lower-case and the tag is
// [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}.
var imagePattern = func() *regexp.Regexp {
	const (
		pathComponent   = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
		domainComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
		host            = `(?:` + domainComponent + `(?:\.` + domainComponent + `)*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?`
		tag             = `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}`
		digest          = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	)
	return regexp.MustCompile(`^(?:` + host + `/)?` + pathComponent + `(?:/` + pathComponent + `)*(?::` + tag + `)?(?:@` + digest + `)?$`)
}()

// validateStaticPod checks the section whatever the runtime, so that a
// file switched to static-pod later holds no surprise; with the embedded
// runtime etcdlet uses none of it.
func (c *Config) validateStaticPod(errs *Errors) {
	s := c.StaticPod
	if requireAbsPath(errs, "staticPod.manifestDir", s.ManifestDir) {
		switch {
		case nested(s.ManifestDir, c.Etcd.DataDir) || nested(s.ManifestDir, c.Agent.StateDir):
			errs.add("staticPod.manifestDir", s.ManifestDir, "must not contain etcd.dataDir or agent.stateDir: the kubelet reads every file in it")
		case filepath.IsAbs(c.Etcd.DataDir) && nested(c.Etcd.DataDir, s.ManifestDir):
			errs.add("staticPod.manifestDir", s.ManifestDir, "must not be inside etcd.dataDir (%s): the data dir is moved aside as a unit, and the kubelet's manifests would go with it", c.Etcd.DataDir)
		}
	}
	if !podNamePattern.MatchString(s.PodName) || len(s.PodName) > maxPodNameLength {
		errs.add("staticPod.podName", s.PodName, "must be lower-case letters, digits and '-', starting with a letter and ending with a letter or digit, at most %d characters (the kubelet appends -<node name>)", maxPodNameLength)
	}
	if !imagePattern.MatchString(s.Image) {
		errs.add("staticPod.image", s.Image, "must be a container image reference, [host[:port]/]lower-case/path[:tag][@digest], e.g. %s", DefaultEtcdImage)
	}
	if !slices.Contains([]string{"Always", "IfNotPresent", "Never"}, s.ImagePullPolicy) {
		errs.add("staticPod.imagePullPolicy", s.ImagePullPolicy, "must be Always, IfNotPresent or Never")
	}
	if strings.TrimSpace(s.Command) == "" {
		errs.add("staticPod.command", s.Command, "must name the etcd executable in the image, not be blank")
	}
	for _, q := range []struct{ path, value string }{{"staticPod.cpuRequest", s.CPURequest}, {"staticPod.memoryRequest", s.MemoryRequest}} {
		if quantity, err := resource.ParseQuantity(q.value); err != nil {
			errs.add(q.path, q.value, "must be a Kubernetes quantity such as 100m or 100Mi")
		} else if quantity.Sign() < 0 {
			errs.add(q.path, q.value, "must not be negative")
		}
	}
}

func (p Protection) validate(errs *Errors) {
	if p.Interval < time.Second {
		errs.add("protection.interval", p.Interval, "must be at least 1s")
	}
}
