package membership

import (
	"strings"
	"testing"
)

func alarmed(alarms ...string) memberOpt { return func(m *Member) { m.Health.Alarms = alarms } }

func staleIn(o Observation, ids ...uint64) Observation { o.Stale = ids; return o }

func TestQuorum(t *testing.T) {
	for voters, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4} {
		if got := Quorum(voters); got != want {
			t.Errorf("Quorum(%d) = %d, want %d", voters, got, want)
		}
	}
}

// checkRule compares a rule's answer with want: "" allowed, else a part
// of the refusal.
func checkRule(t *testing.T, rule string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s refused: %v", rule, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s = %v, want a refusal saying %q", rule, err, want)
	}
}

func TestHasQuorum(t *testing.T) {
	for _, tc := range []struct {
		name string
		obs  Observation
		want string
	}{
		{"three in raft", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2), member("10.0.0.3", 3)), ""},
		{"one of three down", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2), member("10.0.0.3", 3, down)), ""},
		{"two of three down", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2, down), member("10.0.0.3", 3, down)), "1 of 3 voters are healthy, quorum is 2"},
		{"an alarm keeps a member in the quorum", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2, alarmed("NOSPACE")), member("10.0.0.3", 3, down)), ""},
		{"a stale incarnation does not count", staleIn(obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2), member("10.0.0.3", 3, down)), 2), "1 of 3 voters are healthy"},
		{"learners do not vote", obs(1, member("2001:db8::1", 1), member("2001:db8::2", 2, learner), member("2001:db8::3", 3, learner)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) { checkRule(t, "HasQuorum", tc.obs.HasQuorum(), tc.want) })
	}
}

func TestMayRemove(t *testing.T) {
	three := func(opts3 ...memberOpt) Observation {
		return obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2), member("10.0.0.3", 3, opts3...))
	}
	for _, tc := range []struct {
		name string
		obs  Observation
		id   uint64
		want string
	}{
		{"a healthy voter of three", three(), 3, ""},
		{"a dead voter of three", three(down), 3, ""},
		{"a healthy voter while another is down", three(down), 2, "2 of 3 voters are healthy; removing it would leave 1 healthy of 2, below quorum 2"},
		{"a healthy voter of four, one down", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2), member("10.0.0.3", 3), member("10.0.0.4", 4, down)), 3, ""},
		{"the last voter", obs(1, member("10.0.0.1", 1)), 1, "last voter"},
		{"a learner, whatever the health of the rest", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2, down), member("10.0.0.3", 3, learner)), 3, ""},
		{"a stale incarnation counts as dead", staleIn(three(), 2), 2, ""},
		{"an alarmed voter still votes", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2, alarmed("NOSPACE")), member("10.0.0.3", 3, down)), 2, "would leave 1 healthy of 2"},
		{"a member not in the cluster", three(), 9, ""},
		{"IPv6 members", obs(1, member("2001:db8::1", 1), member("2001:db8::2", 2), member("2001:db8::3", 3, down)), 1, "below quorum 2"},
	} {
		t.Run(tc.name, func(t *testing.T) { checkRule(t, "MayRemove", tc.obs.MayRemove(tc.id), tc.want) })
	}
}

func TestMayStopAndMayRestart(t *testing.T) {
	for _, tc := range []struct {
		name              string
		obs               Observation
		id                uint64
		wantStop, wantRun string
	}{
		{"three healthy", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2), member("10.0.0.3", 3)), 1, "", ""},
		{"another of three down", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2), member("10.0.0.3", 3, down)), 1,
			"1 other of 3 voters are healthy; quorum needs 2", "etcd-main-10.0.0.3 is not healthy (dial tcp"},
		{"itself down", obs(2, member("10.0.0.1", 1, down), member("10.0.0.2", 2), member("10.0.0.3", 3)), 1, "", ""},
		{"one of five down: a stop keeps quorum, a planned restart waits", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2), member("10.0.0.3", 3),
			member("10.0.0.4", 4), member("10.0.0.5", 5, down)), 1, "", "etcd-main-10.0.0.5 is not healthy"},
		{"another with an alarm", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2, alarmed("NOSPACE")), member("10.0.0.3", 3)), 1, "", "etcd-main-10.0.0.2 is not healthy (NOSPACE)"},
		{"a learner joining", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2), member("10.0.0.3", 3), member("10.0.0.4", 4, learner)), 1, "", "etcd-main-10.0.0.4 is a learner"},
		{"two voters", obs(1, member("10.0.0.1", 1), member("10.0.0.2", 2)), 1, "quorum needs 2", "a cluster of 2 voters has no quorum without this member"},
		{"one voter", obs(1, member("10.0.0.1", 1)), 1, "0 other of 1", "a cluster of 1 voters has no quorum"},
		{"another is a stale incarnation", staleIn(obs(1, member("2001:db8::1", 1), member("2001:db8::2", 2), member("2001:db8::3", 3)), 3), 1,
			"1 other of 3", "not healthy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkRule(t, "MayStop", tc.obs.MayStop(tc.id), tc.wantStop)
			checkRule(t, "MayRestart", tc.obs.MayRestart(tc.id), tc.wantRun)
		})
	}
}

