package test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdlet/etcdlet/test/envtest"
	"github.com/etcdlet/etcdlet/test/harness"
)

// druidNamespace and druidIdentity are those of deploy/rbac/etcd-druid.yaml,
// applied unchanged: the Etcd's own ServiceAccount in kube-system. A client
// certificate whose common name is a ServiceAccount's user name is that
// account to RBAC.
const (
	druidNamespace = "kube-system"
	druidIdentity  = "system:serviceaccount:kube-system:etcd-main"
)

// applyManifest creates every object of a YAML file of the repository, as
// shipped.
func applyManifest(t *testing.T, env *envtest.Env, rel string) {
	t.Helper()
	env.Apply(t, filepath.Join(harness.RepoRoot(), rel))
}

// newEtcd is an Etcd in externally managed mode with the agents' addresses.
func newEtcd(c *harness.Cluster, ns ...int) *druidv1alpha1.Etcd {
	addrs := make([]string, len(ns))
	for i, n := range ns {
		addrs[i] = c.IP(n)
	}
	return &druidv1alpha1.Etcd{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: druidNamespace},
		Spec: druidv1alpha1.EtcdSpec{
			Labels:                           map[string]string{"app": "etcd"},
			Replicas:                         int32(len(ns)),
			ExternallyManagedMemberAddresses: addrs,
		},
	}
}

// kubernetesSection is the agents' kubernetes section for druid mode.
func kubernetesSection(kubeconfig string, extra string) string {
	return fmt.Sprintf("kubernetes:\n  kubeconfig: %s\n  callTimeout: 3s\n  etcd: {namespace: %s, name: etcd-main, heartbeatInterval: 2s}\n%s",
		kubeconfig, druidNamespace, extra)
}

// formBeforeTheEtcd starts agents ns with a members file of ns, waits
// until they formed their cluster, and restarts them with the
// configuration the test asked for (members.source etcd-resource): a node
// that reads the Etcd's list never bootstraps, since the API server that
// serves the list runs on the cluster, so the cluster comes first, as on a
// real control plane.
func formBeforeTheEtcd(t *testing.T, c *harness.Cluster, ns ...int) {
	t.Helper()
	members := c.Opts.Members
	c.Opts.Members = ""
	c.WriteMembers(ns...)
	for _, n := range ns {
		c.WriteConfig(n)
		c.Start(n)
	}
	c.Wait(c.ClientOf(ns...), convergeTimeout, ns...)
	stopAll(t, c, ns...)
	c.Opts.Members = members
	for _, n := range ns {
		c.WriteConfig(n)
		c.Agent(n).Restart()
	}
}

// holderIdentities returns what the listed members' Leases must say:
// <memberID>:<clusterID>:<Leader|Member> in lower-case hex, from etcd's own
// answer.
func holderIdentities(t *testing.T, c *harness.Cluster, cli *clientv3.Client, ns ...int) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	want := map[string]string{}
	for _, n := range ns {
		st, err := cli.Status(ctx, c.ClientURL(n))
		if err != nil {
			return nil, err
		}
		role := "Member"
		if st.Leader == st.Header.MemberId {
			role = "Leader"
		}
		want[c.Name(n)] = strconv.FormatUint(st.Header.MemberId, 16) + ":" + strconv.FormatUint(st.Header.ClusterId, 16) + ":" + role
	}
	return want, nil
}

// leasesSay checks that each member's Lease carries want and was renewed
// after since.
func leasesSay(ctx context.Context, env *envtest.Env, want map[string]string, since time.Time) error {
	for name, holder := range want {
		l := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: druidNamespace, Name: name}, l); err != nil {
			return err
		}
		switch {
		case l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder:
			return fmt.Errorf("lease %s: holderIdentity %v, want %s", name, ptr.Deref(l.Spec.HolderIdentity, "<nil>"), holder)
		case l.Spec.RenewTime == nil || l.Spec.RenewTime.Time.Before(since):
			return fmt.Errorf("lease %s: renewTime %v, want after %s", name, l.Spec.RenewTime, since.Format(time.RFC3339Nano))
		case l.Annotations["member.etcd.gardener.cloud/tls-enabled"] != "true":
			return fmt.Errorf("lease %s: tls-enabled annotation %q, want \"true\" (the members' peer URLs are https)", name, l.Annotations["member.etcd.gardener.cloud/tls-enabled"])
		}
	}
	return nil
}

