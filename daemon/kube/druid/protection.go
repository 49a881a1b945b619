package druid

import (
	"log/slog"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdlet/etcdlet/daemon/kube"
)

// Switchable is the protection of etcdlet's own files (protect.Guard).
type Switchable interface {
	SetEnabled(on bool) bool
}

// ProtectionSwitch follows etcd-druid's opt-out annotation
// druid.gardener.cloud/disable-etcd-component-protection on the Etcd: the
// one switch an operator already uses to edit druid's components also lets
// them edit etcdlet's manifest. Present (any value, as druid checks it):
// protection off; removed: back to the configuration's protection.enabled.
// The annotation never switches on what the configuration switched off.
type ProtectionSwitch struct {
	Guard Switchable
	// Configured is protection.enabled.
	Configured bool
	Log        *slog.Logger
	Recorder   kube.Recorder
}

// OnEtcd takes in a version of the Etcd resource.
func (p *ProtectionSwitch) OnEtcd(e *druidv1alpha1.Etcd) {
	optedOut := metav1.HasAnnotation(e.ObjectMeta, druidv1alpha1.DisableEtcdComponentProtectionAnnotation)
	on := p.Configured && !optedOut
	if !p.Guard.SetEnabled(on) {
		return
	}
	if on {
		p.Log.Info("protection of managed files switched back on: the Etcd no longer carries "+druidv1alpha1.DisableEtcdComponentProtectionAnnotation,
			"etcd", e.Namespace+"/"+e.Name)
		p.Recorder.Eventf(corev1.EventTypeNormal, kube.ReasonProtectionSwitched,
			"protection of etcdlet's managed files is on again (annotation %s removed); edits made meanwhile are reverted", druidv1alpha1.DisableEtcdComponentProtectionAnnotation)
		return
	}
	p.Log.Warn("protection of managed files switched off by the Etcd's annotation "+druidv1alpha1.DisableEtcdComponentProtectionAnnotation,
		"etcd", e.Namespace+"/"+e.Name)
	p.Recorder.Eventf(corev1.EventTypeWarning, kube.ReasonProtectionSwitched,
		"protection of etcdlet's managed files is off (annotation %s); hand edits of the etcd manifest stay until it is removed", druidv1alpha1.DisableEtcdComponentProtectionAnnotation)
}
