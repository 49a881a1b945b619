// Package etcdversion holds etcd's rule for which server version may run
// a member of a cluster, so that the agent refuses with the rule named
// instead of starting a member that etcd stops at once: etcd panics
// ("invalid downgrade; server version is lower than determined cluster
// version") when a server is of a lower minor than the cluster version,
// and supports upgrades one minor at a time only.
package etcdversion

import (
	"fmt"
	"strconv"
	"strings"
)

// Minor is an etcd major.minor version: the cluster version, and what the
// rules compare of a server version.
type Minor struct{ Major, Minor int }

func (m Minor) String() string { return fmt.Sprintf("%d.%d", m.Major, m.Minor) }

// IsZero reports whether the version is unknown.
func (m Minor) IsZero() bool { return m == Minor{} }

// Less reports whether m is an earlier version than o.
func (m Minor) Less(o Minor) bool {
	return m.Major < o.Major || (m.Major == o.Major && m.Minor < o.Minor)
}

// Parse reads the major and minor of an etcd version as etcd writes it
// ("3.6.0", its cluster version) or as release tags and images name it
// ("v3.6.5", "3.6.5-0"); ok is false for anything else.
func Parse(s string) (Minor, bool) {
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(s), "v"), ".", 3)
	if len(parts) < 2 {
		return Minor{}, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(strings.SplitN(parts[1], "-", 2)[0])
	if err1 != nil || err2 != nil || major < 1 || minor < 0 {
		return Minor{}, false
	}
	return Minor{Major: major, Minor: minor}, true
}

// FromImage is the etcd version an image reference's tag names
// ("registry.k8s.io/etcd:3.6.5-0", "quay.io/coreos/etcd:v3.6.5@sha256:…");
// ok is false without a tag that reads as a version (a digest alone,
// "latest").
func FromImage(image string) (Minor, bool) {
	ref, _, _ := strings.Cut(image, "@")
	name := ref[strings.LastIndex(ref, "/")+1:] // a registry's port is not a tag
	_, tag, found := strings.Cut(name, ":")
	if !found {
		return Minor{}, false
	}
	return Parse(tag)
}

// ParseRecorded reads the cluster version a data dir's backend records
// ("3.6.0"). etcd records one since 3.5, and until it has decided the
// cluster's version (its members' versions not all known yet, as right
// after a start or a join) it records its minimum, 3.0: anything below
// 3.5 is that placeholder, no version, and ok is false for it.
func ParseRecorded(s string) (Minor, bool) {
	m, ok := Parse(s)
	if !ok || m.Less(firstRecorded) {
		return Minor{}, false
	}
	return m, true
}

// firstRecorded is the first etcd version that records the cluster
// version in its backend.
var firstRecorded = Minor{Major: 3, Minor: 5}

// Lowest is the lowest of the versions that parse: the cluster version
// etcd settles on is the lowest of its members' server versions.
func Lowest(versions ...string) (Minor, bool) {
	var low Minor
	for _, v := range versions {
		if m, ok := Parse(v); ok && (low.IsZero() || m.Less(low)) {
			low = m
		}
	}
	return low, !low.IsZero()
}

// CheckMember says why an etcd server of version server must not run a
// member of a cluster at version cluster (of its data, or of the members
// that run); nil when it may. A downgrade enabled through etcd's API
// lowers the cluster version first, which this rule then allows.
func CheckMember(server, cluster Minor) error {
	switch {
	case server.IsZero() || cluster.IsZero():
		return nil // not known: etcd's own check stands
	case server.Major != cluster.Major:
		return fmt.Errorf("etcd %s cannot run a member of a cluster at version %s: another major version", server, cluster)
	case server.Less(cluster):
		return fmt.Errorf("etcd %s cannot run a member of a cluster at version %s: etcd runs no member below the cluster version "+
			"(it stops at once: invalid downgrade); run etcd %s here (staticPod.image, or an etcdlet package that embeds it), "+
			"or lower the cluster version first with etcd's downgrade (etcdlet etcd downgrade enable %s, while the cluster runs)", server, cluster, cluster, server)
	case server.Minor > cluster.Minor+1:
		next := Minor{Major: cluster.Major, Minor: cluster.Minor + 1}
		return fmt.Errorf("etcd %s cannot run a member of a cluster at version %s: etcd upgrades one minor version at a time; "+
			"run etcd %s on every member first, until the cluster version is %s", server, cluster, next, next)
	}
	return nil
}