// druidStatus checks etcd-druid's own Etcd.status: the members with
// these statuses and roles, and AllMembersReady as wanted (not checked
// when allReady is empty).
func druidStatus(ctx context.Context, env *envtest.Env, members map[string]string, allReady metav1.ConditionStatus) error {
	e := &druidv1alpha1.Etcd{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: druidNamespace, Name: "etcd-main"}, e); err != nil {
		return err
	}
	got := map[string]string{}
	for _, m := range e.Status.Members {
		role := ""
		if m.Role != nil {
			role = string(*m.Role)
		}
		got[m.Name] = string(m.Status) + "/" + role
	}
	for name, want := range members {
		if got[name] != want {
			return fmt.Errorf("druid's status.members: %v, want %s %s", got, name, want)
		}
	}
	if allReady == "" {
		return nil
	}
	for _, c := range e.Status.Conditions {
		if string(c.Type) == "AllMembersReady" {
			if string(c.Status) != string(allReady) {
				return fmt.Errorf("AllMembersReady is %s (%s), want %s", c.Status, c.Message, allReady)
			}
			return nil
		}
	}
	return fmt.Errorf("druid's status has no AllMembersReady condition yet")
}

// etcdEvents returns the reasons of the Events recorded on the Etcd.
func etcdEvents(ctx context.Context, env *envtest.Env) ([]string, error) {
	var l corev1.EventList
	if err := env.Client.List(ctx, &l, client.InNamespace(druidNamespace)); err != nil {
		return nil, err
	}
	var reasons []string
	for _, e := range l.Items {
		if e.InvolvedObject.Kind == "Etcd" && e.InvolvedObject.Name == "etcd-main" && e.Source.Component == "etcdlet" {
			reasons = append(reasons, e.Reason)
		}
	}
	return reasons, nil
}

func roleOf(holder string) string { return holder[strings.LastIndex(holder, ":")+1:] }

