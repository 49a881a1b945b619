package statusreport

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
)

var scheme = identity.Scheme{Cluster: "etcd-main", PeerScheme: "http", ClientScheme: "http", PeerPort: 2380, ClientPort: 2379}

func member(ip string, id uint64, learner bool, problem string) membership.Member {
	d := scheme.For(netip.MustParseAddr(ip))
	m := membership.Member{ID: id, Name: d.Name, PeerURLs: []string{d.PeerURL}, ClientURLs: []string{d.ClientURL}, IsLearner: learner,
		Health: membership.Health{Reachable: problem == "", Problem: problem, Leader: 0x1, DBSize: 20480, RaftAppliedIndex: 42}}
	if problem == "" {
		m.Health.Version, m.Health.StorageVersion = "3.6.5", "3.6.0"
	}
	return m
}

func TestTableReport(t *testing.T) {
	desired := scheme.ForAll([]netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("192.0.2.4"), netip.MustParseAddr("2001:db8::5")})
	view := membership.View{Reached: true, Established: true, Observation: membership.Observation{ClusterID: 0xc1, LeaderID: 0x1, Members: []membership.Member{
		member("192.0.2.1", 0x1, false, ""),
		member("192.0.2.2", 0x2, false, ""),
		member("192.0.2.3", 0x3, false, "no answer within 2s"),
		member("192.0.2.4", 0x4, true, ""),
	}}}
	// A downgrade from 3.7 under way: the leader still runs 3.7, its data
	// at 3.6 already; the learner runs 3.6.
	view.Members[0].Health.Version, view.Members[0].Health.DowngradeTarget = "3.7.3", "3.6.0"
	r := Build("etcd-main", desired, view)
	var out bytes.Buffer
	if err := WriteTable(&out, r); err != nil {
		t.Fatal(err)
	}
	want := `cluster etcd-main (ID c1)

NAME                   IP           MEMBER ID  ROLE     HEALTH     DB SIZE   RAFT INDEX  IN LIST  VERSION
etcd-main-192.0.2.1    192.0.2.1    1          leader   healthy    20.0 KiB  42          yes      3.7.3 (storage 3.6.0)
etcd-main-192.0.2.2    192.0.2.2    2          voter    healthy    20.0 KiB  42          no       3.6.5
etcd-main-192.0.2.3    192.0.2.3    3          voter    unhealthy  20.0 KiB  42          yes      -
etcd-main-192.0.2.4    192.0.2.4    4          learner  healthy    20.0 KiB  42          yes      3.6.5
etcd-main-2001:db8::5  2001:db8::5  -          -        -          -         -           missing  -

unhealthy: etcd-main-192.0.2.3: no answer within 2s
downgrade: enabled, to 3.6.0 (etcd's downgrade API): it ends when every member runs that version
plan: next: promote etcd-main-192.0.2.4 [4]: listed learner joins the voters once in sync
plan: waiting: add-learner etcd-main-2001:db8::5 waits (LearnerPending): learner etcd-main-192.0.2.4 must be promoted first; etcd allows one learner at a time
plan: waiting: remove etcd-main-192.0.2.2 waits (JoinPending): etcd-main-192.0.2.4 must vote first; a replacement joins before the old member leaves
waiting for 192.0.2.3: listed, its member does not answer; if that host is gone for good, take its IP off the member list (docs: Remove a node; with members.source cluster: etcdlet members remove <IP>): the agents then remove its member, never below quorum
`
	if out.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", out.String(), want)
	}
	if r.Converged {
		t.Error("a report with a learner, a missing and an extra member is not converged")
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Members) != 5 || back.Plan.Next == "" ||
		back.Downgrade != "3.6.0" || back.Members[0].Version != "3.7.3" || back.Members[0].StorageVersion != "3.6.0" {
		t.Errorf("JSON round trip: %v %+v", err, back)
	}
}

