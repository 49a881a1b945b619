package daemon

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/test/envtest"
	"github.com/etcdlet/etcdlet/test/harness"
)

// These tests run a whole agent (New, then Run) in the test process against
// envtest's real kube-apiserver with etcd-druid's CRDs. Its node is never
// listed, so it starts no member: what is under test is how it reads,
// checks and reloads its member list.

// kubeAgent is one running agent and what the test needs to drive it.
type kubeAgent struct {
	*Agent
	log *logSink
	// config renders the agent's configuration with the given list rules;
	// every call renders the same file but for them.
	config func(rules listRules) *config.Config
}

// listRules are the reloadable parts of the configuration.
type listRules struct {
	source   string // config.SourceEtcdResource or config.SourceFile
	file     string // members.file for config.SourceFile
	replicas int    // cluster.replicas, 0: unset
}

// kubeNamespace creates a namespace of its own for a test's Etcd and Events.
func kubeNamespace(t *testing.T, env *envtest.Env, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := env.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// startKubeAgent starts an agent on node address nodeIP (not listed) whose
// kubernetes section names the Etcd etcd-main in namespace, and stops it
// when the test ends.
func startKubeAgent(t *testing.T, env *envtest.Env, namespace, nodeIP string, rules listRules) *kubeAgent {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := env.WriteKubeconfig(t, filepath.Join(dir, "kubeconfig"), "etcdlet-"+namespace, "system:masters")
	clientPort, peerPort, metricsPort, agentPeerPort := freePort(t, nodeIP), freePort(t, nodeIP), freePort(t, nodeIP), freePort(t, nodeIP)
	render := func(r listRules) *config.Config {
		t.Helper()
		var b strings.Builder
		b.WriteString("cluster:\n  name: etcd-main\n")
		if r.replicas > 0 {
			fmt.Fprintf(&b, "  replicas: %d\n", r.replicas)
		}
		fmt.Fprintf(&b, "members:\n  source: %s\n", r.source)
		if r.file != "" {
			fmt.Fprintf(&b, "  file: %s\n", r.file)
		}
		fmt.Fprintf(&b, "node:\n  address: %s\n", nodeIP)
		fmt.Fprintf(&b, "etcd:\n  dataDir: %s\n  clientPort: %d\n  peerPort: %d\n  listenMetricsURL: http://%s\n",
			filepath.Join(dir, "data"), clientPort, peerPort, net.JoinHostPort(nodeIP, strconv.Itoa(metricsPort)))
		fmt.Fprintf(&b, "agent:\n  stateDir: %s\n  listen: %q\n  peerPort: %d\n  reconcileInterval: 500ms\n  idleInterval: 500ms\n  callTimeout: 1s\n",
			filepath.Join(dir, "state"), net.JoinHostPort(nodeIP, "0"), agentPeerPort)
		fmt.Fprintf(&b, "kubernetes:\n  kubeconfig: %s\n  callTimeout: 5s\n  etcd: {namespace: %s, name: etcd-main}\n", kubeconfig, namespace)
		cfg, err := config.Parse([]byte(b.String()))
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			t.Fatalf("agent configuration:\n%s\n%v", b.String(), err)
		}
		return cfg
	}
	sink := &logSink{}
	log := slog.New(slog.NewJSONHandler(sink, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := New(render(rules), log, "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("agent stopped with: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("agent did not stop within 30s")
		}
		if t.Failed() {
			t.Logf("agent log:\n%s", sink.String())
		}
	})
	return &kubeAgent{Agent: a, log: sink, config: render}
}

func freePort(t *testing.T, ip string) int {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// list is the member list in force, "" when there is none.
func (a *kubeAgent) list() string {
	addrs, ok := a.source.Current()
	if !ok {
		return ""
	}
	return strings.Join(identity.AddrStrings(addrs), ",")
}

// logSink keeps the agent's JSON log.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// at returns the messages, with their errors and problems, logged at level.
func (s *logSink) at(level slog.Level) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e map[string]any
		if json.Unmarshal(sc.Bytes(), &e) != nil || e["level"] != level.String() {
			continue
		}
		out = append(out, fmt.Sprintf("%v (error: %v, problems: %v)", e["msg"], e["error"], e["problems"]))
	}
	return out
}

// newEtcd is an Etcd in externally managed mode with list.
func newEtcd(namespace string, list ...string) *druidv1alpha1.Etcd {
	return &druidv1alpha1.Etcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "etcd-main"},
		Spec: druidv1alpha1.EtcdSpec{Labels: map[string]string{"app": "etcd"}, Replicas: int32(len(list)),
			ExternallyManagedMemberAddresses: list},
	}
}

// setEtcdList replaces the Etcd's list (and replicas with it).
func setEtcdList(ctx context.Context, env *envtest.Env, namespace string, list ...string) error {
	for {
		e := &druidv1alpha1.Etcd{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "etcd-main"}, e); err != nil {
			return err
		}
		e.Spec.ExternallyManagedMemberAddresses, e.Spec.Replicas = list, int32(len(list))
		err := env.Client.Update(ctx, e)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// events returns the messages of the agent's Events with reason in namespace.
func events(ctx context.Context, env *envtest.Env, namespace, reason string) ([]string, error) {
	var l corev1.EventList
	if err := env.Client.List(ctx, &l, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range l.Items {
		if e.Source.Component == "etcdlet" && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out, nil
}

// flushEvents records a marker Event and waits until the API server has
// it: the recorder sends Events one after another, in order, so every
// Event recorded before is in the API server then (or was dropped as a
// duplicate, which a first Event never is).
func (a *kubeAgent) flushEvents(t *testing.T, env *envtest.Env, namespace string) {
	t.Helper()
	const reason = "TestMarker"
	marker := strconv.FormatInt(time.Now().UnixNano(), 10)
	a.report.Events().Eventf(corev1.EventTypeNormal, reason, "marker %s", marker)
	harness.Eventually(t, 30*time.Second, "the marker Event reaches the API server", func() error {
		got, err := events(t.Context(), env, namespace, reason)
		if err != nil {
			return err
		}
		if !slices.Contains(got, "marker "+marker) {
			return fmt.Errorf("marker Events %q", got)
		}
		return nil
	})
}

// writeMembers replaces a members file as tools do: a new file renamed
// over it. Written by root, mode 0644, like a list only root may change.
func writeMembers(path string, list ...string) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(strings.Join(list, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
