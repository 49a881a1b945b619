package pacemakercluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	etcdv1 "github.com/openshift/api/etcd/v1"
	etcdv1alpha1 "github.com/openshift/api/etcd/v1alpha1"

	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

// Defaults of Options.
const (
	DefaultRefreshInterval = 30 * time.Second
	DefaultCallTimeout     = 10 * time.Second
)

// ResultIdle is returned by SyncOnce when there is nothing to write
// (pacemaker's state is unknown). It is not an attempt and is not counted
// by the Tracker.
const ResultIdle = "idle"

// ErrRefused marks a status that fails the CRD's rules (status.Validate)
// and was therefore not sent.
var ErrRefused = errors.New("status refused before writing")

// Options configure a Writer.
type Options struct {
	// Client reaches the PacemakerCluster resource of Version
	// (kube.Clients.PacemakerClusters).
	Client kube.API
	// Version is status.VersionV1 or status.VersionV1alpha1.
	Version string
	// NodeName is this agent's pacemaker node name: the writer identity.
	NodeName string
	// RefreshInterval: an unchanged status is rewritten this often.
	// Default 30s.
	RefreshInterval time.Duration
	// StaleAfter: a status unchanged for this long is taken over by an
	// agent not on the DC node. Default 3 × RefreshInterval; at least
	// twice RefreshInterval, so that a live writer is never taken over.
	StaleAfter time.Duration
	// CallTimeout bounds every API call. Default 10s.
	CallTimeout time.Duration
	// Tracker records every round; nil: a private one.
	Tracker *kube.Tracker
	// Recorder receives Events; nil: none.
	Recorder kube.Recorder
	// Log receives role changes and refusals; nil: slog.Default().
	Log *slog.Logger
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// Input is one offer from the pacemaker poll.
type Input struct {
	// Built is the status built from pacemaker's state; nil when the state
	// is unknown (then nothing is written).
	Built status.Object
	// IsDC tells whether this agent's node is pacemaker's DC.
	IsDC bool
}

// CallCounts are the API calls a Writer made, by verb: Update is the
// status write, Patch the claim of the writer role (WriterAnnotation).
type CallCounts struct {
	Get, Create, Update, Patch int64
}

// Total is the number of calls.
func (c CallCounts) Total() int64 { return c.Get + c.Create + c.Update + c.Patch }

// Writer writes the PacemakerCluster status. Offer and Calls are safe for
// concurrent use; rounds (SyncOnce, Run) are serialised.
type Writer struct {
	o       Options
	manager string // field manager name
	newObj  func() status.Object

	// round holds the state of rounds, guarded by its mutex.
	round struct {
		sync.Mutex
		obs     observation
		last    lastWrite
		role    role
		refused string // the refusal last logged
	}

	// offer holds the latest offer and what the last round ran with.
	offer struct {
		sync.Mutex
		in      Input
		at      time.Time // this agent's clock at the offer
		present bool
		ran     ranWith
	}
	kick chan struct{}

	calls struct{ get, create, update, patch atomic.Int64 }

	// backoff spaces out retries in Run; tests shorten it.
	backoff kube.Backoff
}

// ranWith is what the last round was run with, to tell which offers need
// a round at once.
type ranWith struct {
	done, isDC, known, writing bool
	key                        string
}

// New checks o, fills in the defaults and returns a Writer.
func New(o Options) (*Writer, error) {
	if o.Client == nil {
		return nil, errors.New("pacemakercluster writer: no client")
	}
	newObj, err := objectFactory(o.Version)
	if err != nil {
		return nil, fmt.Errorf("pacemakercluster writer: %w", err)
	}
	manager := managerName(o.NodeName)
	switch {
	case o.NodeName == "":
		return nil, errors.New("pacemakercluster writer: no node name (the writer identity)")
	case len(manager) > maxManagerName:
		return nil, fmt.Errorf("pacemakercluster writer: node name %q too long: the field manager %q exceeds the API's %d characters", o.NodeName, manager, maxManagerName)
	}
	setDefaults(&o)
	if o.StaleAfter < 2*o.RefreshInterval {
		return nil, fmt.Errorf("pacemakercluster writer: staleAfter %s below twice refreshInterval %s: a live writer would be taken over", o.StaleAfter, o.RefreshInterval)
	}
	w := &Writer{o: o, manager: manager, newObj: newObj, kick: make(chan struct{}, 1)}
	w.backoff = kube.Backoff{Base: time.Second, Max: time.Minute}
	return w, nil
}

func setDefaults(o *Options) {
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = DefaultRefreshInterval
	}
	if o.StaleAfter <= 0 {
		o.StaleAfter = 3 * o.RefreshInterval
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.Tracker == nil {
		o.Tracker = kube.NewTracker("PacemakerCluster "+status.ObjectName, nil, nil)
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// objectFactory returns the constructor of the typed object of version.
func objectFactory(version string) (func() status.Object, error) {
	switch version {
	case status.VersionV1:
		return func() status.Object { return &etcdv1.PacemakerCluster{} }, nil
	case status.VersionV1alpha1:
		return func() status.Object { return &etcdv1alpha1.PacemakerCluster{} }, nil
	default:
		return nil, fmt.Errorf("unknown PacemakerCluster API version %q (want %s or %s)", version, status.VersionV1, status.VersionV1alpha1)
	}
}

// Calls returns the API calls made so far.
func (w *Writer) Calls() CallCounts {
	return CallCounts{Get: w.calls.get.Load(), Create: w.calls.create.Load(), Update: w.calls.update.Load(),
		Patch: w.calls.patch.Load()}
}

// Offer hands the writer the latest poll's outcome; it never blocks, and
// the latest offer wins. Run acts on it at once only when it matters (the
// first offer, a change of DC or of known/unknown state, or a changed
// status while this agent writes); otherwise at the next refresh.
func (w *Writer) Offer(in Input) {
	key := w.keyOf(in.Built)
	now := w.o.Now()
	o := &w.offer
	o.Lock()
	kick := needsRound(o.ran, in, key)
	o.in, o.at, o.present = in, now, true
	o.Unlock()
	if kick {
		select {
		case w.kick <- struct{}{}:
		default: // a round is already pending; it takes the latest offer
		}
	}
}

// needsRound tells whether an offer must be acted on now rather than at
// the next refresh: the first one, a change of DC or of known/unknown, or
// a changed status while this agent writes. A standby's rounds only
// observe the writer, which the refresh does; this keeps a standby at one
// GET per RefreshInterval whatever the poll rate.
func needsRound(ran ranWith, in Input, key string) bool {
	switch {
	case !ran.done, in.IsDC != ran.isDC, (in.Built != nil) != ran.known:
		return true
	default:
		return ran.writing && key != ran.key
	}
}

// keyOf is the content key of a built status, "" when there is none or it
// cannot be read (the round then reports the error).
func (w *Writer) keyOf(obj status.Object) string {
	if obj == nil {
		return ""
	}
	s, _, err := status.FromObject(obj)
	if err != nil || s == nil {
		return ""
	}
	key, err := contentKey(s, w.o.Version)
	if err != nil {
		return ""
	}
	return key
}

// latest returns the latest offer and when it was made.
func (w *Writer) latest() (in Input, at time.Time, ok bool) {
	o := &w.offer
	o.Lock()
	defer o.Unlock()
	return o.in, o.at, o.present
}

// noteRan records what a round ran with, for needsRound.
func (w *Writer) noteRan(in Input, key string, writing bool) {
	o := &w.offer
	o.Lock()
	o.ran = ranWith{done: true, isDC: in.IsDC, known: in.Built != nil, writing: writing, key: key}
	o.Unlock()
}

// Run writes until ctx ends: on offers that matter, every RefreshInterval,
// and on backoff after a failure. It never blocks Offer.
func (w *Writer) Run(ctx context.Context) {
	timer := time.NewTimer(w.o.RefreshInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		case <-timer.C:
		}
		timer.Reset(w.runRound(ctx))
	}
}

// runRound runs one round on the latest offer and returns the wait until
// the next one.
func (w *Writer) runRound(ctx context.Context) time.Duration {
	in, at, ok := w.latest()
	switch age := w.o.Now().Sub(at); {
	case !ok:
		w.o.Tracker.Idle("no pacemaker status offered yet")
		return w.o.RefreshInterval
	case age > w.o.StaleAfter:
		// The poll has stopped offering: rewriting its last status with a
		// fresh lastUpdated would hide that. Stay silent so that the
		// status goes stale and the other agent takes over.
		w.o.Tracker.Idle(fmt.Sprintf("nothing written: no pacemaker status offered for %s", age.Round(time.Second)))
		return w.o.RefreshInterval
	}
	if _, err := w.SyncOnce(ctx, in); err != nil {
		return w.backoff.Next()
	}
	w.backoff.Reset()
	return w.untilRefresh()
}

// untilRefresh is the wait until the next refresh: RefreshInterval after
// this agent's last write while it writes (so that writes stay exactly one
// interval apart even when offers add rounds in between), else
// RefreshInterval.
func (w *Writer) untilRefresh() time.Duration {
	r := &w.round
	r.Lock()
	defer r.Unlock()
	if !r.role.writes() || r.last.at.IsZero() {
		return w.o.RefreshInterval
	}
	return max(w.o.RefreshInterval-w.o.Now().Sub(r.last.at), 10*time.Millisecond)
}
