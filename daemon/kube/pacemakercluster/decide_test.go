package pacemakercluster

import (
	"testing"
	"time"

	etcdv1 "github.com/openshift/api/etcd/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

func TestDecide(t *testing.T) {
	const self = "b"
	tests := []struct {
		name   string
		isDC   bool
		writer string
		stale  bool
		want   role
	}{
		{"DC writes when another wrote last", true, "a", false, roleDC},
		{"DC writes when nobody wrote yet", true, "", false, roleDC},
		{"DC writes when it wrote last", true, self, false, roleDC},
		{"DC writes when a third node's agent wrote last", true, "c", false, roleDC},
		{"not DC, fresh writes by another: standby", false, "a", false, roleStandby},
		{"not DC, nothing written yet, not stale: standby", false, "", false, roleStandby},
		{"not DC, another's writes stale: take over", false, "a", true, roleTakeover},
		{"not DC, nothing written for StaleAfter: take over", false, "", true, roleTakeover},
		{"not DC, this agent wrote last: keep writing", false, self, false, roleKeep},
		{"not DC, this agent wrote last long ago: keep writing", false, self, true, roleKeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decide(tt.isDC, tt.writer, self, tt.stale); got != tt.want {
				t.Errorf("decide(dc=%v, writer=%q, stale=%v) = %s, want %s", tt.isDC, tt.writer, tt.stale, got, tt.want)
			}
		})
	}
}

// TestElectionConverges plays the rule for two agents, round by round,
// and checks that exactly one writes at steady state in each situation.
func TestElectionConverges(t *testing.T) {
	tests := []struct {
		name       string
		dcA, dcB   bool
		silentA    bool // a's agent makes no rounds
		wantWriter string
	}{
		{"a is DC", true, false, false, "a"},
		{"b is DC", false, true, false, "b"},
		{"a is DC but silent", true, false, true, "b"},
		{"no DC: the first to find it stale keeps it", false, false, false, "a"},
		{"both DC (split brain): both write", true, true, false, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				writer, key string // the stored status: last writer, observation key
				obs         = map[string]*observation{"a": {}, "b": {}}
				writes      = map[string]int{}
			)
			// turn is one agent's round at now; it reports whether it wrote.
			turn := func(self string, isDC bool, now time.Time) bool {
				o := obs[self]
				*o = o.observe(key, now)
				if !decide(isDC, writer, self, o.stale(now, 90*time.Second)).writes() {
					return false
				}
				writer, key = self, observationKey(self, metav1.NewTime(now))
				return true
			}
			now := t0
			for round := range 20 {
				now = now.Add(30 * time.Second)
				wroteA := !tt.silentA && turn("a", tt.dcA, now)
				wroteB := turn("b", tt.dcB, now.Add(time.Second))
				if round < 10 {
					continue // converging
				}
				if wroteA {
					writes["a"]++
				}
				if wroteB {
					writes["b"]++
				}
			}
			if tt.dcA && tt.dcB {
				if writes["a"] != 10 || writes["b"] != 10 {
					t.Errorf("writes at steady state = %v, want 10 each", writes)
				}
				return
			}
			if len(writes) != 1 || writes[tt.wantWriter] != 10 {
				t.Errorf("writes at steady state = %v, want only %s in every round", writes, tt.wantWriter)
			}
			if writer != tt.wantWriter {
				t.Errorf("last writer = %s, want %s", writer, tt.wantWriter)
			}
		})
	}
}

// obsStep is one round of a standby: the observation key it saw, and when.
type obsStep struct {
	key string
	at  time.Duration
}

func TestObservation(t *testing.T) {
	const after = 90 * time.Second
	tests := []struct {
		name      string
		steps     []obsStep
		wantStale bool
	}{
		{"first sight is never stale", []obsStep{{"a@1", 0}}, false},
		{"unchanged for StaleAfter", []obsStep{{"a@1", 0}, {"a@1", 60 * time.Second}, {"a@1", 90 * time.Second}}, true},
		{"unchanged just below StaleAfter", []obsStep{{"a@1", 0}, {"a@1", 89 * time.Second}}, false},
		{"a change restarts the clock", []obsStep{{"a@1", 0}, {"a@2", 60 * time.Second}, {"a@2", 120 * time.Second}}, false},
		{"nothing written for StaleAfter", []obsStep{{"", 0}, {"", 90 * time.Second}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o observation
			var now time.Time
			for _, s := range tt.steps {
				now = t0.Add(s.at)
				o = o.observe(s.key, now)
			}
			if got := o.stale(now, after); got != tt.wantStale {
				t.Errorf("stale = %v, want %v (observation %+v)", got, tt.wantStale, o)
			}
		})
	}
}

