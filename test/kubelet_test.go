package test

// The pre-kubelet hook end to end: etcdlet installed from its .deb as a
// systemd unit on Debian hosts, the real kubelet v1.37.1 running the
// member from etcdlet's static-pod manifest on Debian's containerd
// (kubehost_test.go).

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcdlet/etcdlet/test/harness"
)

// Three hosts boot with etcdlet, containerd and the standalone kubelet
// enabled: systemd starts the kubelet only after etcdlet said READY=1, the
// kubelets run etcd from etcdlet's manifests and the members form a
// cluster. A fourth host idles until the list names it, then joins through
// its running kubelet; a fifth, listed before it boots, joins as a learner
// with its manifest in place before its kubelet starts. A host dropped from
// the list leaves, its kubelet stops its etcd and its data is kept, moved
// aside inside the unit's sandbox; a hand edit of the manifest is reverted
// while the kubelet runs, and the member stays.
func TestStaticPodWithRealKubelet(t *testing.T) {
	t.Parallel()
	lab := newKubeLab(t)
	hosts := []*kubeHost{lab.addHost(1), lab.addHost(2), lab.addHost(3)}
	h1, h2, h3 := hosts[0], hosts[1], hosts[2]
	writeMembers(t, hosts, hosts...)
	lab.boot(hosts...)
	// docs/kubeadm.md: a new cluster is the operator's act, on one host.
	if out := h1.must("etcdlet", "bootstrap", "--approve"); !strings.Contains(out, "approved: this node founds a new one-member cluster") {
		t.Fatalf("etcdlet bootstrap --approve on cp1 says:\n%s", out)
	}
	cli := lab.client(h1, h3) // the hosts that stay
	waitVoters(t, cli, "the kubelets run a cluster of the three listed hosts", hosts...)
	for _, h := range hosts {
		checkHook(t, h, "")
		if err := h.etcdRuns(lab.etcd, true); err != nil {
			t.Error(err)
		}
	}

	// A fourth host as docs/kubeadm.md adds one: set up with the current
	// list, its etcdlet has nothing to run (none of the listed addresses is
	// its own) and says READY=1 at once, the kubelet starts without a
	// manifest; then the list names it on every host, an agent adds it as a
	// learner, its etcdlet starts it through the running kubelet, and it is
	// promoted.
	h4 := lab.addHost(4)
	writeMembers(t, []*kubeHost{h4}, hosts...)
	lab.boot(h4)
	checkHook(t, h4, "")
	if h4.exists(etcdManifest) {
		t.Error("cp4 is not listed, yet it has an etcd manifest")
	}
	four := []*kubeHost{h1, h2, h3, h4}
	writeMembers(t, four, four...)
	waitVoters(t, cli, "cp4 joined and was promoted", four...)

	// A fifth host, listed on every host before it boots (as provisioning
	// automation may do it): the others add it as a learner, and its
	// etcdlet's first pass joins it, so its manifest is in place before its
	// kubelet starts.
	h5 := lab.addHost(5)
	all := []*kubeHost{h1, h2, h3, h4, h5}
	writeMembers(t, all, all...)
	waitLearner(t, cli, h5)
	lab.boot(h5)
	checkHook(t, h5, "join")
	waitVoters(t, cli, "cp5 joined and was promoted", all...)

	// cp2 leaves the list: it is removed, its etcdlet takes the manifest
	// away, its kubelet stops etcd, and the data is moved aside, not
	// deleted, inside the unit's sandbox (StateDirectory=).
	stay := []*kubeHost{h1, h3, h4, h5}
	writeMembers(t, all, stay...)
	waitVoters(t, cli, "cp2 removed from the cluster", stay...)
	var moved []string
	poll(t, 2*time.Minute, "cp2's kubelet stopped etcd and etcdlet moved its data aside", func() error {
		if h2.exists(etcdManifest) {
			return errorf("%s is still there", etcdManifest)
		}
		if err := h2.etcdRuns(lab.etcd, false); err != nil {
			return err
		}
		moved, _ = filepath.Glob(h2.file(dataDir + ".etcdlet-moved-*"))
		if len(moved) == 0 {
			return errorf("no %s.etcdlet-moved-* yet\n%s", dataDir, h2.journal())
		}
		return nil
	})
	requireKeptData(t, moved)
	if kept, _ := filepath.Glob(h2.file("/var/lib/etcdlet/agent/manifests/etcd.yaml.stopped-*")); len(kept) == 0 {
		t.Error("cp2's last manifest was not kept in /var/lib/etcdlet/agent/manifests/")
	}
	for _, h := range all {
		if s := h.show("kubelet.service", "ActiveState"); s["ActiveState"] != "active" {
			t.Errorf("%s's kubelet is %s", h.name, s["ActiveState"])
		}
	}
	for _, h := range stay {
		if err := h.etcdRuns(lab.etcd, true); err != nil {
			t.Error(err)
		}
	}

	// A hand edit of the manifest while the kubelet runs is reverted, and
	// the member stays.
	orig := h1.read(etcdManifest)
	edited := regexp.MustCompile(`--log-level=\S+`).ReplaceAllString(orig, "--log-level=debug")
	if edited == orig {
		t.Fatalf("cp1's manifest has no --log-level flag to edit:\n%s", orig)
	}
	kubelet := h1.show("kubelet.service", "MainPID")["MainPID"]
	h1.write(etcdManifest, edited, 0o600)
	poll(t, time.Minute, "etcdlet reverted the hand edit of cp1's manifest", func() error {
		if h1.read(etcdManifest) != orig {
			return errorf("the manifest is not back")
		}
		for _, e := range h1.journalOf("etcdlet.service") {
			if l, ok := parseEtcdletLog(e); ok && strings.HasSuffix(l.Msg, "; reverted") && l.File == etcdManifest {
				return nil
			}
		}
		return errorf("etcdlet did not report the revert")
	})
	waitVoters(t, cli, "the cluster healthy after the revert", stay...)
	if err := h1.etcdRuns(lab.etcd, true); err != nil {
		t.Error(err)
	}
	if s := h1.show("kubelet.service", "ActiveState", "MainPID"); s["ActiveState"] != "active" || s["MainPID"] != kubelet {
		t.Errorf("cp1's kubelet is %v, want active with the PID it had before the edit, %s", s, kubelet)
	}
}