func TestConvergedAndUnreachable(t *testing.T) {
	desired := scheme.ForAll([]netip.Addr{netip.MustParseAddr("192.0.2.1")})
	ok := Build("etcd-main", desired, membership.View{Reached: true, Observation: membership.Observation{ClusterID: 1, LeaderID: 1,
		Members: []membership.Member{member("192.0.2.1", 1, false, "")}}})
	if !ok.Converged {
		t.Errorf("single healthy listed voter must be converged: %+v", ok)
	}
	down := Build("etcd-main", desired, membership.View{Problems: []string{"http://192.0.2.1:2379: connection refused"}})
	// Unreached, nothing says whether the listed address is a member.
	if down.Converged || len(down.Plan.Waiting) != 1 || down.Members[0].InList != "unknown" || down.Members[0].Health != "unknown" {
		t.Errorf("unreachable cluster: %+v", down)
	}
	// A member that does not answer: a fixed health value, the reason
	// apart, and the plan says what is awaited also in JSON.
	three := scheme.ForAll([]netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")})
	sick := Build("etcd-main", three, membership.View{Reached: true, Observation: membership.Observation{ClusterID: 1, LeaderID: 1,
		Members: []membership.Member{member("192.0.2.1", 1, false, ""), member("192.0.2.2", 2, false, ""), member("192.0.2.3", 3, false, "no answer within 2s")}}})
	if row := sick.Members[2]; row.Health != "unhealthy" || row.Problem != "no answer within 2s" {
		t.Errorf("unhealthy row = %+v", row)
	}
	if sick.Converged || len(sick.Plan.Waiting) != 1 || sick.Plan.Waiting[0] != "nothing to change; waiting for members to become healthy" {
		t.Errorf("plan of an unhealthy cluster = %+v", sick.Plan)
	}
}

// A configuration file that is not the one in force, and an insecure
// setting, head the report, above the members, where an operator cannot
// miss them, and are in the JSON.
func TestInsecureSettingsHeadTheReport(t *testing.T) {
	r := Build("etcd-main", nil, membership.View{Reached: true})
	r.Insecure = []string{"etcd.insecure is set: plaintext"}
	r.Configuration = "the agent refused it: reload refused: etcd.clientPort changed"
	var out bytes.Buffer
	if err := WriteTable(&out, r); err != nil {
		t.Fatal(err)
	}
	const head = "cluster etcd-main (ID unknown)\n\n" +
		"CONFIGURATION NOT IN FORCE: the agent refused it: reload refused: etcd.clientPort changed. What follows is computed from the file, not from what the agent runs.\n\n" +
		"INSECURE: etcd.insecure is set: plaintext\n\nNAME"
	if !bytes.HasPrefix(out.Bytes(), []byte(head)) {
		t.Errorf("table:\n%s\nwant it to start:\n%s", out.String(), head)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js.Bytes(), []byte(`"insecure": [`)) || !bytes.Contains(js.Bytes(), []byte(`"configuration": "the agent refused it`)) {
		t.Errorf("JSON has no insecure list or configuration:\n%s", js.String())
	}
}

// Each reporting target is one line: when it last succeeded, what the
// agent does for it, and the error of a failing one.
func TestReportingLines(t *testing.T) {
	ok := time.Date(2026, 11, 24, 10, 31, 2, 0, time.Local)
	r := Report{Cluster: "etcd-main", Reporting: []kube.TargetState{
		{Target: "Lease kube-system/etcd-main-192.0.2.1", Detail: "renewing as 5fc4:4f38:Leader", LastSuccess: ok, LastAttempt: ok},
		{Target: "Etcd kube-system/etcd-main (read)", LastAttempt: ok, LastError: "connection refused", Failures: 3},
	}}
	var out bytes.Buffer
	if err := WriteTable(&out, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"kubernetes: Lease kube-system/etcd-main-192.0.2.1: last success 2026-11-24 10:31:02; renewing as 5fc4:4f38:Leader\n",
		"kubernetes: Etcd kube-system/etcd-main (read): last success never; failing (3 attempts): connection refused\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// A rejected list never hides the cluster: the members are shown against
// the list the agent keeps in force, with one line per problem; without
// any list to fall back to, the members are shown without a verdict.
func TestListProblemsAreExtraLines(t *testing.T) {
	listErr := config.Errors{{Path: "members.file", Value: "/etc/etcdlet/members", Rule: "must exist"}, {Path: "members.file[2]", Value: "10.0.0", Rule: "must be an IP"}}
	ips := []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	view := membership.View{Reached: true, Established: true, Observation: membership.Observation{ClusterID: 0xc1, LeaderID: 0x1,
		Members: []membership.Member{member("192.0.2.1", 0x1, false, "")}}}

	kept := FromSnapshot("etcd-main", node.Snapshot{List: ips, ListOK: true, ListErr: listErr, Desired: scheme.ForAll(ips), View: view})
	var out bytes.Buffer
	if err := WriteTable(&out, kept); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"etcd-main-192.0.2.1  192.0.2.1  1          leader  healthy",
		"list invalid: members.file: ",
		"list invalid: members.file[2]: ",
		"list in force: the last applied list [192.0.2.1], until the list is valid again\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	if len(kept.ListProblems) != 2 || kept.Members[0].InList != "yes" {
		t.Errorf("report = %+v", kept)
	}

	none := FromSnapshot("etcd-main", node.Snapshot{ListErr: listErr, View: view})
	out.Reset()
	if err := WriteTable(&out, none); err != nil {
		t.Fatal(err)
	}
	if none.Members[0].InList != "unknown" || none.Converged || !strings.Contains(out.String(), "list in force: none; no membership change is planned\n") ||
		!strings.Contains(out.String(), "plan: waiting: no valid member list in force") {
		t.Errorf("without a list in force: %+v\n%s", none, out.String())
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, none); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js.Bytes(), []byte(`"listProblems": [`)) {
		t.Errorf("JSON has no listProblems:\n%s", js.String())
	}
}

// Without quorum the members come from one member's serializable view:
// their health is unknown, not "unhealthy", and the report says which of
// "no quorum" and "unreachable" holds.
func TestNoQuorumAndUnreachable(t *testing.T) {
	three := scheme.ForAll([]netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")})
	serializable := []membership.Member{member("192.0.2.1", 1, false, ""), member("192.0.2.2", 2, false, ""), member("192.0.2.3", 3, false, "")}
	for i := range serializable {
		serializable[i].Health = membership.Health{}
	}
	noQuorum := Build("etcd-main", three, membership.View{Established: true, Observation: membership.Observation{ClusterID: 0xc1, Members: serializable},
		Problems: []string{"https://192.0.2.1:2379: etcdserver: request timed out"}})
	var out bytes.Buffer
	if err := WriteTable(&out, noQuorum); err != nil {
		t.Fatal(err)
	}
	if !noQuorum.Answered || noQuorum.Reached || noQuorum.Members[0].Health != "unknown" || !strings.Contains(out.String(), "cluster: no quorum:") {
		t.Errorf("no quorum: %+v\n%s", noQuorum, out.String())
	}
	down := Build("etcd-main", three, membership.View{Problems: []string{"https://192.0.2.1:2379: connection refused"}})
	out.Reset()
	if err := WriteTable(&out, down); err != nil {
		t.Fatal(err)
	}
	if down.Answered || !strings.Contains(out.String(), "cluster: unreachable: no member answered\n") {
		t.Errorf("unreachable: %+v\n%s", down, out.String())
	}
}

// A host that cannot tell its own address (node.address unset, not
// listed) is reported as this node's problem, with the cluster it reached
// as it is: not as an unreachable cluster.
func TestANodeWithoutItsAddressBlamesItself(t *testing.T) {
	ips := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::3")}
	view := membership.View{Reached: true, Observation: membership.Observation{ClusterID: 0xc1,
		Members: []membership.Member{member("192.0.2.1", 1, false, ""), member("192.0.2.2", 2, false, "")}}}
	selfErr := errors.New("node.address is empty and none of the listed addresses [192.0.2.1 192.0.2.2 2001:db8::3] is assigned to a local interface (local addresses: [192.0.2.9]); set node.address")
	r := FromSnapshot("etcd-main", node.Snapshot{List: ips, ListOK: true, Desired: scheme.ForAll(ips), SelfErr: selfErr, View: view})
	var out bytes.Buffer
	if err := WriteTable(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	if !r.Answered || !r.Reached || strings.Contains(text, "unreachable") {
		t.Errorf("the cluster answered with quorum, but the report says otherwise: %+v\n%s", r, text)
	}
	want := "this node (address unknown): unknown-node: cannot tell which member is this node, so it does nothing: node.address is empty"
	if r.Local == nil || r.Local.Decision != DecisionUnknownNode || !strings.Contains(text, want) || !strings.Contains(text, "set node.address") {
		t.Errorf("the report does not name this node's problem (want a line with %q):\n%s", want, text)
	}
}

// What recovers a cluster whose quorum does not come back: the node whose
// log goes furthest, the silent ones named gone; without data, a restore.
func TestRecoveryHint(t *testing.T) {
	with := func(node string, index uint64) consent.DataReport {
		return consent.DataReport{Node: node, MemberID: "m", ClusterID: "c", LastTerm: 2, LastIndex: index}
	}
	silent := func(node string) consent.DataReport {
		return consent.DataReport{Node: node, Error: "its agent does not answer"}
	}
	tests := []struct {
		name    string
		reports []consent.DataReport
		want    string
	}{
		{"every node answers", []consent.DataReport{with("192.0.2.2", 9), with("192.0.2.1", 7), {Node: "192.0.2.3"}},
			"should quorum not come back, on 192.0.2.2 (the furthest log): etcdlet recover"},
		{"two silent", []consent.DataReport{with("2001:db8::3", 9), silent("2001:db8::1"), silent("2001:db8::2")},
			"if 2001:db8::1, 2001:db8::2 are gone for good, on 2001:db8::3 (the furthest log of the nodes that answer): etcdlet recover --gone 2001:db8::1,2001:db8::2"},
		{"no data anywhere", []consent.DataReport{{Node: "192.0.2.1"}, silent("192.0.2.2")},
			"no listed node holds member data: restore a snapshot (etcdlet restore)"},
		{"a recovery under way", []consent.DataReport{with("192.0.2.2", 9), {Node: "192.0.2.3", MemberID: "m", ClusterID: "c", LastTerm: 2, LastIndex: 8, RetiredFor: "192.0.2.1"}, silent("192.0.2.1")},
			"a recovery runs on 192.0.2.1 (the other survivors promised it not to start their members again): start etcdlet there, and they join the recovered cluster; " +
				"should 192.0.2.1 be gone for good, run etcdlet recover on another survivor naming it with --gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RecoveryHint(tt.reports); got != tt.want {
				t.Errorf("RecoveryHint =\n  %s\nwant\n  %s", got, tt.want)
			}
		})
	}
}
