package test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/kube/druid"
	"github.com/etcdlet/etcdlet/internal/eventually"
	"github.com/etcdlet/etcdlet/test/envtest"
	"github.com/etcdlet/etcdlet/test/harness"
)

// kcmIdentity is kube-controller-manager's user. Kubernetes' bootstrap RBAC
// lets it get and update its leader-election Lease in kube-system, which
// the policies must leave alone for it and refuse to the agent.
const kcmIdentity = "system:kube-controller-manager"

// The policies of deploy/rbac/etcd-druid.yaml, as the API server names them
// in a refusal.
const (
	namesPolicy  = "ValidatingAdmissionPolicy 'etcdlet-member-leases'"
	prefixPolicy = "ValidatingAdmissionPolicy 'etcdlet-etcd-main-lease-prefix'"
	// anyPolicy is either: when both refuse, the API server names one.
	anyPolicy = "ValidatingAdmissionPolicy 'etcdlet-"
)

// userClients are one user's clients: the agent's own (Agent, built as
// the agent builds them: kube.NewClients from a kubeconfig), and a
// controller-runtime client for the calls of other components (Client).
type userClients struct {
	Agent  *kube.Clients
	Client client.Client
}

// clientAs returns the clients of a new user of env, and the kubeconfig
// both use.
func clientAs(t *testing.T, env *envtest.Env, user string) (userClients, string) {
	t.Helper()
	path := env.WriteKubeconfig(t, filepath.Join(t.TempDir(), "kubeconfig"), user)
	agent, err := kube.NewClients(config.Kubernetes{Kubeconfig: path, QPS: 50, Burst: 100})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(rc, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return userClients{Agent: agent, Client: c}, path
}

// renewAs renews the member Lease of ip through the agent's own code path
// (druid.LeaseRenewer: a merge patch, a create when the Lease is missing)
// with c's credentials.
func renewAs(ctx context.Context, c userClients, etcd *druidv1alpha1.Etcd, ip string) error {
	r := &druid.LeaseRenewer{Leases: c.Agent.Leases, Namespace: etcd.Namespace, EtcdName: etcd.Name, CallTimeout: 10 * time.Second,
		PeerTLS: true, Tracker: kube.NewTracker("lease", nil, nil), Log: slog.New(slog.DiscardHandler), Now: time.Now,
		Local: func(context.Context) (druid.LocalMember, error) {
			return druid.LocalMember{IP: netip.MustParseAddr(ip), MemberID: 0xa1, ClusterID: 0xc1}, nil
		}}
	r.OnEtcd(etcd)
	return r.Step(ctx)
}

// patchHolder merge-patches a Lease's holder identity: a renewal of a
// snapshot Lease, or the hijack of someone else's Lease.
func patchHolder(ctx context.Context, c client.Client, name string, opts ...client.PatchOption) error {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: druidNamespace, Name: name}}
	return c.Patch(ctx, l, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"holderIdentity":"intruder"}}`)), opts...)
}

// getLease reads a Lease of the Etcd's namespace.
func getLease(ctx context.Context, c client.Client, name string) error {
	return c.Get(ctx, types.NamespacedName{Namespace: druidNamespace, Name: name}, &coordinationv1.Lease{})
}

// createLease creates a Lease in the Etcd's namespace, as its holder
// (kube-controller-manager, druid) or an intruder would.
func createLease(ctx context.Context, c client.Client, name string, opts ...client.CreateOption) error {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: druidNamespace, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("someone")}}
	return c.Create(ctx, l, opts...)
}

// renewAsKCM does what kube-controller-manager's leader election does: get
// its Lease and update it (a PUT).
func renewAsKCM(ctx context.Context, c client.Client) error {
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: druidNamespace, Name: "kube-controller-manager"}, l); err != nil {
		return err
	}
	l.Spec.HolderIdentity = ptr.To("master-0_" + time.Now().Format("150405.000"))
	l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
	return c.Update(ctx, l)
}

// refusal checks that err is the API server's refusal (403 Forbidden) by
// the policy or webhook that by names, saying what it must: who was
// refused, which Lease, and what is allowed instead.
func refusal(err error, by string, says ...string) error {
	if err == nil {
		return errors.New("allowed")
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Code != 403 {
		return fmt.Errorf("not a 403 Forbidden of the API server: %w", err)
	}
	msg := err.Error()
	for _, s := range append([]string{by}, says...) {
		if !strings.Contains(msg, s) {
			return fmt.Errorf("the refusal does not say %q: %s", s, msg)
		}
	}
	return nil
}

// enforced waits until the API server refuses what probe does with a
// message that contains by (the refusing policy or webhook): a new policy,
// binding, param or webhook configuration reaches the admission plugins a
// moment after it is stored. probe must be a dry run, so that it changes
// nothing while the policy is missing. A policy that is never enforced
// fails the test, but the test goes on, so that the cases that follow show
// what its absence lets through.
func enforced(t *testing.T, what, by string, probe func(context.Context) error) {
	t.Helper()
	if _, err := eventually.Within(30*time.Second, 100*time.Millisecond, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		err := probe(ctx)
		switch {
		case err == nil:
			return errors.New("the probe (a dry run) was allowed")
		case !strings.Contains(err.Error(), by):
			return err
		}
		return nil
	}); err != nil {
		t.Errorf("%s: not within 30s: %v", what, err)
	}
}

// The agent's identity writes only its Etcd's Leases, under exactly
// deploy/rbac/etcd-druid.yaml on a real kube-apiserver. Its Role must let
// it patch and create Leases by any name (RBAC cannot name Leases that do
// not exist yet); the admission policies hold it to <etcd>-<address> for
// the Etcd's addresses and the snapshot Leases. The real agent renews its
// member Lease under them; the Lease of an unlisted address and
// kube-controller-manager's leader-election Lease are refused, with a
// message that says why; and kube-controller-manager itself keeps renewing
// its Lease, also while the Etcd is missing (a policy whose param is
// missing must not stop leader election in kube-system).
func TestLeasePolicy(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t, envtest.Options{DruidEtcd: true})
	applyManifest(t, env, "deploy/rbac/etcd-druid.yaml")
	agent, kubeconfig := clientAs(t, env, druidIdentity)
	kcm, _ := clientAs(t, env, kcmIdentity)
	admin := env.Client
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netLeasePolicy, Extra: kubernetesSection(kubeconfig, "")})
	listed, unlisted := c.IP(1), c.IP(2)

	// kube-controller-manager's leader-election Lease and the Lease druid
	// would have made for a member that is not (or no longer) listed.
	for _, name := range []string{"kube-controller-manager", "etcd-main-" + unlisted} {
		if err := createLease(t.Context(), admin, name); err != nil {
			t.Fatal(err)
		}
	}
	identity := "etcdlet (" + druidIdentity + ") may write only"

	// The Etcd does not exist yet: the parameterised policy cannot apply,
	// the guard without a param does.
	enforced(t, "the policies are enforced", anyPolicy, func(ctx context.Context) error {
		return createLease(ctx, agent.Client, "kube-scheduler", client.DryRunAll)
	})
	checkLeaseWrites(t, "without the Etcd", []leaseWrite{
		{"agent patches kube-controller-manager's Lease", func(ctx context.Context) error { return patchHolder(ctx, agent.Client, "kube-controller-manager") },
			prefixPolicy, []string{identity, "etcd-main-*", "not kube-system/kube-controller-manager"}},
		{"agent creates kube-scheduler's Lease", func(ctx context.Context) error { return createLease(ctx, agent.Client, "kube-scheduler") },
			prefixPolicy, []string{identity, "not kube-system/kube-scheduler"}},
		{"kube-controller-manager renews its Lease", func(ctx context.Context) error { return renewAsKCM(ctx, kcm.Client) }, "", nil},
	})

	// The Etcd and the real agent: it renews its member Lease (creating it,
	// as no druid runs here) under the policies.
	etcd := newEtcd(c, 1)
	if err := admin.Create(t.Context(), etcd); err != nil {
		t.Fatal(err)
	}
	enforced(t, "the policy etcdlet-member-leases is enforced with the Etcd as its param", namesPolicy, func(ctx context.Context) error {
		return createLease(ctx, agent.Client, "etcd-main-192.0.2.250", client.DryRunAll)
	})
	c.WriteMembers(1)
	c.Start(1)
	cli := c.ClientOf(1)
	c.Wait(cli, 60*time.Second, 1)
	start := time.Now()
	harness.Eventually(t, 30*time.Second, "the agent renews its member Lease", func() error {
		want, err := holderIdentities(t, c, cli, 1)
		if err != nil {
			return err
		}
		return leasesSay(t.Context(), env, want, start)
	})

	for _, name := range []string{"etcd-main-full-snap", "etcd-main-delta-snap"} {
		if err := createLease(t.Context(), admin, name); err != nil {
			t.Fatal(err)
		}
	}
	names := "etcd-main-" + listed + ", etcd-main-full-snap, etcd-main-delta-snap"
	checkLeaseWrites(t, "with the Etcd", []leaseWrite{
		{"agent renews its member Lease", func(ctx context.Context) error { return renewAs(ctx, agent, etcd, listed) }, "", nil},
		{"agent renews the full snapshot Lease", func(ctx context.Context) error { return patchHolder(ctx, agent.Client, "etcd-main-full-snap") }, "", nil},
		{"agent renews the delta snapshot Lease", func(ctx context.Context) error { return patchHolder(ctx, agent.Client, "etcd-main-delta-snap") }, "", nil},
		{"agent reads the full snapshot Lease", func(ctx context.Context) error { return getLease(ctx, agent.Client, "etcd-main-full-snap") }, "", nil},
		{"agent reads the delta snapshot Lease", func(ctx context.Context) error { return getLease(ctx, agent.Client, "etcd-main-delta-snap") }, "", nil},
		{"agent reads kube-controller-manager's Lease", func(ctx context.Context) error { return getLease(ctx, agent.Client, "kube-controller-manager") },
			`cannot get resource "leases"`, []string{`User "system:serviceaccount:kube-system:etcd-main"`}},
		{"agent renews the Lease of an unlisted address", func(ctx context.Context) error { return renewAs(ctx, agent, etcd, unlisted) },
			namesPolicy, []string{identity, "Leases of Etcd kube-system/etcd-main", names, "not kube-system/etcd-main-" + unlisted}},
		{"agent creates the Lease of an unlisted address", func(ctx context.Context) error { return renewAs(ctx, agent, etcd, "192.0.2.250") },
			namesPolicy, []string{identity, names, "not kube-system/etcd-main-192.0.2.250"}},
		{"agent patches kube-controller-manager's Lease", func(ctx context.Context) error { return patchHolder(ctx, agent.Client, "kube-controller-manager") },
			anyPolicy, []string{identity, "not kube-system/kube-controller-manager"}},
		{"agent creates kube-scheduler's Lease", func(ctx context.Context) error { return createLease(ctx, agent.Client, "kube-scheduler") },
			anyPolicy, []string{identity, "not kube-system/kube-scheduler"}},
		{"kube-controller-manager renews its Lease", func(ctx context.Context) error { return renewAsKCM(ctx, kcm.Client) }, "", nil},
	})
}

// leaseWrite is one request of a table: allowed (by empty), or refused
// by the policy or webhook that by names, with a message that says says.
type leaseWrite struct {
	name  string
	write func(context.Context) error
	by    string
	says  []string
}

// checkLeaseWrites makes each request in order, as a subtest of group.
func checkLeaseWrites(t *testing.T, group string, writes []leaseWrite) {
	t.Helper()
	for _, w := range writes {
		t.Run(group+"/"+w.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			defer cancel()
			err := w.write(ctx)
			if w.by == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if e := refusal(err, w.by, w.says...); e != nil {
				t.Fatal(e)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// druidWebhook is the name of etcd-druid's component-protection webhook.
const druidWebhook = `admission webhook "etcdcomponents.webhooks.druid.gardener.cloud"`

// protectionWebhook is the Lease part of the ValidatingWebhookConfiguration
// of etcd-druid v0.38.1's chart (charts/templates/validatingwebhookconfig.yaml):
// UPDATE and DELETE of Leases labelled managed-by etcd-druid, failurePolicy
// Fail, sent to druid's webhook server on loopback instead of its Service.
func protectionWebhook(port int, caPEM []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	url := fmt.Sprintf("https://127.0.0.1:%d/webhooks/etcdcomponents", port)
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-druid"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "etcdcomponents.webhooks.druid.gardener.cloud",
			AdmissionReviewVersions: []string{"v1beta1", "v1"},
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caPEM},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			MatchPolicy:             ptr.To(admissionregistrationv1.Exact),
			NamespaceSelector:       &metav1.LabelSelector{},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{druidv1alpha1.LabelManagedByKey: druidv1alpha1.LabelManagedByValue}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update, admissionregistrationv1.Delete},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"v1"},
					Resources: []string{"leases"}, Scope: ptr.To(admissionregistrationv1.AllScopes)},
			}},
			SideEffects:    ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds: ptr.To(int32(10)),
		}},
	}
}

// Which identity the agent must use when etcd-druid's component-protection
// webhook is on, found with the real operator (v0.38.1) serving its webhook
// to the real kube-apiserver: the Etcd's ServiceAccount renews the member
// Lease druid made; another ServiceAccount with the very same Role is
// refused by the webhook, and an exempt one is let through (while no
// reconcile runs) but, not being the Etcd's ServiceAccount, is not held to
// the Etcd's Leases by the policies. druid binds the Etcd's ServiceAccount
// to a Role of its own that allows update on every Lease of the namespace:
// the policies refuse that too.
func TestLeaseIdentityWithDruidWebhook(t *testing.T) {
	t.Parallel()
	env := envtest.Start(t, envtest.Options{DruidEtcd: true})
	applyManifest(t, env, "deploy/rbac/etcd-druid.yaml")
	admin := env.Client
	const (
		other  = "system:serviceaccount:kube-system:etcdlet"
		exempt = "system:serviceaccount:kube-system:etcd-admin"
	)
	agent, _ := clientAs(t, env, druidIdentity)
	otherSA, _ := clientAs(t, env, other)
	exemptSA, _ := clientAs(t, env, exempt)
	// The same Role for the two other accounts: only the webhook tells
	// them apart from the Etcd's.
	for _, sa := range []string{"etcdlet", "etcd-admin"} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: druidNamespace, Name: "etcdlet-" + sa},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "etcdlet"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: druidNamespace, Name: sa}}}
		if err := admin.Create(t.Context(), rb); err != nil {
			t.Fatal(err)
		}
	}
	if err := createLease(t.Context(), admin, "kube-controller-manager"); err != nil {
		t.Fatal(err)
	}

	etcd := &druidv1alpha1.Etcd{
		ObjectMeta: metav1.ObjectMeta{Name: "etcd-main", Namespace: druidNamespace},
		Spec: druidv1alpha1.EtcdSpec{Labels: map[string]string{"app": "etcd"}, Replicas: 2,
			ExternallyManagedMemberAddresses: []string{"192.0.2.1", "192.0.2.2"}},
	}
	if err := admin.Create(t.Context(), etcd); err != nil {
		t.Fatal(err)
	}

	// druid serves its webhook on loopback with a certificate the
	// kube-apiserver trusts through the configuration's caBundle. Its
	// reconciler is its own user (StartDruid's kubeconfig, etcd-druid).
	certs, err := harness.GenerateTLS(filepath.Join(t.TempDir(), "pki"), []net.IP{net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	certDir := t.TempDir()
	for from, to := range map[string]string{certs.ServerCert: "tls.crt", certs.ServerKey: "tls.key"} {
		b, err := os.ReadFile(from)
		if err == nil {
			err = os.WriteFile(filepath.Join(certDir, to), b, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	port := freeLoopbackPort(t)
	// ExtraArgs come after StartDruid's own flags, and druid's flag set
	// takes the last value of a flag given twice.
	envtest.StartDruid(t, env, envtest.DruidOptions{ExtraArgs: []string{
		"--enable-etcd-components-webhook=true",
		"--reconciler-service-account=etcd-druid",
		"--etcd-components-webhook-exempt-service-accounts=" + exempt,
		"--webhook-server-port=" + strconv.Itoa(port),
		"--webhook-server-tls-server-cert-dir=" + certDir,
	}})
	member := "etcd-main-192.0.2.1"
	harness.Eventually(t, 60*time.Second, "druid makes the member Leases and binds its Role to the Etcd's ServiceAccount", func() error {
		l := &coordinationv1.Lease{}
		if err := admin.Get(t.Context(), client.ObjectKey{Namespace: druidNamespace, Name: member}, l); err != nil {
			return err
		}
		if l.Labels[druidv1alpha1.LabelManagedByKey] != druidv1alpha1.LabelManagedByValue {
			return fmt.Errorf("lease %s labels %v: not managed by druid", member, l.Labels)
		}
		return admin.Get(t.Context(), client.ObjectKey{Namespace: druidNamespace, Name: druidv1alpha1.GetRoleBindingName(etcd.ObjectMeta)}, &rbacv1.RoleBinding{})
	})
	ca, err := os.ReadFile(certs.CA)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(t.Context(), protectionWebhook(port, ca)); err != nil {
		t.Fatal(err)
	}
	enforced(t, "druid's webhook refuses a foreign account", druidWebhook, func(ctx context.Context) error {
		return patchHolder(ctx, otherSA.Client, member, client.DryRunAll)
	})

	// RBAC alone would let the Etcd's ServiceAccount update any Lease of
	// the namespace: druid's Role says so.
	checkAccess(t, env, druidIdentity, []access{{"update", "coordination.k8s.io", "leases", "", druidNamespace, "kube-controller-manager"}}, nil)

	checkLeaseWrites(t, "webhook on", []leaseWrite{
		{"the Etcd's ServiceAccount renews a member Lease", func(ctx context.Context) error { return renewAs(ctx, agent, etcd, "192.0.2.1") }, "", nil},
		{"another ServiceAccount with the same Role renews it", func(ctx context.Context) error { return renewAs(ctx, otherSA, etcd, "192.0.2.1") },
			druidWebhook, []string{"changes from service account " + other + " are disallowed", druidv1alpha1.DisableEtcdComponentProtectionAnnotation}},
		{"the Etcd's ServiceAccount updates kube-controller-manager's Lease, as druid's Role allows", func(ctx context.Context) error { return renewAsKCM(ctx, agent.Client) },
			anyPolicy, []string{"etcdlet (" + druidIdentity + ") may write only", "not kube-system/kube-controller-manager"}},
	})
	// An exempt account passes the webhook only while no reconcile of the
	// Etcd runs (druid's first one may still be under way).
	harness.Eventually(t, 60*time.Second, "an exempt ServiceAccount renews a member Lease", func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		return renewAs(ctx, exemptSA, etcd, "192.0.2.1")
	})
}