// client is an etcd client over the hosts' client URLs with kubeadm's
// healthcheck-client certificate of the first host.
func (l *kubeLab) client(hosts ...*kubeHost) *clientv3.Client {
	l.t.Helper()
	return l.clientWith(pkiDir+"/etcd/healthcheck-client", hosts...)
}

// clientWith is an etcd client over the hosts' client URLs, dialled from
// the bridge's namespace, presenting the certificate pair at base (.crt,
// .key) in the first host.
func (l *kubeLab) clientWith(base string, hosts ...*kubeHost) *clientv3.Client {
	l.t.Helper()
	tlsConfig, err := transport.TLSInfo{
		CertFile: hosts[0].file(base + ".crt"), KeyFile: hosts[0].file(base + ".key"), TrustedCAFile: filepath.Join(l.ca, "etcd/ca.crt"),
	}.ClientConfig()
	if err != nil {
		l.t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: clientURLs(hosts...), DialTimeout: 2 * time.Second, TLS: tlsConfig,
		Logger: zap.NewNop(), DialOptions: []grpc.DialOption{grpc.WithContextDialer(dialIn(l.bridgeNS))},
	})
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { cli.Close() })
	return cli
}

// waitVoters waits until the cluster's members are exactly the hosts', all
// voting, each answering Status with the same leader.
func waitVoters(t *testing.T, cli *clientv3.Client, what string, hosts ...*kubeHost) {
	t.Helper()
	var want []string
	for _, h := range hosts {
		want = append(want, "etcd-main-"+h.ip)
	}
	slices.Sort(want)
	harness.Eventually(t, 3*time.Minute, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}
		var got []string
		for _, m := range resp.Members {
			if m.IsLearner {
				return errorf("%s is a learner", m.Name)
			}
			got = append(got, m.Name)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return errorf("members %v, want %v", got, want)
		}
		leaders := map[uint64]bool{}
		for _, url := range clientURLs(hosts...) {
			s, err := cli.Status(ctx, url)
			if err != nil {
				return fmt.Errorf("%s: %w", url, err)
			}
			leaders[s.Leader] = true
		}
		if len(leaders) != 1 || leaders[0] {
			return errorf("the members do not agree on a leader: %v", leaders)
		}
		return nil
	})
}