func TestMayLeadAndTransferee(t *testing.T) {
	leader := member("10.0.0.1", 1, applied(5000))
	behind := member("10.0.0.3", 3, applied(5000-MaxLeaderLag-1))
	o := obs(1, leader, member("10.0.0.2", 2, applied(4990)), behind, member("10.0.0.4", 4, applied(5000), alarmed("NOSPACE")),
		member("10.0.0.5", 5, learner), member("10.0.0.6", 6, down), member("10.0.0.7", 7, applied(5000), alarmed("CORRUPT")))
	for _, tc := range []struct {
		id   uint64
		want string
	}{
		{1, ""},
		{2, ""},
		{3, "applied entries behind the leader (at most 1000)"},
		{4, "not healthy: alarm NOSPACE"},
		{5, "a learner cannot lead"},
		{6, "not healthy: dial tcp"},
		{7, "alarm CORRUPT"},
		{9, "not in the cluster"},
	} {
		checkRule(t, "MayLead("+IDString(tc.id)+")", o.MayLead(tc.id), tc.want)
	}
	if err := staleIn(o, 2).MayLead(2); err == nil || !strings.Contains(err.Error(), "earlier incarnation") {
		t.Errorf("a stale incarnation may lead: %v", err)
	}

	pick := func(o Observation, leaving uint64, eligible, prefer func(Member) bool) uint64 {
		m, ok := o.Transferee(leaving, eligible, prefer)
		if !ok {
			return 0
		}
		return m.ID
	}
	// Without an alarm first, even when one with an alarm is further along.
	if got := pick(o, 1, nil, nil); got != 2 {
		t.Errorf("transferee %x, want 2: caught up, no alarm", got)
	}
	// Among equals, the one furthest along, then the lowest ID.
	even := obs(1, member("10.0.0.1", 1), member("10.0.0.9", 9, applied(100)), member("10.0.0.8", 8, applied(100)), member("10.0.0.7", 7, applied(99)))
	if got := pick(even, 1, nil, nil); got != 8 {
		t.Errorf("transferee %x, want 8: furthest along, lowest ID", got)
	}
	if got := pick(even, 1, func(m Member) bool { return m.ID != 8 }, nil); got != 9 {
		t.Errorf("transferee %x among the eligible, want 9", got)
	}
	if got := pick(even, 1, nil, func(m Member) bool { return m.ID == 7 }); got != 7 {
		t.Errorf("transferee %x, want the preferred 7", got)
	}
	// NOSPACE everywhere: leadership still moves (a defragmentation must
	// reach the leader); a CORRUPT member never leads.
	full := obs(1, member("10.0.0.1", 1, alarmed("NOSPACE")), member("10.0.0.2", 2, alarmed("NOSPACE")), member("10.0.0.3", 3, alarmed("CORRUPT")))
	if got := pick(full, 1, nil, nil); got != 2 {
		t.Errorf("transferee %x under NOSPACE everywhere, want 2", got)
	}
	if got := pick(obs(1, member("10.0.0.1", 1), member("10.0.0.3", 3, alarmed("CORRUPT")), member("10.0.0.4", 4, down)), 1, nil, nil); got != 0 {
		t.Errorf("transferee %x; only a CORRUPT and a dead member remain, want none", got)
	}
}