// A real etcd-druid reads the Leases etcdlet renews: three agents that
// formed their cluster take their member list from the Etcd resource and renew
// their Leases with the identity of their etcd member, under exactly the
// permissions of deploy/rbac/etcd-druid.yaml; druid's status lists the
// three with their roles and AllMembersReady. A leader move shows in the
// Leases; an in-place edit of the Etcd's address list replaces a member
// end to end; a stopped member turns NotReady in druid's status.
func TestDruidSeesEtcdletMembers(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t, envtest.Options{DruidEtcd: true})
	applyManifest(t, env, "deploy/rbac/etcd-druid.yaml")
	kubeconfig := env.WriteKubeconfig(t, filepath.Join(t.TempDir(), "kubeconfig"), druidIdentity)
	allowed, denied := druidAccess(druidNamespace)
	checkAccess(t, env, druidIdentity, allowed, denied)

	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netDruid,
		Members: "members:\n  source: etcd-resource\n", Extra: kubernetesSection(kubeconfig, "")})
	if err := env.Client.Create(t.Context(), newEtcd(c, 1, 2, 3)); err != nil {
		t.Fatal(err)
	}
	// Short thresholds, so that a stopped member shows within the test.
	envtest.StartDruid(t, env, envtest.DruidOptions{StatusSyncPeriod: 5 * time.Second, UnknownThreshold: 10 * time.Second, NotReadyThreshold: 20 * time.Second})
	formBeforeTheEtcd(t, c, 1, 2, 3)
	cli := c.ClientOf(1, 2, 3)
	c.Wait(cli, 90*time.Second, 1, 2, 3)

	// The Leases carry each member's IDs and role, and druid agrees.
	start := time.Now()
	harness.Eventually(t, 30*time.Second, "leases and druid's status", func() error {
		want, err := holderIdentities(t, c, cli, 1, 2, 3)
		if err != nil {
			return err
		}
		if err := leasesSay(t.Context(), env, want, start); err != nil {
			return err
		}
		members := map[string]string{}
		for name, h := range want {
			members[name] = "Ready/" + roleOf(h)
		}
		return druidStatus(t.Context(), env, members, metav1.ConditionTrue)
	})

	// Leadership moves: the Leases follow within the 1s poll, not only at
	// the next heartbeat.
	leader := leaderIndex(t, c, cli)
	next := leader%3 + 1
	ids, err := holderIdentities(t, c, cli, next)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.ParseUint(strings.Split(ids[c.Name(next)], ":")[0], 16, 64)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	if _, err := c.ClientOf(leader).MoveLeader(ctx, id); err != nil {
		t.Fatalf("move leadership to %s: %v", c.Name(next), err)
	}
	cancel()
	harness.Eventually(t, 10*time.Second, "leases after the leader move", func() error {
		want, err := holderIdentities(t, c, cli, 1, 2, 3)
		if err != nil {
			return err
		}
		if roleOf(want[c.Name(next)]) != "Leader" {
			return fmt.Errorf("etcd says the leader is not %s yet", c.Name(next))
		}
		return leasesSay(t.Context(), env, want, time.Time{})
	})

	// Replace node 3 by node 4 in place, as the Etcd's CEL rules allow.
	e := &druidv1alpha1.Etcd{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: druidNamespace, Name: "etcd-main"}, e); err != nil {
		t.Fatal(err)
	}
	e.Spec.ExternallyManagedMemberAddresses[2] = c.IP(4)
	if err := env.Client.Update(t.Context(), e); err != nil {
		t.Fatalf("replace %s by %s in the Etcd: %v", c.IP(3), c.IP(4), err)
	}
	c.Start(4)
	c.Wait(cli, 2*time.Minute, 1, 2, 4)
	if _, err := os.Stat(c.DataDir(3)); err != nil {
		t.Errorf("the removed member's data dir must be kept: %v", err)
	}
	harness.Eventually(t, 30*time.Second, "druid lists the new member", func() error {
		want, err := holderIdentities(t, c, c.ClientOf(1, 2, 4), 4)
		if err != nil {
			return err
		}
		return druidStatus(t.Context(), env, map[string]string{c.Name(4): "Ready/" + roleOf(want[c.Name(4)])}, "")
	})
	harness.Eventually(t, 30*time.Second, "membership Events on the Etcd", func() error {
		reasons, err := etcdEvents(t.Context(), env)
		if err != nil {
			return err
		}
		for _, want := range []string{"MemberAdded", "MemberPromoted", "MemberRemoved"} {
			if !slices.Contains(reasons, want) {
				return fmt.Errorf("events %v, want %s among them", reasons, want)
			}
		}
		return nil
	})

	// Stop node 1 (agent and member): its Lease ages, and druid says so
	// after its unknown threshold: the last renewal (at most a heartbeat
	// ago) plus the threshold plus one status sync, and slack for a loaded
	// machine.
	stopped := time.Now()
	c.Agent(1).Stop()
	const heartbeat, unknown, sync = 2 * time.Second, 10 * time.Second, 5 * time.Second
	harness.Eventually(t, heartbeat+unknown+sync+15*time.Second, "druid marks the stopped member NotReady within its thresholds", func() error {
		e := &druidv1alpha1.Etcd{}
		if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: druidNamespace, Name: "etcd-main"}, e); err != nil {
			return err
		}
		for _, m := range e.Status.Members {
			if m.Name == c.Name(1) && m.Status == druidv1alpha1.EtcdMemberStatusNotReady {
				return nil
			}
		}
		return fmt.Errorf("druid's members: %+v", e.Status.Members)
	})
	t.Logf("druid marked the stopped member NotReady %s after it stopped (unknown threshold %s, status sync %s)",
		time.Since(stopped).Round(100*time.Millisecond), unknown, sync)
}
