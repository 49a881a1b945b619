package pacemakercluster

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

// The pure decisions of a round: who writes, whether the stored status is
// stale, whether a write is due, and which lastUpdated to send. Kept free
// of I/O so that the election rule is tested as a table.

// WriterAnnotation, on the singleton's metadata, names the pacemaker node
// whose agent claimed the writer role last: set when the agent creates the
// object, and by a PATCH (locked to the resourceVersion read) when an agent
// starts writing after another. The API server's managedFields would name
// the last writer for free, but it does not maintain them for every Update
// (the kube-apiserver 1.37.1 of our envtest records none for Create and
// Update, only for Apply), and kubectl hides them; the annotation is
// explicit, visible, and costs one call per change of writer, none at
// steady state.
const WriterAnnotation = "etcdlet.io/status-writer"

// managerPrefix starts every agent's field manager name; the pacemaker node
// name follows. The field manager is informational (see WriterAnnotation).
const managerPrefix = "etcdlet-"

// maxManagerName is the API server's limit on a field manager name.
const maxManagerName = 128

// managerName is the field manager an agent on node writes as.
func managerName(node string) string { return managerPrefix + node }

// writerLabel names a writer for humans.
func writerLabel(node string) string { return "the agent on " + node }

// role is what this agent does in a round.
type role int

const (
	// roleStandby: another agent writes, or nobody has been silent long
	// enough to be replaced.
	roleStandby role = iota
	// roleDC: this agent's node is pacemaker's DC.
	roleDC
	// roleKeep: this agent took over earlier and is still the last writer:
	// the DC's agent has not written since.
	roleKeep
	// roleTakeover: the stored status is stale; this agent takes over.
	roleTakeover
)

func (r role) String() string {
	return [...]string{"standby", "writer (DC)", "writer (took over)", "writer (taking over)"}[r]
}

func (r role) writes() bool { return r != roleStandby }

// decide applies the election rule (see the package doc). writer is the
// node of the last writer ("" when none), self this agent's node, stale
// whether the stored status has not changed for StaleAfter.
func decide(isDC bool, writer, self string, stale bool) role {
	switch {
	case isDC:
		return roleDC
	case writer == self:
		return roleKeep
	case stale:
		return roleTakeover
	default:
		return roleStandby
	}
}

// lastWriter returns the node whose agent claimed the writer role last,
// "" when none did (no object, or created by someone else).
func lastWriter(obj metav1.Object) string {
	return obj.GetAnnotations()[WriterAnnotation]
}

// observation is what this agent remembers of the stored status to tell a
// live writer from a dead one with its own clock only: the last writer and
// lastUpdated it saw, and since when it has seen them unchanged.
type observation struct {
	key   string
	since time.Time
}

// observationKey identifies one write: lastUpdated changes with every
// write (it strictly increases, see nextLastUpdated), the writer with every
// claim of the role.
func observationKey(writer string, lastUpdated metav1.Time) string {
	if writer == "" && lastUpdated.IsZero() {
		return "" // nothing written yet
	}
	return writer + "@" + lastUpdated.UTC().Format(time.RFC3339)
}

// observe returns the observation after seeing key at now: the clock
// restarts whenever the stored status changed.
func (o observation) observe(key string, now time.Time) observation {
	if o.since.IsZero() || key != o.key {
		return observation{key: key, since: now}
	}
	return o
}

// stale reports whether the observed status has not changed for after.
func (o observation) stale(now time.Time, after time.Duration) bool {
	return !o.since.IsZero() && now.Sub(o.since) >= after
}

// nextLastUpdated is the lastUpdated of a write at now over the stored
// value: now at the API's one-second precision, or stored + 1s when that is
// not later (the other writer's clock is ahead of ours, or two writes fall
// in one second). The CRD accepts an equal value, but a write must always
// change lastUpdated: it is how the other agents see that the writer is
// alive; an equal value would make the write invisible (the API server
// does not even store an identical object anew).
func nextLastUpdated(now time.Time, stored metav1.Time) metav1.Time {
	ts := now.UTC().Truncate(time.Second)
	if !stored.IsZero() && !ts.After(stored.Time) {
		ts = stored.UTC().Truncate(time.Second).Add(time.Second)
	}
	return metav1.NewTime(ts)
}

// lastWrite is what this agent remembers of its own last write.
type lastWrite struct {
	lastUpdated metav1.Time
	at          time.Time // this agent's clock at the write
}

// upToDate reports whether a writer may skip this round: the stored status
// is this agent's last write, its content equals the offered one, and the
// write is younger than refresh. The age is timed by this agent's clock
// from its own write, not from lastUpdated, which may lead the clock by the
// skew to a previous writer.
func upToDate(last lastWrite, storedLU metav1.Time, sameContent bool, now time.Time, refresh time.Duration) bool {
	return !last.at.IsZero() && last.lastUpdated.Equal(&storedLU) && sameContent && now.Sub(last.at) < refresh
}

// contentKey is the status as the API stores it, without lastUpdated: two
// statuses with the same key differ at most in lastUpdated. JSON is the
// API's own precision (seconds for times) and normalises nil and empty
// lists the way the stored object does.
func contentKey(s *status.Status, version string) (string, error) {
	c := *s
	c.LastUpdated = metav1.Time{}
	obj, err := status.ToObject(&c, version, nil)
	if err != nil {
		return "", err
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return "", fmt.Errorf("encode status: %w", err)
	}
	return string(b), nil
}
