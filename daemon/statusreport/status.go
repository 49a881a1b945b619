// Package statusreport builds and renders the report of `etcdlet status`: every
// desired and actual member with its role and health, and the plan.
package statusreport

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/membership"
	"github.com/etcdlet/etcdlet/daemon/node"
)

// Report is the status of one cluster as seen from one node.
type Report struct {
	Cluster   string `json:"cluster"`
	ClusterID string `json:"clusterID,omitempty"`
	// Reached: a member answered a linearizable member list, so the
	// cluster has quorum.
	Reached bool `json:"reached"`
	// Answered: some member of the cluster answered, if only without
	// quorum (a serializable member list). Neither Reached nor Answered:
	// no member could be asked at all.
	Answered bool     `json:"answered"`
	Problems []string `json:"problems,omitempty"`
	// ListProblems says why the member list was rejected, one rule each
	// (missing file, a line that is no IP, the wrong length).
	ListProblems []string `json:"listProblems,omitempty"`
	// ListInForce is the list the agent keeps in force while the current
	// one is rejected: the last one it applied. Empty when the list is
	// accepted, or when there is none to fall back to.
	ListInForce []string `json:"listInForce,omitempty"`
	Members     []Row    `json:"members"`
	Plan        Plan     `json:"plan"`
	// Silent lists the listed members that do not answer (down, cut
	// off): the agents wait for them (membership.Silent).
	Silent []string `json:"silent,omitempty"`
	// Foreign lists endpoints that answered for another cluster; nothing
	// is ever done to or for them.
	Foreign []string `json:"foreign,omitempty"`
	// ListRefused says why the member list is refused (it would orphan
	// the cluster); the last applied list stays in force.
	ListRefused string `json:"listRefused,omitempty"`
	// Local is what the agent decides about this node's own member.
	Local *Local `json:"local,omitempty"`
	// Converged: the members are exactly the list, all voting and healthy.
	Converged bool `json:"converged"`
	// Configuration says how the configuration file differs from the one
	// the agent runs (daemon.ConfigDrift); the report is computed from
	// the file. Empty when they are the same.
	Configuration string `json:"configuration,omitempty"`
	// Data is what each listed node's member data holds, the most
	// advanced first, asked when the cluster does not answer with quorum:
	// the evidence for choosing the survivor to recover from.
	Data []consent.DataReport `json:"data,omitempty"`
	// ClusterVersion is the cluster version, as a member's /version
	// reports it: the lowest minor its members run, or the target of a
	// downgrade enabled. Empty when not asked (no quorum) or not known.
	ClusterVersion string `json:"clusterVersion,omitempty"`
	// Downgrade is the target version of a downgrade enabled in the
	// cluster (etcd's downgrade API, 3.6 and later), as its members report
	// it; empty when none is.
	Downgrade string `json:"downgrade,omitempty"`
	// Recovery says what recovers the cluster from Data should its quorum
	// not come back (RecoveryHint).
	Recovery string `json:"recovery,omitempty"`
	// TwoNode says what the two-node failover does while the cluster has
	// no quorum (pacemaker configured, two listed nodes): this node runs
	// its member alone now, or why not.
	TwoNode string `json:"twoNode,omitempty"`
	// ClusterList says how the member list kept in the cluster stands
	// (members.source cluster): its revision and last change, and whether
	// this node's copy holds it.
	ClusterList string `json:"clusterList,omitempty"`
	// Snapshots says where this node's snapshots go (tasks.Whereabouts).
	Snapshots string `json:"snapshots,omitempty"`
	// Certificates says how the certificates the configuration names
	// stand (certs.Summary).
	Certificates string `json:"certificates,omitempty"`
	// Insecure lists the settings that make this node less secure than
	// etcdlet's defaults (config.SecurityWarnings).
	Insecure []string `json:"insecure,omitempty"`
	// Reporting is the state of the agent's Kubernetes reporting, as the
	// agent last saved it (kubernetes section).
	Reporting []kube.TargetState `json:"reporting,omitempty"`
	// Lists are the member lists the agents posted (this node's first),
	// when the cluster was reached: changes about addresses they disagree
	// on wait until they agree.
	Lists []AgentList `json:"lists,omitempty"`
}

