package envtest

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A server-side dry-run create runs a pod through the real validation and
// admission chain without storing it: how rendered static-pod manifests get
// checked.
func TestPodDryRun(t *testing.T) {
	env := Start(t, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	defer cancel()
	c := env.Client

	pod := staticEtcdPod()
	if err := c.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Fatalf("dry-run create of a valid pod: %v", err)
	}
	// Admission ran: the Priority plugin resolved the priority class.
	pc := &schedulingv1.PriorityClass{}
	if err := c.Get(ctx, client.ObjectKey{Name: "system-node-critical"}, pc); err != nil {
		t.Fatalf("get priority class system-node-critical: %v", err)
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority != pc.Value {
		t.Errorf("dry-run pod priority = %v, want %d from system-node-critical", pod.Spec.Priority, pc.Value)
	}
	// Dry run stored nothing.
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("get the dry-run pod: %v, want NotFound", err)
	}

	bad := staticEtcdPod()
	bad.Spec.Containers[0].Name = "Bad_Name"
	err := c.Create(ctx, bad, client.DryRunAll)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("dry-run create of a pod with container name %q: %v, want Invalid", bad.Spec.Containers[0].Name, err)
	}
	if !hasCause(err, "spec.containers[0].name") {
		t.Errorf("rejection %v does not name spec.containers[0].name", err)
	}
}

func hasCause(err error, field string) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return false
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == field {
			return true
		}
	}
	return false
}

// staticEtcdPod looks like the etcd static pod etcdlet renders, with the
// fields the API server validates most strictly (host network, priority
// class, host paths, probes).
func staticEtcdPod() *corev1.Pod {
	hostPath := corev1.HostPathDirectoryOrCreate
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "etcd-192.0.2.1",
			Namespace: "kube-system",
			Labels:    map[string]string{"component": "etcd", "tier": "control-plane"},
		},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Containers: []corev1.Container{{
				Name:    "etcd",
				Image:   "registry.k8s.io/etcd:3.6.16-0",
				Command: []string{"etcd", "--name=etcd-main-192.0.2.1", "--data-dir=/var/lib/etcd"},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "etcdlet-data", MountPath: "/var/lib/etcd"},
				},
				LivenessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Host: "192.0.2.1", Path: "/livez", Port: intstr.FromInt32(2381), Scheme: corev1.URISchemeHTTP,
					}},
					FailureThreshold: 8, PeriodSeconds: 10, TimeoutSeconds: 15,
				},
			}},
			Volumes: []corev1.Volume{{
				Name: "etcdlet-data",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: "/var/lib/etcd", Type: &hostPath,
				}},
			}},
		},
	}
}
