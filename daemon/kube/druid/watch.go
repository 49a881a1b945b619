package druid

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/etcdlet/etcdlet/daemon/kube"
)

// watchTimeout is how long one watch runs before the server ends it and
// the watcher lists again: a list of one object every few minutes is cheap,
// and it bounds how long a watch silently broken by a middlebox can hide a
// change.
const watchTimeout = 5 * time.Minute

// EtcdWatcher keeps up with one Etcd resource: it lists it (by name, so
// that RBAC can be limited to that one object) and watches it from there,
// and hands every version it sees to OnEtcd, in order, from one goroutine.
type EtcdWatcher struct {
	// Etcds reaches the Etcd resources (kube.Clients.Etcds).
	Etcds       kube.API
	Key         types.NamespacedName
	CallTimeout time.Duration
	Tracker     *kube.Tracker
	Log         *slog.Logger
	// OnEtcd receives each version of the resource.
	OnEtcd func(*druidv1alpha1.Etcd)
	Now    func() time.Time
}

// Run lists and watches until ctx ends, retrying with backoff.
func (w *EtcdWatcher) Run(ctx context.Context) {
	backoff := kube.Backoff{Base: time.Second, Max: time.Minute}
	for ctx.Err() == nil {
		rv, err := w.list(ctx)
		if err == nil {
			err = w.watch(ctx, rv)
		}
		if ctx.Err() != nil {
			return
		}
		wait := time.Duration(0)
		if err != nil {
			w.Tracker.Failed(w.Now(), err)
			w.Log.Warn("etcd-druid Etcd resource not read; retrying", "etcd", w.Key.String(), "error", err)
			wait = backoff.Next()
		} else {
			backoff.Reset()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// nameSelector selects the one object: with it, list and watch are
// authorised by an RBAC rule limited to resourceNames [name].
func (w *EtcdWatcher) nameSelector() string {
	return fields.OneTermEqualSelector("metadata.name", w.Key.Name).String()
}

func (w *EtcdWatcher) list(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, w.CallTimeout)
	defer cancel()
	var l druidv1alpha1.EtcdList
	if err := w.Etcds.List(ctx, w.Key.Namespace, metav1.ListOptions{FieldSelector: w.nameSelector()}, &l); err != nil {
		return "", fmt.Errorf("list Etcd %s: %w", w.Key, err)
	}
	if len(l.Items) == 0 {
		return "", fmt.Errorf("list Etcd %s: not found", w.Key)
	}
	w.seen(&l.Items[0])
	return l.ResourceVersion, nil
}

// watch follows the resource from resourceVersion rv until the server
// ends the watch (nil: list again) or it fails.
func (w *EtcdWatcher) watch(ctx context.Context, rv string) error {
	ctx, cancel := context.WithTimeout(ctx, watchTimeout+w.CallTimeout)
	defer cancel()
	timeout := int64(watchTimeout / time.Second)
	wi, err := w.Etcds.Watch(ctx, w.Key.Namespace, metav1.ListOptions{FieldSelector: w.nameSelector(), ResourceVersion: rv, TimeoutSeconds: &timeout})
	if err != nil {
		return fmt.Errorf("watch Etcd %s: %w", w.Key, err)
	}
	defer wi.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				if e, ok := ev.Object.(*druidv1alpha1.Etcd); ok {
					w.seen(e)
				}
			case watch.Deleted:
				// Nothing is done about a deleted Etcd: the list in force
				// stays, the member keeps running. Say so loudly.
				return fmt.Errorf("watch Etcd %s: deleted; the last member list read from it stays in force", w.Key)
			case watch.Error:
				// 410 Gone (the resourceVersion is too old) and the like:
				// list again.
				return fmt.Errorf("watch Etcd %s: %w", w.Key, apierrors.FromObject(ev.Object))
			}
		}
	}
}

func (w *EtcdWatcher) seen(e *druidv1alpha1.Etcd) {
	w.Tracker.Succeeded(w.Now(), kube.ResultUnchanged, fmt.Sprintf("read resourceVersion %s (generation %d)", e.ResourceVersion, e.Generation))
	w.OnEtcd(e)
}