// AgentList is one agent's posted member list.
type AgentList struct {
	Node   string   `json:"node"`
	Digest string   `json:"digest"`
	List   []string `json:"list"`
	// Since is when the agent took the list in force (its clock).
	Since time.Time `json:"since"`
	// Differs: not this node's list.
	Differs  bool   `json:"differs"`
	Refusing string `json:"refusing,omitempty"`
	// ThisNode marks this node's own list (not posted yet when Posted is
	// false).
	ThisNode bool `json:"thisNode,omitempty"`
	Posted   bool `json:"posted"`
}

// Row is one desired or actual member.
type Row struct {
	Name     string `json:"name"`
	IP       string `json:"ip,omitempty"`
	MemberID string `json:"memberID,omitempty"`
	// Role is leader, voter or learner; empty for a listed address that is
	// not a member.
	Role string `json:"role,omitempty"`
	// Health is healthy, unhealthy (Problem says why), or unknown (the
	// cluster could not be asked about this member).
	Health  string `json:"health"`
	Problem string `json:"problem,omitempty"`
	DBSize  int64  `json:"dbSize,omitempty"`
	// RaftIndex is the member's applied raft index.
	RaftIndex  uint64   `json:"raftIndex,omitempty"`
	PeerURLs   []string `json:"peerURLs,omitempty"`
	ClientURLs []string `json:"clientURLs,omitempty"`
	// InList is yes (listed member), no (member not listed: will leave),
	// missing (listed, not a member yet), conflict, or unknown (listed, but
	// the cluster was not reached to tell whether it is a member; or no
	// valid list is in force to compare with).
	InList string `json:"inList"`
	// Version is the member's etcd server version, StorageVersion its
	// data's; empty when the member was not asked (no quorum) or is an
	// etcd before 3.6 (no storage version).
	Version        string `json:"version,omitempty"`
	StorageVersion string `json:"storageVersion,omitempty"`
}

// Local is the decision about this node's own member.
type Local struct {
	Node     string `json:"node"`
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
	// Refusal names the safety rule behind the decision, if any
	// (etcdlet_refusals_total's reason), e.g. bootstrap-not-approved.
	Refusal string `json:"refusal,omitempty"`
	// Held is a change that restarts the running member (a new etcd
	// version, another manifest), held until a member-restart task
	// carries it out under the cluster-wide task lock.
	Held string `json:"held,omitempty"`
}

// Plan is what the agent would do next.
type Plan struct {
	Next    string   `json:"next,omitempty"`
	Waiting []string `json:"waiting,omitempty"`
}