func TestNextLastUpdated(t *testing.T) {
	tests := []struct {
		name   string
		now    time.Time
		stored metav1.Time
		want   time.Time
	}{
		{"nothing stored: now at second precision", t0.Add(1500 * time.Millisecond), metav1.Time{}, t0.Add(time.Second)},
		{"stored earlier: now", t0.Add(time.Minute), metav1.NewTime(t0), t0.Add(time.Minute)},
		{"stored in the same second: one second later", t0.Add(300 * time.Millisecond), metav1.NewTime(t0), t0.Add(time.Second)},
		{"stored ahead (clock skew): one second after it", t0, metav1.NewTime(t0.Add(10 * time.Minute)), t0.Add(10*time.Minute + time.Second)},
		{"local zone: written in UTC", t0.In(time.FixedZone("X", 3600)), metav1.Time{}, t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := nextLastUpdated(tt.now, tt.stored)
			if !got.Time.Equal(tt.want) || got.Location() != time.UTC {
				t.Errorf("nextLastUpdated = %s, want %s UTC", got.Time, tt.want)
			}
			if !tt.stored.IsZero() && !got.After(tt.stored.Time) {
				t.Errorf("nextLastUpdated %s does not advance over stored %s", got.Time, tt.stored.Time)
			}
		})
	}
}

func TestUpToDate(t *testing.T) {
	const refresh = 30 * time.Second
	mine := lastWrite{lastUpdated: metav1.NewTime(t0), at: t0}
	tests := []struct {
		name   string
		last   lastWrite
		stored metav1.Time
		same   bool
		now    time.Time
		want   bool
	}{
		{"own fresh unchanged write", mine, metav1.NewTime(t0), true, t0.Add(10 * time.Second), true},
		{"refresh due", mine, metav1.NewTime(t0), true, t0.Add(refresh), false},
		{"content changed", mine, metav1.NewTime(t0), false, t0.Add(time.Second), false},
		{"another wrote since", mine, metav1.NewTime(t0.Add(time.Second)), true, t0.Add(time.Second), false},
		{"never wrote (restart)", lastWrite{}, metav1.NewTime(t0), true, t0, false},
		{"own write clamped ahead of the clock still refreshes on time", lastWrite{lastUpdated: metav1.NewTime(t0.Add(time.Hour)), at: t0},
			metav1.NewTime(t0.Add(time.Hour)), true, t0.Add(refresh), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := upToDate(tt.last, tt.stored, tt.same, tt.now, refresh); got != tt.want {
				t.Errorf("upToDate = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLastWriter(t *testing.T) {
	tests := []struct {
		name        string
		annotations map[string]string
		want        string
	}{
		{"no annotations (created by someone else)", nil, ""},
		{"other annotations only", map[string]string{"x": "y"}, ""},
		{"claimed by a", map[string]string{WriterAnnotation: "a", "x": "y"}, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &etcdv1.PacemakerCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster", Annotations: tt.annotations}}
			if got := lastWriter(obj); got != tt.want {
				t.Errorf("lastWriter = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestContentKey(t *testing.T) {
	base := status.Build(cluster("a"), 2, nil, t0)
	later := *base
	later.LastUpdated = metav1.NewTime(t0.Add(time.Hour))
	changed := status.Build(offline(cluster("a")), 2, nil, t0)
	for _, version := range []string{status.VersionV1, status.VersionV1alpha1} {
		t.Run(version, func(t *testing.T) {
			k1, err1 := contentKey(base, version)
			k2, err2 := contentKey(&later, version)
			k3, err3 := contentKey(changed, version)
			if err1 != nil || err2 != nil || err3 != nil {
				t.Fatal(err1, err2, err3)
			}
			if k1 != k2 {
				t.Error("statuses differing only in lastUpdated have different keys")
			}
			if k1 == k3 {
				t.Error("different statuses have the same key")
			}
		})
	}
}

func TestNeedsRound(t *testing.T) {
	writing := ranWith{done: true, isDC: true, known: true, writing: true, key: "k"}
	standby := ranWith{done: true, known: true, key: "k"}
	known := Input{Built: &etcdv1.PacemakerCluster{}}
	tests := []struct {
		name string
		ran  ranWith
		in   Input
		key  string
		want bool
	}{
		{"first offer", ranWith{}, known, "k", true},
		{"writer, same status", writing, Input{Built: known.Built, IsDC: true}, "k", false},
		{"writer, changed status", writing, Input{Built: known.Built, IsDC: true}, "k2", true},
		{"writer loses DC", writing, known, "k", true},
		{"state becomes unknown", writing, Input{IsDC: true}, "", true},
		{"standby, changed status: wait for the refresh", standby, known, "k2", false},
		{"standby becomes DC", standby, Input{Built: known.Built, IsDC: true}, "k", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := needsRound(tt.ran, tt.in, tt.key); got != tt.want {
				t.Errorf("needsRound = %v, want %v", got, tt.want)
			}
		})
	}
}
