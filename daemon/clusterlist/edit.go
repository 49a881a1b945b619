package clusterlist

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/membership"
)

// Edit kinds: etcdlet members add, remove and set.
const (
	Add    = "add"
	Remove = "remove"
	Set    = "set"
)

// Edit is one change an operator asks for.
type Edit struct {
	Kind  string
	Addrs []netip.Addr
}

func (e Edit) String() string {
	return e.Kind + " " + strings.Join(identity.AddrStrings(e.Addrs), " ")
}

// Apply returns the list after the edit, in the list's order (added
// addresses last). An address added that is listed already, or removed
// that is not, is an error: the operator's picture of the list is wrong,
// and the edit would not do what they meant.
func (e Edit) Apply(current []netip.Addr) ([]netip.Addr, error) {
	switch e.Kind {
	case Set:
		return slices.Clone(e.Addrs), nil
	case Add:
		next := slices.Clone(current)
		for _, a := range e.Addrs {
			if slices.Contains(next, a) {
				return nil, fmt.Errorf("%s is listed already", a)
			}
			next = append(next, a)
		}
		return next, nil
	case Remove:
		next := slices.Clone(current)
		for _, a := range e.Addrs {
			i := slices.Index(next, a)
			if i < 0 {
				return nil, fmt.Errorf("%s is not listed (the list: %s)", a, strings.Join(identity.AddrStrings(current), " "))
			}
			next = slices.Delete(next, i, i+1)
		}
		return next, nil
	}
	return nil, fmt.Errorf("unknown edit %q", e.Kind)
}

// Pending says what of the stored list the cluster has not carried out
// yet, one line per member or address: the change in flight. Empty when
// the members are exactly the listed ones, every one a started voter.
func Pending(listed []identity.Member, members []membership.Member) []string {
	m := membership.Match(listed, members)
	var out []string
	for _, d := range m.Missing {
		out = append(out, fmt.Sprintf("%s: listed, not a member yet", d.IP))
	}
	for _, p := range m.Matched {
		switch {
		case !p.Member.Started():
			out = append(out, fmt.Sprintf("%s: a member whose etcd has not started yet", p.Desired.IP))
		case p.Member.IsLearner:
			out = append(out, fmt.Sprintf("%s: a learner, not promoted yet", p.Desired.IP))
		}
	}
	for _, x := range m.Extra {
		out = append(out, fmt.Sprintf("%s (%s): a member, no longer listed", x.Name, strings.Join(x.PeerURLs, " ")))
	}
	for _, c := range m.Conflicts {
		out = append(out, fmt.Sprintf("%s: %s", c.Desired.IP, c.Reason))
	}
	slices.Sort(out)
	return out
}

// TakesBack tells whether the edit only removes listed addresses that are
// not voters yet: it takes back a join that has not finished (a host that
// never came up), which is always allowed while a change is in flight.
func (e Edit) TakesBack(listed []identity.Member, members []membership.Member) bool {
	if e.Kind != Remove {
		return false
	}
	m := membership.Match(listed, members)
	voting := map[netip.Addr]bool{}
	for _, p := range m.Matched {
		voting[p.Desired.IP] = p.Member.Started() && !p.Member.IsLearner
	}
	for _, a := range e.Addrs {
		if voting[a] {
			return false
		}
	}
	return true
}
