package config

import (
	"net/netip"
	"path/filepath"
)

// ConflictsWith reports what this configuration shares with other, the
// configuration of another etcdlet instance on the same host (otherPath,
// as the messages name it): one host runs one etcdlet per cluster
// (etcdlet@<name>.service), and two of them must not meet on the host.
//
//   - A listener on the same port and an overlapping address: the second
//     bind fails, so one agent or its etcd crash-loops.
//   - A directory one of them writes (etcd.dataDir, agent.stateDir, a
//     local backup.store.directory with the same prefix) equal to or
//     inside one the other writes: one agent would move the other's data
//     aside, restore over it or expire its snapshots. The same holds for
//     an S3 bucket and prefix.
//   - The same member name (cluster.name and member IP): two members of
//     one cluster on one host, each taking the other's place.
//   - The same static-pod manifest: one kubelet pod for two clusters.
//
// Each problem names this configuration's field and value, and the rule.
func (c *Config) ConflictsWith(other *Config, otherPath string) Errors {
	var errs Errors
	c.conflictingListeners(&errs, other, otherPath)
	c.conflictingDirs(&errs, other, otherPath)
	if c.Cluster.Name == other.Cluster.Name && addrsOverlap(c.memberAddrs(), other.memberAddrs()) {
		errs.add("cluster.name", c.Cluster.Name, "%s runs a member of the same cluster on this host, with the same member name: one host runs one member of a cluster", otherPath)
	}
	if c.Etcd.Runtime == RuntimeStaticPod && other.Etcd.Runtime == RuntimeStaticPod && c.StaticPod.ManifestPath() == other.StaticPod.ManifestPath() {
		errs.add("staticPod.podName", c.StaticPod.PodName, "%s writes the same manifest %s: give each cluster's pod its own name", otherPath, c.StaticPod.ManifestPath())
	}
	return errs
}

// conflictingListeners reports a listener of c that binds a port of one
// of other's listeners on an overlapping address.
func (c *Config) conflictingListeners(errs *Errors, other *Config, otherPath string) {
	theirs := other.listeners()
	for _, l := range c.listeners() {
		for _, o := range theirs {
			if l.port == o.port && addrsOverlap(l.addrs, o.addrs) {
				errs.add(l.field, l.value, "%s (%s) of %s uses port %d too: each instance on a host needs ports of its own", o.name, o.field, otherPath, o.port)
				break
			}
		}
	}
}

// conflictingDirs reports a directory of c that is, contains or is
// inside a directory of other.
func (c *Config) conflictingDirs(errs *Errors, other *Config, otherPath string) {
	theirs := other.ownedDirs()
	for _, d := range c.ownedDirs() {
		for _, o := range theirs {
			if nested(d.path, o.path) || nested(o.path, d.path) {
				errs.add(d.field, d.path, "overlaps %s (%s) of %s: each instance on a host needs directories of its own", o.field, o.path, otherPath)
				break
			}
		}
	}
	mine, theirStore := c.Backup.Store, other.Backup.Store
	if mine.Provider == ProviderS3 && theirStore.Provider == ProviderS3 && mine.S3 != nil && theirStore.S3 != nil &&
		mine.S3.Endpoint == theirStore.S3.Endpoint && mine.S3.Bucket == theirStore.S3.Bucket && mine.Prefix == theirStore.Prefix {
		errs.add("backup.store.prefix", mine.Prefix, "%s keeps its snapshots in the same bucket %s under the same prefix: each cluster's retention would expire the other's snapshots", otherPath, mine.S3.Bucket)
	}
}

// ownedDir is a directory an agent writes and no other may.
type ownedDir struct{ field, path string }

// ownedDirs are the directories this agent writes: its data dir, its
// state dir and, for local snapshots, the directory of its prefix.
// Snapshots of two clusters may share a directory: each has its own
// prefix (cluster.name unless set) inside it.
func (c *Config) ownedDirs() []ownedDir {
	dirs := []ownedDir{{"etcd.dataDir", c.Etcd.DataDir}, {"agent.stateDir", c.Agent.StateDir}}
	if s := c.Backup.Store; s.Provider == ProviderLocal && s.Directory != "" {
		dirs = append(dirs, ownedDir{"backup.store.directory", filepath.Join(s.Directory, s.Prefix)})
	}
	return dirs
}

func addrsOverlap(a, b []netip.Addr) bool {
	for _, x := range a {
		for _, y := range b {
			if overlaps(x, y) {
				return true
			}
		}
	}
	return false
}

// ManifestPath is the static-pod manifest the agent writes:
// <manifestDir>/<podName>.yaml.
func (s StaticPod) ManifestPath() string {
	return filepath.Join(s.ManifestDir, s.PodName+".yaml")
}
