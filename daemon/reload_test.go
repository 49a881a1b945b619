package daemon

import (
	"slices"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
)

// A refused reload names every changed field by its YAML path; the list
// and replicas are not refusals.
func TestImmutableChangesNamesFields(t *testing.T) {
	load := func(t *testing.T) *config.Config {
		t.Helper()
		cfg, err := config.Load("../config/examples/static-pod-kubeadm.yaml")
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	off := false
	tests := []struct {
		name   string
		change func(c *config.Config)
		want   []string
	}{
		{"nothing", func(*config.Config) {}, nil},
		{"list and replicas reload", func(c *config.Config) {
			c.Members.Addresses = append(c.Members.Addresses, "192.0.2.99")
			replicas := 5
			c.Cluster.Replicas = &replicas
		}, nil},
		{"client port", func(c *config.Config) { c.Etcd.ClientPort++ }, []string{"etcd.clientPort"}},
		{"several", func(c *config.Config) {
			c.Agent.ReconcileInterval += time.Second
			c.StaticPod.Image = "registry.k8s.io/etcd:3.7.1-0"
			c.Etcd.ExtraArgs = map[string]string{"snapshot-count": "5000"}
		}, []string{"etcd.extraArgs", "staticPod.image", "agent.reconcileInterval"}},
		{"list source to the Etcd resource", func(c *config.Config) {
			c.Members.Source, c.Members.Addresses = config.SourceEtcdResource, nil
		}, []string{"members.source (to or from etcd-resource)"}},
		{"protection switched off", func(c *config.Config) { c.Protection.Enabled = &off }, []string{"protection.enabled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, next := load(t), load(t)
			tt.change(next)
			if got := immutableChanges(old, next); !slices.Equal(got, tt.want) {
				t.Errorf("immutableChanges = %q, want %q", got, tt.want)
			}
		})
	}
}