// FromSnapshot assembles the report from a node's look: the cluster as
// Build shows it, plus this node's own decision, what answered for another
// cluster, why a list is refused, and why it was rejected.
func FromSnapshot(cluster string, s node.Snapshot) Report {
	r := Build(cluster, s.Desired, s.View)
	if s.ListErr != nil {
		r.ListProblems = strings.Split(s.ListErr.Error(), "\n")
		if s.ListOK {
			r.ListInForce = identity.AddrStrings(s.List)
		}
	}
	if !s.ListOK {
		return withoutList(r)
	}
	if s.View.Reached {
		r.Plan = Plan{}
		if s.Plan.Next != nil {
			r.Plan.Next = s.Plan.Next.String()
		}
		for _, w := range s.Plan.Waiting {
			r.Plan.Waiting = append(r.Plan.Waiting, w.String())
		}
		if !r.Converged && r.Plan.Next == "" && len(r.Plan.Waiting) == 0 {
			r.Plan.Waiting = []string{"nothing to change; waiting for members to become healthy"}
		}
	}
	for _, f := range s.View.Foreign {
		r.Foreign = append(r.Foreign, f.String())
	}
	r.ListRefused = s.Orphaning
	if a := s.View.Lists; a.Known {
		own := a.Own
		r.Lists = append(r.Lists, AgentList{Node: own.Node, Digest: own.Digest(), List: own.List, Since: own.ReadAt, Refusing: own.Refusing,
			ThisNode: true, Posted: own.Since != 0})
		for _, p := range a.Others {
			r.Lists = append(r.Lists, AgentList{Node: p.Node, Digest: p.Digest(), List: p.List, Since: p.ReadAt, Refusing: p.Refusing,
				Differs: p.Digest() != own.Digest(), Posted: true})
		}
	}
	if v := s.TwoNode; v != nil && v.Force {
		r.TwoNode = "this node runs its member alone now: " + v.Reason
	} else if v != nil {
		r.TwoNode = "waits: " + v.Reason
	}
	if s.Decision.Kind != "" {
		r.Local = &Local{Node: s.Self.Name, Decision: string(s.Decision.Kind), Reason: s.Decision.Reason, Refusal: string(s.Decision.Refusal)}
		if h := s.HeldChange; h != nil {
			r.Local.Held = h.Reason
		}
	}
	if s.SelfErr != nil {
		r.Local = &Local{Decision: DecisionUnknownNode, Reason: "cannot tell which member is this node, so it does nothing: " + s.SelfErr.Error()}
	}
	return r
}

// Done is what etcdlet status --wait waits for: membership matches the
// list (Converged), and this node holds no change for a member-restart
// task.
func (r Report) Done() bool { return r.Converged && (r.Local == nil || r.Local.Held == "") }

// DecisionUnknownNode is this node's decision when it cannot tell its own
// address (node.address unset, and no single listed address is local).
const DecisionUnknownNode = "unknown-node"

// withoutList is the report when no list is in force (none valid, none
// applied before): the members are shown, but nothing says whether they
// belong, and nothing is planned.
func withoutList(r Report) Report {
	for i := range r.Members {
		r.Members[i].InList = "unknown"
	}
	r.Plan = Plan{Waiting: []string{"no valid member list in force: no membership change is planned"}}
	r.Converged = false
	return r
}

// Build assembles the report from the desired list and one observation.
func Build(cluster string, desired []identity.Member, v membership.View) Report {
	r := Report{Cluster: cluster, Reached: v.Reached, Answered: v.Reached || v.ClusterID != 0, Problems: v.Problems}
	if v.ClusterID != 0 {
		r.ClusterID = membership.IDString(v.ClusterID)
	}
	plan := membership.MakePlan(desired, v.Observation)
	if v.Reached {
		if plan.Next != nil {
			r.Plan.Next = plan.Next.String()
		}
		for _, w := range plan.Waiting {
			r.Plan.Waiting = append(r.Plan.Waiting, w.String())
		}
	} else {
		r.Plan.Waiting = []string{"cluster not reachable with quorum: no membership change can be planned"}
	}
	if v.Reached {
		r.Silent = identity.IPs(membership.Silent(desired, v.Observation))
	}
	for _, mem := range v.Members {
		if t := mem.Health.DowngradeTarget; t != "" {
			r.Downgrade = t
		}
	}
	m := membership.Match(desired, v.Members)
	for _, p := range m.Matched {
		r.Members = append(r.Members, row(p.Member, p.Desired.Name, p.Desired.IP.String(), "yes", v))
	}
	for _, e := range m.Extra {
		r.Members = append(r.Members, row(e, e.Name, ipOf(e), "no", v))
	}
	for _, c := range m.Conflicts {
		r.Members = append(r.Members, row(c.Member, c.Member.Name, ipOf(c.Member), "conflict", v))
	}
	for _, d := range m.Missing {
		if v.Reached {
			r.Members = append(r.Members, Row{Name: d.Name, IP: d.IP.String(), Health: "-", InList: "missing"})
		} else {
			// Without the member list nothing says whether it is a member.
			r.Members = append(r.Members, Row{Name: d.Name, IP: d.IP.String(), Health: "unknown", InList: "unknown"})
		}
	}
	slices.SortFunc(r.Members, func(a, b Row) int { return strings.Compare(a.Name, b.Name) })
	r.Converged = v.Reached && plan.Converged() && len(m.Missing) == 0 && len(m.Extra) == 0 &&
		!slices.ContainsFunc(r.Members, func(row Row) bool { return row.Role == "learner" || row.Health != "healthy" })
	if v.Reached && !r.Converged && r.Plan.Next == "" && len(r.Plan.Waiting) == 0 {
		r.Plan.Waiting = []string{"nothing to change; waiting for members to become healthy"}
	}
	return r
}

