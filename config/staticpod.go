package config

import (
	"regexp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Defaults of the staticPod and protection sections.
const (
	DefaultManifestDir = "/etc/kubernetes/manifests"
	// DefaultEtcdImage is the etcd release etcdlet itself is built with.
	DefaultEtcdImage          = "registry.k8s.io/etcd:3.7.0-0"
	DefaultImagePullPolicy    = "IfNotPresent"
	DefaultEtcdCommand        = "etcd"
	DefaultCPURequest         = "100m"
	DefaultMemoryRequest      = "100Mi"
	DefaultProtectionInterval = 10 * time.Second
)

// StaticPod configures the kubelet static pod of the local member
// (etcd.runtime: static-pod).
type StaticPod struct {
	// ManifestDir is the kubelet's staticPodPath; the manifest is
	// <manifestDir>/etcd.yaml.
	ManifestDir     string `yaml:"manifestDir"`
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
	setDefault(&s.Image, DefaultEtcdImage)
	setDefault(&s.ImagePullPolicy, DefaultImagePullPolicy)
	setDefault(&s.Command, DefaultEtcdCommand)
	setDefault(&s.CPURequest, DefaultCPURequest)
	setDefault(&s.MemoryRequest, DefaultMemoryRequest)
}

// imagePattern is a container image reference: no spaces or control
// characters, and not a bare tag or digest.
var imagePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._/:@-]*[a-zA-Z0-9_.-]$`)

func (c *Config) validateStaticPod(errs *Errors) {
	s := c.StaticPod
	if c.Etcd.Runtime != RuntimeStaticPod {
		return
	}
	if requireAbsPath(errs, "staticPod.manifestDir", s.ManifestDir) && (nested(s.ManifestDir, c.Etcd.DataDir) || nested(s.ManifestDir, c.Agent.StateDir)) {
		errs.add("staticPod.manifestDir", s.ManifestDir, "must not contain etcd.dataDir or agent.stateDir: the kubelet reads every file in it")
	}
	if !imagePattern.MatchString(s.Image) {
		errs.add("staticPod.image", s.Image, "must be a container image reference, e.g. %s", DefaultEtcdImage)
	}
	if !slices.Contains([]string{"Always", "IfNotPresent", "Never"}, s.ImagePullPolicy) {
		errs.add("staticPod.imagePullPolicy", s.ImagePullPolicy, "must be Always, IfNotPresent or Never")
	}
	for _, q := range []struct{ path, value string }{{"staticPod.cpuRequest", s.CPURequest}, {"staticPod.memoryRequest", s.MemoryRequest}} {
		if _, err := resource.ParseQuantity(q.value); err != nil {
			errs.add(q.path, q.value, "must be a Kubernetes quantity such as 100m or 100Mi")
		}
	}
}

func (p Protection) validate(errs *Errors) {
	if p.Interval < time.Second {
		errs.add("protection.interval", p.Interval, "must be at least 1s")
	}
}
