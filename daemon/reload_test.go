package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/test/envtest"
	"github.com/etcdlet/etcdlet/test/harness"
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
		{"list source to the cluster, seeds with it", func(c *config.Config) {
			c.Members.Source, c.Members.Addresses, c.Members.Seeds = config.SourceCluster, nil, []string{"192.0.2.1"}
		}, []string{"members.source (to or from cluster)"}},
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

// A SIGHUP reload replaces the list rules while the members-file watch and
// the Etcd resource's watch read them from goroutines of their own: under
// -race, anything but a configuration replaced whole and handed over in
// one synchronized step is a data race. The reloads take effect:
// cluster.replicas 4 refuses every list of three, 3 accepts them again,
// both in the agent's list source and in the keeper of the Etcd's list.
func TestReloadWhileListWatchersRun(t *testing.T) {
	env := envtest.Start(t, envtest.Options{DruidEtcd: true})
	tests := []struct {
		name   string
		source string
		net    string // the agent's node is <net>.1, the listed ones <net>.2 and up
	}{
		{"etcd-resource", config.SourceEtcdResource, "127.0.213"},
		{"members file", config.SourceFile, "127.0.214"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := kubeNamespace(t, env, "reload")
			lists := [][]string{{tc.net + ".2", tc.net + ".3", tc.net + ".4"}, {tc.net + ".2", tc.net + ".3", tc.net + ".5"}}
			if err := env.Client.Create(t.Context(), newEtcd(ns, lists[0]...)); err != nil {
				t.Fatal(err)
			}
			rules := listRules{source: tc.source, replicas: 3}
			if tc.source == config.SourceFile {
				rules.file = filepath.Join(t.TempDir(), "members")
				if err := writeMembers(rules.file, lists[0]...); err != nil {
					t.Fatal(err)
				}
			}
			a := startKubeAgent(t, env, ns, tc.net+".1", rules)
			harness.Eventually(t, 30*time.Second, "the first list is read", func() error {
				if got, want := a.list(), strings.Join(lists[0], ","); got != want {
					return fmt.Errorf("list in force %q, want %q", got, want)
				}
				return nil
			})

			// Both watches keep reading new lists, as fast as they come,
			// while the rules are reloaded.
			ctx, stop := context.WithCancel(t.Context())
			var churn sync.WaitGroup
			churn.Go(func() {
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for i := 1; ; i++ {
					list := lists[i%2]
					err := setEtcdList(ctx, env, ns, list...)
					if tc.source == config.SourceFile {
						err = errors.Join(err, writeMembers(rules.file, list...))
					}
					if ctx.Err() != nil {
						return
					}
					if err != nil {
						t.Errorf("change the list: %v", err)
						return
					}
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
				}
			})
			defer churn.Wait()
			defer stop()

			for i := range 5 {
				for _, replicas := range []int{4, 3} {
					rules.replicas = replicas
					if err := a.Reload(t.Context(), a.config(rules)); err != nil {
						t.Fatalf("reload %d (cluster.replicas %d): %v", i, replicas, err)
					}
					harness.Eventually(t, 30*time.Second, fmt.Sprintf("reload %d (cluster.replicas %d) takes effect", i, replicas), func() error {
						return rulesApply(a, lists, replicas)
					})
				}
			}
		})
	}
}

// rulesApply checks that the list rules of cluster.replicas n are the ones
// in force: with 4, lists of three are refused and the last good one stays;
// with 3, they are accepted again. Each verdict can only come from a read
// made under those rules.
func rulesApply(a *kubeAgent, lists [][]string, n int) error {
	if got := a.list(); got != strings.Join(lists[0], ",") && got != strings.Join(lists[1], ",") {
		return fmt.Errorf("list in force %q, want one of %q", got, lists)
	}
	verdicts := map[string]error{"list source": a.source.Err()}
	if keeps, err := a.report.ListVerdict(); keeps {
		verdicts["keeper of the Etcd's list"] = err
	}
	refusal := fmt.Sprintf("must have exactly cluster.replicas (%d) entries", n)
	for who, err := range verdicts {
		switch {
		case n == 3 && err != nil:
			return fmt.Errorf("%s refuses a list of three: %v", who, err)
		case n == 4 && (err == nil || !strings.Contains(err.Error(), refusal)):
			return fmt.Errorf("%s: %v, want a refusal saying %q", who, err, refusal)
		}
	}
	return nil
}
