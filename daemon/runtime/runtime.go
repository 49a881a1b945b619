// Package runtime is the seam between etcdlet's membership engine and the
// thing that actually runs the local etcd member: in-process (embedded) or
// as a kubelet static pod. The engine decides *what* the member runs with
// (a Spec); a Runtime makes it so.
package runtime

import (
	"context"
	"maps"
	"slices"

	embeddedversion "go.etcd.io/etcd/api/v3/version"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdversion"
	"github.com/etcdlet/etcdlet/daemon/identity"
)

// Cluster states for Spec.InitialClusterState, as etcd names them.
const (
	StateNew      = "new"
	StateExisting = "existing"
)

// Spec is everything the local member runs with.
type Spec struct {
	Name    string
	DataDir string
	// AdvertisePeerURL and AdvertiseClientURL are the member's own URLs.
	AdvertisePeerURL   string
	AdvertiseClientURL string
	ListenPeerURLs     []string
	ListenClientURLs   []string
	ListenMetricsURL   string
	// InitialCluster, InitialClusterState and Token are decided by the
	// membership engine (bootstrap: the list, "new"; join: the current
	// members, "existing"). etcd ignores them once the data dir has a WAL.
	InitialCluster      string
	InitialClusterState string
	Token               string
	ClientTLS           config.TLSFiles
	PeerTLS             config.TLSFiles
	ExtraArgs           map[string]string
	LogLevel            string
}

// Clone returns a copy of s that shares no slice or map with it.
func (s Spec) Clone() Spec {
	s.ListenPeerURLs = slices.Clone(s.ListenPeerURLs)
	s.ListenClientURLs = slices.Clone(s.ListenClientURLs)
	s.ExtraArgs = maps.Clone(s.ExtraArgs)
	return s
}

// Status is what a runtime knows about the local member.
type Status struct {
	// Running: the member was started and has not stopped.
	Running bool
	// Exits counts how often the member stopped on its own (a crash, or
	// its removal from the cluster) since the runtime was created, so the
	// agent can tell a new exit from an old one.
	Exits uint64
	// MemberID and ClusterID are the local member's when the runtime
	// knows them (the embedded server does as soon as it started); 0
	// otherwise.
	MemberID  uint64
	ClusterID uint64
	// Version is the etcd minor of what runs, where the runtime knows it
	// apart from the configuration: the image of the static pod's
	// manifest in place, which is the old one until a version change is
	// let through (node's versionChangeProblem). Zero when not known, and
	// for the embedded member, which always runs etcdlet's own etcd.
	Version etcdversion.Minor
}

// Runtime runs the local member.
type Runtime interface {
	// Apply makes the member run with spec. A member that is not running
	// is started. A running one is left alone by the embedded runtime (it
	// runs until the agent stops it), while the static-pod runtime rewrites
	// the manifest when the rendered bytes change (the kubelet then
	// restarts etcd). The agent calls it on every pass the member should
	// run, so a lost or stale manifest is put back.
	Apply(ctx context.Context, spec Spec) error
	// Stop stops the member because it must not run (it was removed);
	// idempotent. It may return before the member's process has exited;
	// the data dir tells (datadir.InUse).
	Stop(ctx context.Context) error
	// Close is called when the agent exits: the embedded member stops with
	// the agent; a static pod keeps running under the kubelet.
	Close(ctx context.Context) error
	Status() Status
	// Changed receives a value whenever Status changes on its own, so the
	// agent reacts at once instead of on its next timer.
	Changed() <-chan struct{}
}

// Restarting is a runtime whose Apply restarts a running member when its
// spec changes: the static pod, whose new manifest the kubelet runs by
// stopping etcd and starting it again. The agent holds such a change of a
// member that serves, and restarts it through a member-restart task under
// the cluster-wide task lock, so that no two members restart at once.
type Restarting interface {
	// WouldRestart reports whether Apply(spec) would restart the running
	// member: what it runs differs from spec's rendering, and it is
	// etcdlet's to change.
	WouldRestart(spec Spec) (bool, error)
}

// Settings are what a member's spec takes from the configuration,
// narrowed once (SettingsFrom) so that the spec's builders see nothing
// else of it.
type Settings struct {
	DataDir          string
	ListenMetricsURL string
	// Token is the initial-cluster-token of a new cluster.
	Token     string
	ClientTLS config.TLSFiles
	PeerTLS   config.TLSFiles
	ExtraArgs map[string]string
	LogLevel  string
	// EtcdVersion is the etcd the member runs (EtcdVersion): the tuning
	// is spelled for it.
	EtcdVersion etcdversion.Minor
	// ClientScheme and ClientPort make the client URLs on the loopback
	// address (ListenClientURLs).
	ClientScheme string
	ClientPort   int
}

// SettingsFrom narrows a configuration to what a member's spec takes.
func SettingsFrom(cfg *config.Config) Settings {
	return Settings{
		DataDir: cfg.Etcd.DataDir, ListenMetricsURL: cfg.Etcd.ListenMetricsURL, Token: cfg.BootstrapToken(),
		ClientTLS: cfg.Etcd.TLS.Client, PeerTLS: cfg.Etcd.TLS.Peer, ExtraArgs: maps.Clone(cfg.Etcd.ExtraArgs),
		LogLevel: cfg.Etcd.LogLevel, ClientScheme: cfg.Etcd.ClientScheme(), ClientPort: cfg.Etcd.ClientPort,
		EtcdVersion: EtcdVersion(cfg),
	}
}

