package daemon

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/test/envtest"
	"github.com/etcdlet/etcdlet/test/harness"
)

// On a first start with members.source etcd-resource there is no kept copy
// of the Etcd's list until the agent has read the resource: until then it
// waits for a list, it refuses none. So a valid list never raises a
// MemberListRefused Event nor logs an ERROR, whether the resource is read
// at once or appears only after the agent's first read; a list that breaks
// the rules still does both, naming the rule it breaks.
func TestFirstStartFromTheEtcdResource(t *testing.T) {
	env := envtest.Start(t, envtest.Options{DruidEtcd: true})
	tests := []struct {
		name     string
		net      string // the agent's node is <net>.1, the listed ones <net>.2 and up
		replicas int    // cluster.replicas, 0: unset
		// late creates the Etcd only once the agent has looked for its
		// list: the order of every first start whose first pass runs
		// before the first read of the resource, made certain.
		late    bool
		refusal string // "": the list is valid
	}{
		{name: "valid list", net: "127.0.215"},
		{name: "valid list, Etcd read after the first pass", net: "127.0.216", late: true},
		{name: "list longer than cluster.replicas", net: "127.0.217", replicas: 2, refusal: "must have exactly cluster.replicas (2) entries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ns := kubeNamespace(t, env, "first-start")
			list := []string{tc.net + ".2", tc.net + ".3", tc.net + ".4"}
			create := func() {
				t.Helper()
				if err := env.Client.Create(t.Context(), newEtcd(ns, list...)); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.late {
				create()
			}
			a := startKubeAgent(t, env, ns, tc.net+".1", listRules{source: config.SourceEtcdResource, replicas: tc.replicas})
			if tc.late {
				harness.Eventually(t, 30*time.Second, "the agent looked for its list", func() error {
					if !a.source.Read() {
						return fmt.Errorf("the list source was not read yet")
					}
					return nil
				})
				create()
			}

			if tc.refusal == "" {
				harness.Eventually(t, 30*time.Second, "the Etcd's list is in force", func() error {
					if got, want := a.list(), strings.Join(list, ","); got != want {
						return fmt.Errorf("list in force %q, want %q", got, want)
					}
					return nil
				})
			} else {
				harness.Eventually(t, 30*time.Second, "the Etcd's list is refused", func() error {
					got, err := events(t.Context(), env, ns, kube.ReasonMemberListRefused)
					if err != nil {
						return err
					}
					if len(got) == 0 {
						return fmt.Errorf("no %s Event yet", kube.ReasonMemberListRefused)
					}
					return nil
				})
			}
			a.flushEvents(t, env, ns)

			refused, err := events(t.Context(), env, ns, kube.ReasonMemberListRefused)
			if err != nil {
				t.Fatal(err)
			}
			errs := a.log.at(slog.LevelError)
			if tc.refusal == "" {
				if len(refused) > 0 {
					t.Errorf("%s Events for a valid list: %q", kube.ReasonMemberListRefused, refused)
				}
				if len(errs) > 0 {
					t.Errorf("ERROR logged for a valid list: %q", errs)
				}
				return
			}
			if got := a.list(); got != "" {
				t.Errorf("list in force %q, want none: the only list read was refused", got)
			}
			for _, msg := range refused {
				if !strings.Contains(msg, tc.refusal) {
					t.Errorf("%s Event %q does not name the broken rule %q", kube.ReasonMemberListRefused, msg, tc.refusal)
				}
			}
			if len(errs) == 0 {
				t.Error("no ERROR logged for a refused list")
			}
			for _, msg := range errs {
				if !strings.Contains(msg, tc.refusal) {
					t.Errorf("ERROR %q does not name the broken rule %q", msg, tc.refusal)
				}
			}
		})
	}
}