func row(m membership.Member, name, ip, inList string, v membership.View) Row {
	if name == "" {
		name = "(unstarted)"
	}
	r := Row{Name: name, IP: ip, MemberID: membership.IDString(m.ID), InList: inList,
		DBSize: m.Health.DBSize, RaftIndex: m.Health.RaftAppliedIndex, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs,
		Version: m.Health.Version, StorageVersion: m.Health.StorageVersion}
	switch {
	case m.IsLearner:
		r.Role = "learner"
	case m.ID == v.LeaderID:
		r.Role = "leader"
	default:
		r.Role = "voter"
	}
	r.Health = "healthy"
	switch {
	case !v.Reached:
		// Without quorum the members come from a serializable list and
		// nobody's health was asked.
		r.Health = "unknown"
	case !m.InRaft():
		r.Health, r.Problem = "unhealthy", m.Health.Problem
	case !m.Healthy():
		r.Health, r.Problem = "unhealthy", "alarm "+strings.Join(m.Health.Alarms, ", ")+" raised by this member (it still votes)"
	}
	return r
}

func ipOf(m membership.Member) string {
	for _, u := range m.PeerURLs {
		if ip, ok := identity.IPFromURL(u); ok {
			return ip.String()
		}
	}
	return ""
}

// WriteJSON renders the report as indented JSON.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable renders the report for a terminal.
func WriteTable(w io.Writer, r Report) error {
	id := r.ClusterID
	if id == "" {
		id = "unknown"
	}
	fmt.Fprintf(w, "cluster %s (ID %s)\n\n", r.Cluster, id)
	if r.Configuration != "" {
		fmt.Fprintf(w, "CONFIGURATION NOT IN FORCE: %s. What follows is computed from the file, not from what the agent runs.\n\n", r.Configuration)
	}
	for _, warning := range r.Insecure {
		fmt.Fprintf(w, "INSECURE: %s\n\n", warning)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tIP\tMEMBER ID\tROLE\tHEALTH\tDB SIZE\tRAFT INDEX\tIN LIST\tVERSION")
	for _, m := range r.Members {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, dash(m.IP), dash(m.MemberID), dash(m.Role),
			m.Health, size(m.DBSize), count(m.RaftIndex), m.InList, Versions(m))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, m := range r.Members {
		if m.Problem != "" {
			fmt.Fprintf(w, "unhealthy: %s: %s\n", m.Name, m.Problem)
		}
	}
	if r.ClusterVersion != "" {
		fmt.Fprintf(w, "cluster version: %s\n", r.ClusterVersion)
	}
	if r.Downgrade != "" {
		fmt.Fprintf(w, "downgrade: enabled, to %s (etcd's downgrade API): it ends when every member runs that version\n", r.Downgrade)
	}
	switch {
	case r.Converged:
		fmt.Fprintln(w, "plan: nothing to do; membership matches the list")
	default:
		if r.Plan.Next != "" {
			fmt.Fprintf(w, "plan: next: %s\n", r.Plan.Next)
		}
		for _, wt := range r.Plan.Waiting {
			fmt.Fprintf(w, "plan: waiting: %s\n", wt)
		}
	}
	for _, ip := range r.Silent {
		fmt.Fprintf(w, "waiting for %s: listed, its member does not answer; if that host is gone for good, %s\n", ip, node.SilentHint)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "unreachable: %s\n", p)
	}
	switch {
	case !r.Answered:
		fmt.Fprintln(w, "cluster: unreachable: no member answered")
	case !r.Reached:
		fmt.Fprintln(w, "cluster: no quorum: members answer, but not a majority of the voters agree; nothing can be written or changed")
	}
	writeList(w, r)
	writeAgentLists(w, r.Lists)
	for _, f := range r.Foreign {
		fmt.Fprintf(w, "another cluster: %s (nothing is done to or for it)\n", f)
	}
	if r.ListRefused != "" {
		fmt.Fprintf(w, "list refused: %s; the last applied list stays in force\n", r.ListRefused)
	}
	if l := r.Local; l != nil {
		line := fmt.Sprintf("this node (%s): %s", cmp.Or(l.Node, "address unknown"), l.Decision)
		if l.Reason != "" {
			line += ": " + l.Reason
		}
		if l.Held != "" {
			line += "; holding a change that restarts it (" + l.Held + ") for a member-restart task, one host at a time"
		}
		fmt.Fprintln(w, line)
	}
	WriteData(w, r.Data)
	if r.TwoNode != "" {
		fmt.Fprintf(w, "two-node failover: %s\n", r.TwoNode)
	}
	if r.Recovery != "" {
		fmt.Fprintf(w, "recovery: %s\n", r.Recovery)
	}
	if r.ClusterList != "" {
		fmt.Fprintf(w, "member list: %s\n", r.ClusterList)
	}
	if r.Snapshots != "" {
		fmt.Fprintf(w, "snapshots: %s\n", r.Snapshots)
	}
	if r.Certificates != "" {
		fmt.Fprintf(w, "certificates: %s\n", r.Certificates)
	}
	writeReporting(w, r.Reporting)
	return nil
}