// BuildSpec derives the member's spec from the settings and the
// membership engine's decision.
func BuildSpec(s Settings, self identity.Member, initialCluster, clusterState string) Spec {
	return Spec{
		Name:                self.Name,
		DataDir:             s.DataDir,
		AdvertisePeerURL:    self.PeerURL,
		AdvertiseClientURL:  self.ClientURL,
		ListenPeerURLs:      []string{self.PeerURL},
		ListenClientURLs:    ListenClientURLs(s, self),
		ListenMetricsURL:    s.ListenMetricsURL,
		InitialCluster:      initialCluster,
		InitialClusterState: clusterState,
		Token:               s.Token,
		ClientTLS:           s.ClientTLS,
		PeerTLS:             s.PeerTLS,
		ExtraArgs:           WithTuning(s.EtcdVersion, s.ExtraArgs),
		LogLevel:            s.LogLevel,
	}
}

// ListenClientURLs are the client URLs on config.ClientListenAddrs: the
// member IP plus the loopback address of its family, so that local clients
// (the kube-apiserver on this host) need not know the member IP.
func ListenClientURLs(s Settings, self identity.Member) []string {
	urls := []string{self.ClientURL}
	for _, ip := range config.ClientListenAddrs(self.IP)[1:] {
		urls = append(urls, identity.URL(s.ClientScheme, ip, s.ClientPort))
	}
	return urls
}

// Tuning is what kubeadm's etcd manifest sets beyond etcd's defaults, and
// every member etcdlet runs (embedded or static pod) gets it too unless
// etcd.extraArgs sets the same flag, under either of its names:
//
//   - watch-progress-notify-interval 5s: kube-apiserver serves consistent
//     reads from its watch cache only when etcd sends progress
//     notifications; without them every such read goes to etcd.
//   - feature-gates InitialCorruptCheck=true: a member whose data
//     diverged from its peers' refuses to start and serve, instead of
//     serving stale data (its data is then moved aside by etcdlet's
//     corruption handling, never used).
//   - snapshot-count 10000: etcd's default since 3.6, stated so that an
//     older etcd image keeps the same memory profile (3.5 defaulted to
//     100000 entries kept in memory between snapshots).
//
// The names are etcd 3.6's. An etcd before 3.6 knows the first two only
// as experimental flags (TuningBefore36), and etcd 3.7 knows only the new
// names: each etcd is given the names it knows.
var Tuning = map[string]string{
	"watch-progress-notify-interval": "5s",
	"feature-gates":                  "InitialCorruptCheck=true",
	"snapshot-count":                 "10000",
}

// TuningBefore36 is Tuning as an etcd before 3.6 spells it: no feature
// gates, experimental flags instead.
var TuningBefore36 = map[string]string{
	"experimental-watch-progress-notify-interval": "5s",
	"experimental-initial-corrupt-check":          "true",
	"snapshot-count":                              "10000",
}

// sameSetting pairs each tuning flag with its name in the other spelling:
// extraArgs that set either name set it, and the tuning then stays out
// (etcd 3.6 refuses a flag given under both names).
var sameSetting = map[string]string{
	"watch-progress-notify-interval":              "experimental-watch-progress-notify-interval",
	"experimental-watch-progress-notify-interval": "watch-progress-notify-interval",
	"feature-gates":                      "experimental-initial-corrupt-check",
	"experimental-initial-corrupt-check": "feature-gates",
}

// first36 is the first etcd that knows Tuning's names.
var first36 = etcdversion.Minor{Major: 3, Minor: 6}

// WithTuning returns extraArgs with the tuning added, in the names etcd
// of the given version knows (Tuning for 3.6 and later and when the
// version is not known, TuningBefore36 before), where extraArgs does not
// set the same flag; extraArgs is not changed.
func WithTuning(version etcdversion.Minor, extraArgs map[string]string) map[string]string {
	tuning := Tuning
	if !version.IsZero() && version.Less(first36) {
		tuning = TuningBefore36
	}
	args := maps.Clone(extraArgs)
	if args == nil {
		args = map[string]string{}
	}
	for name, value := range tuning {
		if _, set := args[name]; set {
			continue
		}
		if other, ok := sameSetting[name]; ok {
			if _, set := extraArgs[other]; set {
				continue
			}
		}
		args[name] = value
	}
	return args
}

// EtcdVersion is the etcd version the local member runs: the embedded
// one, or the version staticPod.image's tag names (zero when the tag
// names none, a digest alone or "latest").
func EtcdVersion(cfg *config.Config) etcdversion.Minor {
	if cfg.Etcd.Runtime == config.RuntimeStaticPod {
		v, _ := etcdversion.FromImage(cfg.StaticPod.Image)
		return v
	}
	v, _ := etcdversion.Parse(embeddedversion.Version)
	return v
}
