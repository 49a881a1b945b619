package etcdversion

import (
	"fmt"
	"strconv"
	"strings"
)

// Floor is the lowest patch release of a minor that may take part in the
// upgrade to the next minor: earlier patches leave data or state that the
// next minor misreads. Advisory says where etcd says so, and why.
type Floor struct {
	Minor    Minor
	Patch    int
	Advisory string
}

func (f Floor) String() string { return fmt.Sprintf("%s.%d", f.Minor, f.Patch) }

// Floors are the patch floors etcd's upgrade guides name, by minor.
var Floors = []Floor{
	{Minor: Minor{Major: 3, Minor: 5}, Patch: 26, Advisory: "etcd's 3.5 to 3.6 upgrade guide: 3.5.20 stops voters coming back as learners " +
		`("too many learner member"), 3.5.24 to 3.5.26 stop removed members coming back (the "zombie members" advisory, etcd.io/blog/2025/zombie_members_upgrade)`},
	{Minor: Minor{Major: 3, Minor: 6}, Patch: 11, Advisory: "etcd's 3.6 to 3.7 upgrade guide: earlier 3.6 patch releases may not be compatible with a rolling upgrade to 3.7"},
}

// FloorOf is the patch floor of a minor; ok is false when etcd names none.
func FloorOf(m Minor) (Floor, bool) {
	for _, f := range Floors {
		if f.Minor == m {
			return f, true
		}
	}
	return Floor{}, false
}

// RunningVersion is a member's name and the etcd version it runs.
type RunningVersion struct{ Member, Version string }

// CheckPatchFloor says why etcd server must not start beside members that
// run the versions given: when it would be the first member of a minor
// above theirs (a rolling upgrade begins), every member of the older minor
// must run that minor's patch floor or later first; nil when they do, when
// server is of their minor, or when nothing is known. Members whose
// version is not known are passed over: only versions that answer can be
// judged. Once a member runs server's minor, the upgrade is under way, and
// refusing more of them would only take members away from the cluster.
func CheckPatchFloor(server Minor, running []RunningVersion) error {
	if server.IsZero() {
		return nil
	}
	for _, r := range running {
		if m, ok := Parse(r.Version); ok && m == server {
			return nil
		}
	}
	for _, r := range running {
		m, ok := Parse(r.Version)
		if !ok || m.Major != server.Major || m.Minor+1 != server.Minor {
			continue
		}
		floor, ok := FloorOf(m)
		patch, known := patchOf(r.Version)
		if ok && known && patch < floor.Patch {
			return fmt.Errorf("etcd %s does not start beside member %s, which runs etcd %s: a rolling upgrade to %s needs every %s member at %s or later first (%s); "+
				"upgrade the %s members to %s or later (a patch upgrade, one at a time), then this one",
				server, r.Member, r.Version, server, m, floor, floor.Advisory, m, floor)
		}
	}
	return nil
}

// patchOf reads the patch of a version ("3.5.21", "v3.5.21-0").
func patchOf(v string) (int, bool) {
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(v), "v"), ".", 3)
	if len(parts) < 3 {
		return 0, false
	}
	digits := parts[2]
	if i := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		digits = digits[:i]
	}
	p, err := strconv.Atoi(digits)
	return p, err == nil
}