// writeList says why the member list was rejected, one line per rule,
// and which list the agent follows meanwhile.
func writeList(w io.Writer, r Report) {
	if len(r.ListProblems) == 0 {
		return
	}
	for _, p := range r.ListProblems {
		fmt.Fprintf(w, "list invalid: %s\n", p)
	}
	if len(r.ListInForce) > 0 {
		fmt.Fprintf(w, "list in force: the last applied list [%s], until the list is valid again\n", strings.Join(r.ListInForce, " "))
	} else {
		fmt.Fprintln(w, "list in force: none; no membership change is planned")
	}
}

// WriteData shows each listed node's member data, the most advanced
// first.
func WriteData(w io.Writer, reports []consent.DataReport) {
	if len(reports) == 0 {
		return
	}
	fmt.Fprintln(w, "\nmember data of the listed nodes, the furthest log first (a cluster that lost its quorum for good is recovered from the first: etcdlet recover):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NODE\tMEMBER ID\tLOG END (TERM/INDEX)\tCOMMIT\tREVISION\tMEMBER")
	for _, d := range reports {
		switch {
		case d.Error != "":
			fmt.Fprintf(tw, "  %s\t-\t-\t-\t-\t%s\n", d.Node, d.Error)
		case !d.HasData():
			fmt.Fprintf(tw, "  %s\t-\t-\t-\t-\tno data\n", d.Node)
		case d.RevisionUnknown:
			fmt.Fprintf(tw, "  %s\t%s\t%d/%d\t%d\t-\trunning; revision unknown: %s\n", d.Node, d.MemberID, d.LastTerm, d.LastIndex, d.Commit, d.Note)
		default:
			member := map[bool]string{true: "running", false: "stopped"}[d.Running]
			if d.RetiredFor != "" {
				member += ", promised " + d.RetiredFor + " not to start again"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d/%d\t%d\t%d\t%s\n", d.Node, d.MemberID, d.LastTerm, d.LastIndex, d.Commit, d.Revision, member)
		}
	}
	_ = tw.Flush()
}

// RecoveryHint says how the cluster whose listed nodes' data reports are
// ranked in reports (the furthest log first) is recovered should its
// quorum not come back: etcdlet recover on the node whose log goes
// furthest, naming the silent nodes gone; or, with no data left, a
// snapshot restore.
func RecoveryHint(reports []consent.DataReport) string {
	if i := slices.IndexFunc(reports, func(d consent.DataReport) bool { return d.RetiredFor != "" }); i >= 0 {
		by := reports[i].RetiredFor
		return fmt.Sprintf("a recovery runs on %s (the other survivors promised it not to start their members again): start etcdlet there, and they join the recovered cluster; "+
			"should %[1]s be gone for good, run etcdlet recover on another survivor naming it with --gone", by)
	}
	first := slices.IndexFunc(reports, consent.DataReport.HasData)
	if first < 0 {
		return "no listed node holds member data: restore a snapshot (etcdlet restore)"
	}
	var silent []string
	for _, d := range reports {
		if d.Error != "" {
			silent = append(silent, d.Node)
		}
	}
	if len(silent) == 0 {
		return fmt.Sprintf("should quorum not come back, on %s (the furthest log): etcdlet recover", reports[first].Node)
	}
	return fmt.Sprintf("if %s are gone for good, on %s (the furthest log of the nodes that answer): etcdlet recover --gone %s",
		strings.Join(silent, ", "), reports[first].Node, strings.Join(silent, ","))
}

// writeAgentLists shows the agents' posted lists when one differs from
// this node's (agreement is the normal case, not worth a line each).
func writeAgentLists(w io.Writer, lists []AgentList) {
	if !slices.ContainsFunc(lists, func(l AgentList) bool { return l.Differs || !l.Posted || l.Refusing != "" }) {
		return
	}
	for _, l := range lists {
		line := fmt.Sprintf("list of %s: %s [%s] since %s", l.Node, l.Digest, strings.Join(l.List, " "), l.Since.Local().Format(time.DateTime))
		switch {
		case l.ThisNode && !l.Posted:
			line += " (this node's; not posted yet: no change follows it)"
		case l.ThisNode:
			line += " (this node's)"
		case l.Differs:
			line += " (differs: changes about the addresses in dispute wait: ListsDisagree)"
		}
		if l.Refusing != "" {
			line += "; refusing to join: " + l.Refusing
		}
		fmt.Fprintln(w, line)
	}
}

// writeReporting lists each Kubernetes target: when it was last written
// (or found current), and the error of a failing one.
func writeReporting(w io.Writer, states []kube.TargetState) {
	if len(states) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, s := range states {
		last := "never"
		if !s.LastSuccess.IsZero() {
			last = s.LastSuccess.Local().Format(time.DateTime)
		}
		line := fmt.Sprintf("kubernetes: %s: last success %s", s.Target, last)
		if s.Detail != "" {
			line += "; " + s.Detail
		}
		if s.LastError != "" {
			line += fmt.Sprintf("; failing (%d attempts): %s", max(s.Failures, 1), s.LastError)
		}
		fmt.Fprintln(w, line)
	}
}

// Versions is a member's server version, and its data's when it differs
// ("3.6.5 (storage 3.5.0)": in the middle of an upgrade or a downgrade);
// "-" when not known.
func Versions(m Row) string {
	switch {
	case m.Version == "":
		return "-"
	case m.StorageVersion == "" || minor(m.Version) == minor(m.StorageVersion):
		return m.Version
	}
	return fmt.Sprintf("%s (storage %s)", m.Version, m.StorageVersion)
}

// minor is a version's major.minor ("3.6" of "3.6.5").
func minor(v string) string {
	if parts := strings.SplitN(v, ".", 3); len(parts) >= 2 {
		return parts[0] + "." + parts[1]
	}
	return v
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func count(n uint64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func size(b int64) string {
	switch {
	case b == 0:
		return "-"
	case b < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	case b < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	}
}