// checkHook asserts from the host's journal what the pre-kubelet hook
// promises: systemd started the kubelet only after etcdlet.service had
// started (READY=1, for a Type=notify unit), and when etcdlet's first pass
// decided to start a new member, its manifest was written before that. A
// first pass that waits (for the operator's act that founds a new cluster,
// or to be added) or idles says READY=1 without a manifest; the kubelet
// picks it up later.
// want, if set, is that first decision.
//
// The moments are compared as their authors stamped them: journald stamps
// a service's output when it reads the pipe, which may be after systemd's
// own message about what the service did next.
func checkHook(t *testing.T, h *kubeHost, want string) {
	t.Helper()
	entries := h.journalOf("etcdlet.service", "kubelet.service")
	var first string
	var wrote, ready, kubelet time.Time
	for _, e := range entries {
		switch {
		case e.Unit == "etcdlet.service" && e.MessageID == msgUnitStarted && ready.IsZero():
			ready = e.sourceTime()
		case e.Unit == "kubelet.service" && e.MessageID == msgUnitStarting && kubelet.IsZero():
			kubelet = e.sourceTime()
		}
		if l, ok := parseEtcdletLog(e); ok {
			if l.Msg == "local member" && first == "" {
				first = l.Decision
			}
			if l.Msg == "wrote etcd manifest" && wrote.IsZero() {
				wrote = l.Time
			}
		}
	}
	// A new member's manifest can only come from this pass (a restarting
	// one's may be on disk from before).
	runs := slices.Contains([]string{"bootstrap", "found", "join"}, first)
	var problem string
	switch {
	case ready.IsZero() || kubelet.IsZero():
		problem = "the journal shows no start of etcdlet.service or kubelet.service"
	case kubelet.Before(ready):
		problem = "systemd started kubelet.service before etcdlet.service said READY=1"
	case want != "" && first != want:
		problem = fmt.Sprintf("etcdlet's first decision was %q, want %q", first, want)
	case runs && (wrote.IsZero() || wrote.After(ready)):
		problem = fmt.Sprintf("etcdlet's first pass decided %s but said READY=1 before it wrote the manifest", first)
	}
	if problem != "" {
		var lines []string
		for _, e := range entries {
			lines = append(lines, e.Unit+e.SystemdUnit+": "+e.Message)
		}
		t.Errorf("%s: %s; the journal:\n%s", h.name, problem, strings.Join(lines, "\n"))
		return
	}
	written := "no manifest yet"
	switch {
	case wrote.IsZero():
	case wrote.Before(ready):
		written = fmt.Sprintf("manifest written %s before READY=1", ready.Sub(wrote))
	default:
		written = fmt.Sprintf("manifest written %s after READY=1", wrote.Sub(ready))
	}
	t.Logf("%s: etcdlet's first decision %q, %s; the kubelet started %s after READY=1", h.name, first, written, kubelet.Sub(ready))
}

