package pacemakercluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

// maxAttempts bounds the attempts of one round that lose a race (conflict,
// a create or claim racing another agent's, the object deleted under us).
// Each lost race means another write succeeded, so with two agents a few
// suffice; a round that still loses fails and Run retries it on backoff.
const maxAttempts = 5

// errRace marks an attempt that lost a race and is re-run from the GET.
var errRace = errors.New("lost a race with another write")

// SyncOnce runs one round with in: decide who writes, and write if this
// agent does and the stored status is not current. It returns one of
// kube.ResultWritten, ResultUnchanged, ResultStandby, ResultError, or
// ResultIdle when in carries no status, and records the round in the
// Tracker.
func (w *Writer) SyncOnce(ctx context.Context, in Input) (string, error) {
	r := &w.round
	r.Lock()
	defer r.Unlock()
	if in.Built == nil {
		w.o.Tracker.Idle("nothing written: pacemaker state unknown")
		w.noteRan(in, "", false)
		return ResultIdle, nil
	}
	result, detail, key, err := w.sync(ctx, in)
	w.noteRan(in, key, r.role.writes())
	if err != nil {
		w.o.Tracker.Failed(w.o.Now(), err)
		return kube.ResultError, err
	}
	w.o.Tracker.Succeeded(w.o.Now(), result, detail)
	return result, nil
}

// sync runs the attempts of one round. The caller holds w.round.
func (w *Writer) sync(ctx context.Context, in Input) (result, detail, key string, err error) {
	desired, _, err := status.FromObject(in.Built)
	if err != nil {
		return "", "", "", fmt.Errorf("read the offered status: %w", err)
	}
	if key, err = contentKey(desired, w.o.Version); err != nil {
		return "", "", "", fmt.Errorf("read the offered status: %w", err)
	}
	for attempt := 1; ; attempt++ {
		result, detail, err = w.attempt(ctx, in.IsDC, desired, key)
		if !errors.Is(err, errRace) {
			return result, detail, key, err
		}
		if attempt == maxAttempts {
			return "", "", key, fmt.Errorf("write PacemakerCluster status: gave up after %d attempts: %w", maxAttempts, err)
		}
		w.o.Log.Debug("PacemakerCluster write raced another; reading it again", "attempt", attempt, "error", err)
		if err := pauseAfterRace(ctx, attempt); err != nil {
			return "", "", key, err
		}
	}
}

