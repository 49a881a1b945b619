// Package staticpod is the static-pod runtime (etcd.runtime: static-pod):
// etcdlet renders the kubelet manifest of the local member and the kubelet
// runs etcd. The manifest is written through the protection guard, so it
// is atomic, 0600, only written when the rendered bytes change, and an
// edit or deletion by anyone else is reverted.
package staticpod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdversion"
	"github.com/etcdlet/etcdlet/daemon/protect"
	"github.com/etcdlet/etcdlet/daemon/runtime"
	"github.com/etcdlet/etcdlet/daemon/runtime/staticpod/manifest"
	"github.com/etcdlet/etcdlet/internal/atomicfile"
)

// Runtime writes and removes the manifest.
type Runtime struct {
	cfg   config.StaticPod
	guard *protect.Guard
	log   *slog.Logger
	// keepDir (<agent.stateDir>/manifests) holds the previous manifest and
	// the manifests of stopped members: nothing etcdlet wrote is deleted.
	keepDir string
	path    string

	mu       sync.Mutex
	optedOut bool
	// running is the etcd version of the manifest in place, read once at
	// start and then what Apply wrote: the guard reverts anyone else's
	// edit, and a manifest handed to the operator is not known.
	running etcdversion.Minor
	// last is the spec Apply rendered last, and its bytes: the agent
	// applies the same spec on every pass, and rendering it (a Pod built
	// and marshalled to YAML) costs many times what finding the file
	// unchanged does.
	last struct {
		spec runtime.Spec
		data []byte
	}
}

// New returns a static-pod runtime writing <manifestDir>/<podName>.yaml.
func New(cfg config.StaticPod, stateDir string, guard *protect.Guard, log *slog.Logger) *Runtime {
	r := &Runtime{cfg: cfg, guard: guard, log: log, keepDir: filepath.Join(stateDir, "manifests"),
		path: cfg.ManifestPath()}
	r.running = ManifestVersion(r.path)
	return r
}

// ManifestVersion is the etcd version the image of the manifest at path
// names; zero when there is none, it names none, or the operator took the
// manifest over (then nothing etcdlet decides changes it).
func ManifestVersion(path string) etcdversion.Minor {
	data, err := os.ReadFile(path)
	if err != nil || manifest.OptsOut(data) {
		return etcdversion.Minor{}
	}
	pod, err := manifest.Unmarshal(data)
	if err != nil || len(pod.Spec.Containers) == 0 {
		return etcdversion.Minor{}
	}
	v, _ := etcdversion.FromImage(pod.Spec.Containers[0].Image)
	return v
}

var _ runtime.Runtime = (*Runtime)(nil)

// Path is the manifest's path.
func (r *Runtime) Path() string { return r.path }

// Render builds the manifest bytes for a spec.
func (r *Runtime) Render(spec runtime.Spec) ([]byte, error) {
	return manifest.Render(spec, r.cfg)
}

// Apply writes the manifest when its rendering differs from the file; the
// kubelet then (re)starts etcd. The previous manifest is kept in the state
// dir. A manifest the operator took over (annotation
// etcdlet.io/disable-protection) is left alone.
func (r *Runtime) Apply(_ context.Context, spec runtime.Spec) error {
	data, err := r.rendered(spec)
	if err != nil {
		return err
	}
	changed, previous, err := r.guard.Write(r.path, data, 0o600)
	r.mu.Lock()
	wasOptedOut := r.optedOut
	r.optedOut = errors.Is(err, protect.ErrOptedOut)
	switch {
	case r.optedOut:
		r.running = etcdversion.Minor{}
	case err == nil:
		r.running, _ = etcdversion.FromImage(r.cfg.Image)
	}
	r.mu.Unlock()
	switch {
	case errors.Is(err, protect.ErrOptedOut):
		if !wasOptedOut {
			r.log.Warn("the etcd manifest carries "+manifest.DisableProtectionAnnotation+"; etcdlet leaves it to the operator", "file", r.path)
		}
		return nil
	case err != nil:
		return fmt.Errorf("write manifest %s: %w", r.path, err)
	case changed:
		r.log.Info("wrote etcd manifest", "file", r.path, "specHash", specHash(data))
		if previous != nil {
			if err := r.keep(filepath.Base(r.path)+".previous", previous); err != nil {
				r.log.Warn("cannot keep the previous manifest", "error", err)
			}
		}
	}
	return nil
}

// WouldRestart reports whether Apply(spec) would rewrite the manifest in
// place, which the kubelet answers by restarting etcd.
func (r *Runtime) WouldRestart(spec runtime.Spec) (bool, error) {
	data, err := r.rendered(spec)
	if err != nil {
		return false, err
	}
	return ManifestDiffers(r.path, data)
}

// ManifestDiffers reports whether the manifest at path differs from data
// and is etcdlet's to change: a missing manifest runs nothing to restart,
// and one the operator took over is not rewritten.
func ManifestDiffers(path string, data []byte) (bool, error) {
	onDisk, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read manifest %s: %w", path, err)
	case manifest.OptsOut(onDisk):
		return false, nil
	}
	return !bytes.Equal(onDisk, data), nil
}

// rendered is Render(spec), from the last rendering when spec is the one
// rendered last (Render depends on nothing else).
func (r *Runtime) rendered(spec runtime.Spec) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last.data != nil && reflect.DeepEqual(spec, r.last.spec) {
		return r.last.data, nil
	}
	data, err := r.Render(spec)
	if err != nil {
		return nil, err
	}
	r.last.spec, r.last.data = spec.Clone(), data
	return data, nil
}

// Stop takes the manifest away from the kubelet, which then stops etcd; the
// manifest is moved to the state dir, not deleted.
func (r *Runtime) Stop(context.Context) error {
	if err := os.MkdirAll(r.keepDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", r.keepDir, err)
	}
	keepAt := filepath.Join(r.keepDir, filepath.Base(r.path)+".stopped-"+time.Now().UTC().Format("20060102T150405Z"))
	if err := r.guard.Release(r.path, keepAt); err != nil {
		return fmt.Errorf("remove manifest %s: %w", r.path, err)
	}
	r.mu.Lock()
	r.running = etcdversion.Minor{}
	r.mu.Unlock()
	r.log.Info("removed etcd manifest; the kubelet stops etcd", "file", r.path, "keptAt", keepAt)
	return nil
}

// Close does nothing: etcd keeps running under the kubelet while etcdlet
// restarts or is upgraded.
func (r *Runtime) Close(context.Context) error { return nil }

// Status says the member runs when its manifest is in place. Whether etcd
// is up is learned from its client URL, not from the kubelet.
func (r *Runtime) Status() runtime.Status {
	_, err := os.Stat(r.path)
	r.mu.Lock()
	defer r.mu.Unlock()
	return runtime.Status{Running: err == nil, Version: r.running}
}

// Changed never fires: the kubelet restarts a crashed etcd on its own.
func (r *Runtime) Changed() <-chan struct{} { return nil }

func (r *Runtime) keep(name string, data []byte) error {
	if err := os.MkdirAll(r.keepDir, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(r.keepDir, name), data, 0o600)
}

func specHash(data []byte) string {
	pod, err := manifest.Unmarshal(data)
	if err != nil {
		return ""
	}
	return pod.Annotations[manifest.SpecHashAnnotation]
}