// waitLearner waits until h's member is in the cluster as a learner.
func waitLearner(t *testing.T, cli *clientv3.Client, h *kubeHost) {
	t.Helper()
	harness.Eventually(t, time.Minute, h.name+" added as a learner", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}
		for _, m := range resp.Members {
			if m.Name == "etcd-main-"+h.ip || slices.Contains(m.PeerURLs, "https://"+net.JoinHostPort(h.ip, "2380")) {
				if !m.IsLearner {
					return errorf("%s is a voter already", h.name)
				}
				return nil
			}
		}
		return errorf("%s is not a member yet", h.name)
	})
}

// journalEntry is one entry of a host's journal.
type journalEntry struct {
	Unit        string `json:"UNIT"`          // the unit systemd's own message is about
	SystemdUnit string `json:"_SYSTEMD_UNIT"` // the unit that logged it
	MessageID   string `json:"MESSAGE_ID"`
	Message     string `json:"MESSAGE"`
	Source      string `json:"_SOURCE_REALTIME_TIMESTAMP"` // when its author wrote it, in µs
}

func (e journalEntry) sourceTime() time.Time {
	us, _ := strconv.ParseInt(e.Source, 10, 64)
	return time.UnixMicro(us)
}

// systemd's message IDs for a unit's start job beginning and done.
const (
	msgUnitStarting = "7d4958e842da4a758f6c1cdc7b36dcc5"
	msgUnitStarted  = "39f53479d3a045ac8e11786248231fbf"
)

// journalOf reads the host's journal in its order: systemd's messages about
// the units and what the units logged themselves.
func (h *kubeHost) journalOf(units ...string) []journalEntry {
	h.t.Helper()
	args := []string{"journalctl", "--no-pager", "-o", "json", "--output-fields=UNIT,_SYSTEMD_UNIT,MESSAGE_ID,MESSAGE,_SOURCE_REALTIME_TIMESTAMP"}
	for i, u := range units {
		if i > 0 {
			args = append(args, "+")
		}
		args = append(args, "UNIT="+u, "+", "_SYSTEMD_UNIT="+u)
	}
	out := h.must(args...)
	var entries []journalEntry
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var e journalEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			continue // a MESSAGE that is not UTF-8 comes as an array
		}
		entries = append(entries, e)
	}
	return entries
}

// etcdletLog is one line etcdlet logged to the journal: logfmt, as
// slog's text handler writes it (agent.logFormat auto on the journal).
type etcdletLog struct {
	Time     time.Time
	Msg      string
	Decision string
	File     string
}

// parseEtcdletLog parses what etcdlet.service logged; other lines are not.
func parseEtcdletLog(e journalEntry) (etcdletLog, bool) {
	if e.SystemdUnit != "etcdlet.service" {
		return etcdletLog{}, false
	}
	fields, ok := parseLogfmt(e.Message)
	if !ok || fields["msg"] == "" {
		return etcdletLog{}, false
	}
	when, err := time.Parse(time.RFC3339Nano, fields["time"])
	if err != nil {
		return etcdletLog{}, false
	}
	return etcdletLog{Time: when, Msg: fields["msg"], Decision: fields["decision"], File: fields["file"]}, true
}

// parseLogfmt splits key=value pairs, values bare or quoted as Go quotes
// them (slog.TextHandler); false for a line that is not logfmt (a JSON
// line among them is not).
func parseLogfmt(line string) (map[string]string, bool) {
	out := map[string]string{}
	for rest := strings.TrimSpace(line); rest != ""; rest = strings.TrimLeft(rest, " ") {
		key, after, found := strings.Cut(rest, "=")
		if !found || key == "" || strings.ContainsAny(key, " \"{") {
			return nil, false
		}
		if strings.HasPrefix(after, `"`) {
			quoted, err := strconv.QuotedPrefix(after)
			if err != nil {
				return nil, false
			}
			out[key], _ = strconv.Unquote(quoted)
			rest = after[len(quoted):]
			continue
		}
		value, next, _ := strings.Cut(after, " ")
		out[key], rest = value, next
	}
	return out, len(out) > 0
}