// pauseAfterRace waits a random few milliseconds, growing with attempt,
// before a lost race is re-run. Two agents that both claim the writer role
// (a split brain: both see their node as DC) would otherwise re-read and
// re-claim in lockstep, each claim breaking the other's pending update.
func pauseAfterRace(ctx context.Context, attempt int) error {
	t := time.NewTimer(rand.N(time.Duration(attempt) * 10 * time.Millisecond)) //nolint:gosec // G404: jitter, not a secret
	defer t.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("write PacemakerCluster status: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

// storedView is what a round reads from the stored object.
type storedView struct {
	obj    status.Object  // nil when the singleton does not exist
	status *status.Status // nil when it has no status
	writer string         // the last writer's node, "" when none
}

func (v storedView) lastUpdated() metav1.Time {
	if v.status == nil {
		return metav1.Time{}
	}
	return v.status.LastUpdated
}

func readStored(obj status.Object) (storedView, error) {
	if obj == nil {
		return storedView{}, nil
	}
	s, has, err := status.FromObject(obj)
	if err != nil {
		return storedView{}, fmt.Errorf("read stored PacemakerCluster: %w", err)
	}
	v := storedView{obj: obj, writer: lastWriter(obj)}
	if has {
		v.status = s
	}
	return v, nil
}

// attempt is one GET, the decision, and at most one write. The caller
// holds w.round.
func (w *Writer) attempt(ctx context.Context, isDC bool, desired *status.Status, key string) (result, detail string, err error) {
	obj, err := w.get(ctx)
	if err != nil {
		return "", "", err
	}
	stored, err := readStored(obj)
	if err != nil {
		return "", "", err
	}
	r := &w.round
	now := w.o.Now()
	r.obs = r.obs.observe(observationKey(stored.writer, stored.lastUpdated()), now)
	unchangedFor := now.Sub(r.obs.since)
	ro := decide(isDC, stored.writer, w.o.NodeName, r.obs.stale(now, w.o.StaleAfter))
	w.noteRole(ro, stored.writer)
	if !ro.writes() {
		return kube.ResultStandby, standbyDetail(stored.writer), nil
	}
	if upToDate(r.last, stored.lastUpdated(), w.sameContent(stored, key), now, w.o.RefreshInterval) {
		return kube.ResultUnchanged, w.writerDetail(ro), nil
	}
	lu, err := w.write(ctx, stored, desired, now)
	if err != nil {
		return "", "", err
	}
	r.last = lastWrite{lastUpdated: lu, at: now}
	if ro == roleTakeover {
		w.announceTakeover(stored.writer, unchangedFor)
	}
	return kube.ResultWritten, w.writerDetail(ro), nil
}

// sameContent compares the stored status with the offered one, apart from
// lastUpdated; only needed when the stored status is this agent's.
func (w *Writer) sameContent(stored storedView, key string) bool {
	if stored.status == nil || stored.writer != w.o.NodeName {
		return false
	}
	k, err := contentKey(stored.status, w.o.Version)
	return err == nil && k == key
}

// write sends desired over the stored object: checked first, then the
// singleton created (without status, claimed by this agent) when missing,
// or the writer role claimed when another agent held it, then /status
// updated with the resourceVersion read. It returns the lastUpdated
// written.
func (w *Writer) write(ctx context.Context, stored storedView, desired *status.Status, now time.Time) (metav1.Time, error) {
	s := *desired
	s.LastUpdated = nextLastUpdated(now, stored.lastUpdated())
	obj, err := status.ToObject(&s, w.o.Version, stored.obj)
	if err != nil {
		return metav1.Time{}, err
	}
	if err := status.Validate(obj, stored.obj); err != nil {
		return metav1.Time{}, w.refuse(err)
	}
	w.round.refused = ""
	base := stored.obj
	switch {
	case base == nil:
		base, err = w.create(ctx)
	case stored.writer != w.o.NodeName:
		base, err = w.claim(ctx, base)
	}
	if err != nil {
		return metav1.Time{}, err
	}
	if base != stored.obj {
		// The update must carry the resourceVersion of the create or claim.
		if obj, err = status.ToObject(&s, w.o.Version, base); err != nil {
			return metav1.Time{}, err
		}
	}
	return s.LastUpdated, w.update(ctx, obj)
}

// refuse reports a status that fails the CRD's rules: logged and recorded
// as an Event once per distinct error (the poll offers the same status
// again and again), returned every time.
func (w *Writer) refuse(err error) error {
	if msg := err.Error(); msg != w.round.refused {
		w.round.refused = msg
		w.o.Log.Error("PacemakerCluster status not written: it fails the CRD's validation", "node", w.o.NodeName, "error", err)
		w.event(corev1.EventTypeWarning, kube.ReasonPacemakerStatusRefused, "etcdlet on %s did not write the PacemakerCluster status: it fails the CRD's validation: %v", w.o.NodeName, err)
	}
	return fmt.Errorf("%w: %w", ErrRefused, err)
}

func (w *Writer) announceTakeover(from string, unchangedFor time.Duration) {
	who := "no etcdlet agent" // nothing written yet, or written by another tool
	if from != "" {
		who = writerLabel(from)
	}
	d := unchangedFor.Round(time.Second)
	w.o.Log.Warn("took over writing the PacemakerCluster status from a stale writer", "node", w.o.NodeName, "lastWriter", from, "unchangedFor", d)
	w.event(corev1.EventTypeNormal, kube.ReasonPacemakerStatusWriterTakeover, "etcdlet on %s took over writing the PacemakerCluster status: its node is not pacemaker's DC, but the status written by %s has not changed for %s", w.o.NodeName, who, d)
}

func (w *Writer) event(eventtype, reason, format string, args ...any) {
	if w.o.Recorder != nil {
		w.o.Recorder.Eventf(eventtype, reason, format, args...)
	}
}

// noteRole logs changes of role, not every round's.
func (w *Writer) noteRole(ro role, writer string) {
	if ro == w.round.role {
		return
	}
	w.o.Log.Info("PacemakerCluster status writer role changed", "node", w.o.NodeName, "from", w.round.role.String(), "to", ro.String(), "lastWriter", writer)
	w.round.role = ro
}

func standbyDetail(writer string) string {
	if writer == "" {
		return "standby: no etcdlet agent writes the status yet; waiting for the agent on pacemaker's DC node"
	}
	return "standby: " + writerLabel(writer) + " writes the status"
}

func (w *Writer) writerDetail(ro role) string {
	if ro == roleDC {
		return "writing: " + w.o.NodeName + " is pacemaker's DC node"
	}
	return "writing: took over from a stale writer; the agent on pacemaker's DC node has not written since"
}

// The API calls, each bounded by CallTimeout and counted.

func (w *Writer) get(ctx context.Context) (status.Object, error) {
	ctx, cancel := context.WithTimeout(ctx, w.o.CallTimeout)
	defer cancel()
	w.calls.get.Add(1)
	obj := w.newObj()
	err := w.o.Client.Get(ctx, types.NamespacedName{Name: status.ObjectName}, obj)
	switch {
	case err == nil:
		return obj, nil
	case kube.IsResourceMissing(err):
		return nil, fmt.Errorf("get PacemakerCluster %s/%s: %w (is the PacemakerCluster CRD of version %s installed?)", w.o.Version, status.ObjectName, err, w.o.Version)
	case apierrors.IsNotFound(err):
		return nil, nil
	default:
		return nil, fmt.Errorf("get PacemakerCluster %s/%s: %w", w.o.Version, status.ObjectName, err)
	}
}

// create makes the singleton without status (the API server strips status
// on create). Another agent creating it first is a lost race.
func (w *Writer) create(ctx context.Context) (status.Object, error) {
	ctx, cancel := context.WithTimeout(ctx, w.o.CallTimeout)
	defer cancel()
	w.calls.create.Add(1)
	obj := w.newObj()
	obj.SetName(status.ObjectName)
	obj.SetAnnotations(map[string]string{WriterAnnotation: w.o.NodeName})
	err := w.o.Client.Create(ctx, "", obj, w.manager)
	switch {
	case err == nil:
		return obj, nil
	case apierrors.IsAlreadyExists(err):
		return nil, fmt.Errorf("create PacemakerCluster %s/%s: %w: %w", w.o.Version, status.ObjectName, errRace, err)
	default:
		return nil, fmt.Errorf("create PacemakerCluster %s/%s: %w", w.o.Version, status.ObjectName, err)
	}
}

// claim sets WriterAnnotation to this agent's node by a merge patch locked
// to stored's resourceVersion: a write in between fails with a conflict,
// so two agents claiming at once cannot both succeed on the same version.
func (w *Writer) claim(ctx context.Context, stored status.Object) (status.Object, error) {
	ctx, cancel := context.WithTimeout(ctx, w.o.CallTimeout)
	defer cancel()
	w.calls.patch.Add(1)
	// A JSON merge patch of the one annotation, with the resourceVersion
	// read: the API server refuses it with a conflict if anything was
	// written since.
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations":     map[string]string{WriterAnnotation: w.o.NodeName},
		"resourceVersion": stored.GetResourceVersion(),
	}})
	if err != nil {
		return nil, err
	}
	obj := w.newObj()
	err = w.o.Client.Patch(ctx, types.NamespacedName{Name: stored.GetName()}, types.MergePatchType, patch, w.manager, obj)
	switch {
	case err == nil:
		return obj, nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return nil, fmt.Errorf("claim PacemakerCluster %s/%s: %w: %w", w.o.Version, status.ObjectName, errRace, err)
	default:
		return nil, fmt.Errorf("claim PacemakerCluster %s/%s: %w", w.o.Version, status.ObjectName, err)
	}
}

// update writes /status with the resourceVersion obj carries: a write in
// between fails with a conflict, a deletion with NotFound; both are lost
// races.
func (w *Writer) update(ctx context.Context, obj status.Object) error {
	ctx, cancel := context.WithTimeout(ctx, w.o.CallTimeout)
	defer cancel()
	w.calls.update.Add(1)
	err := w.o.Client.UpdateStatus(ctx, types.NamespacedName{Name: obj.GetName()}, obj, w.manager)
	switch {
	case err == nil:
		return nil
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		return fmt.Errorf("update PacemakerCluster %s/%s status: %w: %w", w.o.Version, status.ObjectName, errRace, err)
	default:
		return fmt.Errorf("update PacemakerCluster %s/%s status: %w", w.o.Version, status.ObjectName, err)
	}
}
