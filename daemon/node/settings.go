package node

import (
	"net/netip"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdversion"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/runtime"
)

// Settings are what the node controller reads of the configuration,
// narrowed once when the agent (or a command's look) is wired: the
// controller sees no other field, and nothing changes them while it runs.
// The list rules, which a reload may change, are the list source's.
type Settings struct {
	// Cluster is cluster.name; Scheme names the members and their URLs.
	Cluster string
	Scheme  identity.Scheme
	// Address is node.address; when invalid, the node's address is found
	// among the local ones (Deps.Detect).
	Address netip.Addr
	// Bootstrap is how a new cluster may form (config.BootstrapMode),
	// Token its initial-cluster-token, Founder the address named by
	// cluster.founder.
	Bootstrap string
	Token     string
	Founder   string
	// Member is what the local member's spec takes.
	Member runtime.Settings
	// EtcdVersion is the etcd version the local member runs: the embedded
	// one, or the one staticPod.image's tag names; zero when not known.
	EtcdVersion etcdversion.Minor

	DataDir            string
	DataDirMustBeMount bool
	MoveAsideLimit     int
	MoveAsideWindow    time.Duration

	ReconcileInterval time.Duration
	// IdleInterval is the wait between passes once the node is settled
	// (pace); at most ReconcileInterval turns the slowing off.
	IdleInterval    time.Duration
	CallTimeout     time.Duration
	RemovalHoldDown time.Duration
	LockSection     time.Duration
	LearnerTimeout  time.Duration
}

// SettingsFrom narrows a validated configuration to the node controller's
// settings.
func SettingsFrom(cfg *config.Config) Settings {
	s := Settings{
		Cluster: cfg.Cluster.Name, Scheme: identity.SchemeFrom(cfg),
		Bootstrap: cfg.BootstrapMode(), Token: cfg.BootstrapToken(), Founder: cfg.Cluster.Founder,
		Member: runtime.SettingsFrom(cfg), EtcdVersion: runtime.EtcdVersion(cfg),
		DataDir: cfg.Etcd.DataDir, DataDirMustBeMount: cfg.Etcd.DataDirMustBeMount,
		MoveAsideLimit: cfg.Etcd.MoveAsideLimit, MoveAsideWindow: cfg.Etcd.MoveAsideWindow,
		ReconcileInterval: cfg.Agent.ReconcileInterval, IdleInterval: cfg.Agent.IdleInterval, CallTimeout: cfg.Agent.CallTimeout,
		RemovalHoldDown: cfg.Agent.RemovalHoldDown, LockSection: cfg.Agent.LockSection(), LearnerTimeout: cfg.Agent.LearnerTimeout,
	}
	if cfg.Node.Address != "" {
		s.Address = netip.MustParseAddr(cfg.Node.Address) // validated
	}
	return s
}
