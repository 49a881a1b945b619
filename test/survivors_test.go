package test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/consent"
	"github.com/etcdlet/etcdlet/daemon/statusreport"
	"github.com/etcdlet/etcdlet/test/harness"
)

// A listed member that stops is waited for, and status and the log say
// so. When the cluster does not answer with quorum, `etcdlet status` asks
// every listed node's agent what its member's data holds, and lists the
// nodes the furthest log first: the evidence for choosing the survivor
// to recover from. Three static-pod members; member 3 stops, the others
// write on, then member 2 stops: member 1 runs on without quorum and says
// its revision, 3 comes last, its log shorter. With every member stopped
// the first has the last write (the agents' own writes may follow it). A member restarted without
// quorum serves no client: its log ranks it all the same.
func TestStatusRanksTheSurvivorsData(t *testing.T) {
	t.Parallel()
	c := staticPodCluster(t, netSurvivors, 3, "")
	cli := c.Client()
	put(t, cli, "/before", "1")
	c.Kubelet(3).Pause()
	var last int64
	for i := range 20 {
		resp, err := cli.Put(t.Context(), fmt.Sprintf("/after/%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		last = resp.Header.Revision
	}
	// A listed member that does not answer is waited for, and said so,
	// with what lets a host gone for good go.
	harness.Eventually(t, 30*time.Second, "status and the log say that member 3 is waited for", func() error {
		out, _, _ := etcdlet(t, "status", "--config", c.ConfigPath(1))
		if !strings.Contains(out, "waiting for "+c.IP(3)+": listed, its member does not answer; if that host is gone for good, take its IP off the member list") {
			return errorf("status:\n%s", out)
		}
		if c.Agent(1).CountLog("listed members do not answer; the agents wait for them and never remove a listed member", nil) == 0 {
			return errorf("agent 1 has not logged that it waits for member 3")
		}
		return nil
	})
	c.Kubelet(2).Pause()

	data := func() ([]string, statusreport.Report) {
		t.Helper()
		out, stderr, code := etcdlet(t, "status", "--config", c.ConfigPath(3), "-o", "json")
		var r statusreport.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil || code != 3 && code != 4 {
			t.Fatalf("status without quorum: exit %d, %v\n%s%s", code, err, out, stderr)
		}
		var order []string
		for _, d := range r.Data {
			order = append(order, d.Node)
		}
		return order, r
	}
	of := func(r statusreport.Report, n int) consent.DataReport {
		i := slices.IndexFunc(r.Data, func(d consent.DataReport) bool { return d.Node == c.IP(n) })
		if i < 0 {
			return consent.DataReport{Error: "not listed"}
		}
		return r.Data[i]
	}
	ranked := func(r statusreport.Report, order []string) error {
		if len(r.Data) != 3 || order[2] != c.IP(3) || !slices.Contains([]string{c.IP(1), c.IP(2)}, order[0]) ||
			r.Data[0].LastIndex <= r.Data[2].LastIndex || r.Data[0].Commit < r.Data[2].LastIndex {
			return errorf("ranked %v, want 1 or 2 first (its log longer) and 3 last: %+v", order, r.Data)
		}
		return nil
	}
	harness.Eventually(t, 30*time.Second, "member 1 runs on without quorum, 2 and 3 stopped", func() error {
		order, r := data()
		one, two := of(r, 1), of(r, 2)
		switch {
		case !one.Running || one.RevisionUnknown || one.Revision < last || two.Running || of(r, 3).Running:
			return errorf("member 1 (running, at revision %d or later), 2 and 3 (stopped): %+v", last, r.Data)
		default:
			return ranked(r, order)
		}
	})
	c.Kubelet(1).Pause()
	harness.Eventually(t, 30*time.Second, "every member stopped, the data ranked", func() error {
		order, r := data()
		if slices.ContainsFunc(r.Data, func(d consent.DataReport) bool { return d.Running || d.Error != "" }) || r.Data[0].Revision < last {
			return errorf("want every member stopped and the first at revision %d or later: %+v", last, r.Data)
		}
		return ranked(r, order)
	})
	out, _, _ := etcdlet(t, "status", "--config", c.ConfigPath(3))
	if !strings.Contains(out, "member data of the listed nodes, the furthest log first") || !strings.Contains(out, "stopped") ||
		!strings.Contains(out, "recovery: should quorum not come back, on ") {
		t.Errorf("status table with every member stopped:\n%s", out)
	}

	c.Kubelet(1).Resume()
	harness.Eventually(t, 30*time.Second, "member 1 restarted without quorum ranks by its log", func() error {
		order, r := data()
		if one := of(r, 1); !one.Running || !one.HasData() || !one.RevisionUnknown && one.Revision < last {
			return errorf("node 1's data: %+v", r.Data)
		}
		return ranked(r, order)
	})
	c.Kubelet(2).Resume()
	c.Kubelet(3).Resume()
	c.Wait(cli, convergeTimeout, 1, 2, 3)
}
