package pacemaker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/config/trust/trusttest"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/internal/reach"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/runner"
)

// TestPollUnknownWithRealCrmMon drives the real crm_mon into each way it
// can fail and checks that Poll returns promptly with an unknown state and
// a reason, never a half-read cluster.
func TestPollUnknownWithRealCrmMon(t *testing.T) {
	requireTools(t, config.DefaultCrmMon)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo-cib.xml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A crm_mon that never answers (executed directly: the script's own
	// interpreter line, no shell between etcdlet and it).
	hung := filepath.Join(dir, "crm_mon")
	if err := os.WriteFile(hung, []byte("#!/bin/sh\nexec sleep 600\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	healthy := mustAbs("testdata/cib/healthy.xml")

	tests := []struct {
		name       string
		opts       func(*config.Pacemaker)
		runner     func(*Collector) // replaces the runner, still exec'ing for real
		ctx        func() (context.Context, context.CancelFunc)
		wantReason string
	}{
		{
			name:       "missing binary",
			opts:       func(o *config.Pacemaker) { o.CrmMon = "/nonexistent/crm_mon" },
			wantReason: "no such file or directory",
		},
		{
			// No CIB_file and no cluster on this host.
			name:       "not connected (exit 102)",
			opts:       func(o *config.Pacemaker) { o.CIBFile = ""; o.Cibadmin = "/bin/false"; o.CorosyncCmapctl = "/bin/false" },
			wantReason: "crm_mon exited 102 (not connected)",
		},
		{
			// Exit 0, but an <errors> element and no <summary>.
			name:       "missing CIB file",
			opts:       func(o *config.Pacemaker) { o.CIBFile = filepath.Join(dir, "absent.xml") },
			wantReason: "Could not connect to the CIB",
		},
		{
			name:       "hung",
			opts:       func(o *config.Pacemaker) { o.CrmMon = hung; o.CommandTimeout = time.Second },
			wantReason: "timed out after 1s",
		},
		{
			name: "cancelled",
			opts: func(o *config.Pacemaker) { o.CrmMon = hung; o.CommandTimeout = time.Minute },
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 500*time.Millisecond)
			},
			wantReason: "context deadline exceeded",
		},
		{
			// crm_mon would block opening it until the timeout.
			name:       "CIB file is a FIFO",
			opts:       func(o *config.Pacemaker) { o.CIBFile = fifo; o.CommandTimeout = time.Minute },
			wantReason: "is a named pipe, want a regular file",
		},
		{
			name: "output over the limit",
			opts: func(o *config.Pacemaker) { o.CIBFile = healthy },
			runner: func(c *Collector) {
				c.Runner = runner.Exec{Timeout: 10 * time.Second, MaxOutput: 1024}
			},
			wantReason: "output exceeds the size limit",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := config.DefaultPacemaker()
			o.CIBFile = healthy
			tt.opts(&o)
			c, err := NewCollector(o, quietLog())
			if err != nil {
				t.Fatal(err)
			}
			if tt.runner != nil {
				tt.runner(c)
			}
			ctx, cancel := context.Background(), context.CancelFunc(func() {})
			if tt.ctx != nil {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			start := time.Now()
			snap := c.Poll(ctx)
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Errorf("Poll took %s; a failing crm_mon must not stall the agent", elapsed)
			}
			if snap.Known || snap.Cluster != nil {
				t.Fatalf("Known = %v with cluster %v; want unknown", snap.Known, snap.Cluster)
			}
			if !strings.Contains(snap.Reason, tt.wantReason) {
				t.Errorf("Reason = %q, want it to contain %q", snap.Reason, tt.wantReason)
			}
			if _, err := c.Build(snap, nil, fixtureNow); !errors.Is(err, ErrUnknown) {
				t.Errorf("Build(unknown) error = %v, want ErrUnknown", err)
			}
		})
	}
}

// TestPollLiveModeCommands checks what the collector runs when it talks to
// a live cluster (the live end-to-end test runs them for real): crm_mon
// without CIB_file, `cibadmin --query --scope configuration` and
// `corosync-cmapctl nodelist.node`, and that a failing cibadmin or
// corosync-cmapctl narrows the result instead of voiding it.
func TestPollLiveModeCommands(t *testing.T) {
	mon, err := os.ReadFile("testdata/crm_mon/two-fence-devices.xml")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu  sync.Mutex // Poll runs the three commands concurrently
		ran []string
	)
	fake := runner.Func(func(_ context.Context, cmd runner.Command) (runner.Result, error) {
		mu.Lock()
		// Path and Args only: the agent's TZ, if the test runs with one,
		// is passed to crm_mon (see TestCrmMonGetsTheAgentsTimeZone).
		ran = append(ran, runner.Command{Path: cmd.Path, Args: cmd.Args}.String())
		mu.Unlock()
		switch cmd.Path {
		case "/usr/sbin/crm_mon":
			return runner.Result{Stdout: mon}, nil
		case "/usr/sbin/corosync-cmapctl":
			return runner.Result{Stdout: []byte("nodelist.node.0.name (str) = master-0\nnodelist.node.0.nodeid (u32) = 1\nnodelist.node.0.ring0_addr (str) = 198.51.100.10\n")}, nil
		default: // cibadmin: the CIB is not reachable
			return runner.Result{ExitCode: 102, Stderr: []byte("Could not connect to the CIB: Transport endpoint is not connected\n")}, nil
		}
	})
	var logs bytes.Buffer
	c, err := NewCollector(config.DefaultPacemaker(), slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c.Runner = fake
	c.Location = time.UTC
	snap := c.Poll(context.Background())
	if !snap.Known {
		t.Fatalf("unknown: %s", snap.Reason)
	}
	// By absolute path: a program run as root is never looked up in PATH.
	want := []string{
		"/usr/sbin/crm_mon --one-shot --inactive --output-as=xml",
		"/usr/sbin/cibadmin --query --scope configuration",
		"/usr/sbin/corosync-cmapctl nodelist.node",
	}
	for _, w := range want {
		found := false
		for _, r := range ran {
			found = found || r == w
		}
		if !found {
			t.Errorf("did not run %q (ran %q)", w, ran)
		}
	}
	m0 := snap.Cluster.Nodes[0]
	if len(m0.Addresses) != 1 || m0.Addresses[0].String() != "198.51.100.10" {
		t.Errorf("master-0 addresses = %v, want corosync's 198.51.100.10", m0.Addresses)
	}
	// Without the CIB only the id convention is left: master-0_redfish
	// still maps, ipmi-rack1 (target only in pcmk_host_map) cannot.
	var ids []string
	for _, d := range m0.Devices {
		ids = append(ids, d.ID)
	}
	if strings.Join(ids, ",") != "master-0_redfish" {
		t.Errorf("master-0 devices = %v, want only master-0_redfish", ids)
	}
	if notes := strings.Join(snap.Cluster.Notes, "\n"); !strings.Contains(notes, "cibadmin exited 102") || !strings.Contains(notes, "ipmi-rack1: no target node found") {
		t.Errorf("notes do not explain the missing CIB:\n%s", notes)
	}
	if !strings.Contains(logs.String(), `level=WARN msg="pacemaker input problem" note="CIB configuration unavailable (cibadmin exited 102`) {
		t.Errorf("the missing CIB was not logged as a warning:\n%s", logs.String())
	}
}

// Commands get a fixed environment, not the agent's; the agent's TZ is
// the exception for crm_mon, which prints operation times with ctime() in
// its local zone while the parser reads them in the agent's (Location,
// time.Local). With the real crm_mon and a zone other than the host's
// /etc/localtime, the times must come out as the fixture's: from 10:00Z
// on, never nine hours off.
func TestCrmMonGetsTheAgentsTimeZone(t *testing.T) {
	const zone = "Asia/Tokyo" // UTC+9, no DST
	tokyo, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatalf("load %s: %v (tzdata)", zone, err)
	}
	t.Setenv("TZ", zone)
	t.Setenv("CIB_file", "/nonexistent/agent-cib.xml") // the agent's own, must not reach crm_mon
	var (
		env []string
		out []byte
	)
	c := fixtureCollector(t, "failed-monitor", nil)
	inner := c.Runner
	c.Runner = runner.Func(func(ctx context.Context, cmd runner.Command) (runner.Result, error) {
		res, err := inner.Run(ctx, cmd)
		if cmd.Path == c.opts.CrmMon {
			env, out = cmd.Env, res.Stdout
		}
		return res, err
	})
	c.Location = tokyo // what time.Local is in an agent started with TZ=Asia/Tokyo
	if snap := c.Poll(context.Background()); !snap.Known {
		t.Fatalf("unknown: %s", snap.Reason)
	}
	if want := []string{"TZ=" + zone, "CIB_file=" + c.opts.CIBFile}; strings.Join(env, " ") != strings.Join(want, " ") {
		t.Errorf("crm_mon's own environment = %q, want %q", env, want)
	}
	doc, err := crmmon.Parse(out, tokyo)
	if err != nil {
		t.Fatal(err)
	}
	first := time.Date(2020, 1, 1, 10, 0, 0, 0, time.UTC) // the fixtures' T0
	ops := 0
	for _, h := range doc.History {
		for _, op := range h.Operations {
			ops++
			if at := op.LastRCChange; at.Before(first) || at.After(fixtureNow) {
				t.Errorf("%s %s on %s at %s, want between %s and %s: crm_mon and the parser disagree on the zone",
					h.Resource, op.Task, h.Node, at.UTC(), first, fixtureNow)
			}
		}
	}
	if ops == 0 {
		t.Fatalf("no operation history in crm_mon's output:\n%s", out)
	}
}

// A fencing device's credentials in the CIB reach nothing a poll keeps
// or builds: the snapshot (walked through every pointer) and the status
// object hold no trace of them.
func TestPollKeepsNoFencingCredentials(t *testing.T) {
	requireTools(t, config.DefaultCrmMon)
	data, err := os.ReadFile("testdata/cib/two-fence-devices.xml")
	if err != nil {
		t.Fatal(err)
	}
	const anchor = `<nvpair id="master-0_redfish-hl" name="pcmk_host_list" value="master-0"/>`
	if !bytes.Contains(data, []byte(anchor)) {
		t.Fatalf("fixture changed: %s not found", anchor)
	}
	data = bytes.Replace(data, []byte(anchor), []byte(anchor+
		`<nvpair id="master-0_redfish-u" name="username" value="S3cret-user"/>`+
		`<nvpair id="master-0_redfish-p" name="password" value="S3cret-password"/>`+
		`<nvpair id="master-0_redfish-pw" name="passwd" value="S3cret-passwd"/>`), 1)
	cib := filepath.Join(t.TempDir(), "cib.xml")
	if err := os.WriteFile(cib, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c := fixtureCollector(t, "two-fence-devices", func(o *config.Pacemaker) { o.CIBFile = cib })
	snap := c.Poll(context.Background())
	if !snap.Known {
		t.Fatalf("unknown: %s", snap.Reason)
	}
	if ids := snap.Cluster.Nodes[0].Devices; len(ids) == 0 || ids[0].TargetsFrom != "pcmk_host_list" {
		t.Fatalf("master-0's devices = %+v, want pcmk_host_list still read", ids)
	}
	obj, err := c.Build(snap, nil, fixtureNow)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Render(&out, obj, FormatJSON); err != nil {
		t.Fatal(err)
	}
	all := append(reach.Strings(snap), reach.Strings(obj)...)
	all = append(all, fmt.Sprintf("%#v", snap), out.String())
	for _, s := range all {
		if strings.Contains(s, "S3cret") {
			t.Errorf("a credential survived the poll: %q", s)
		}
	}
}

func TestPollDurationAndTime(t *testing.T) {
	c := fixtureCollector(t, "healthy", nil)
	before := time.Now()
	snap := c.Poll(context.Background())
	if snap.Time.Before(before) || snap.Duration <= 0 || snap.Duration > 10*time.Second {
		t.Errorf("Time = %s, Duration = %s; want the poll's start and a positive duration", snap.Time, snap.Duration)
	}
}

// A collector is refused, before any program runs, when one of them could
// be changed by someone other than root: the agent and etcdlet pacemaker
// status run them as root.
func TestNewCollectorRefusesUntrustedPrograms(t *testing.T) {
	trusttest.RequireRoot(t)
	planted := trusttest.File(t, filepath.Join(t.TempDir(), "bin", "cibadmin"), 0o755)
	trusttest.Chown(t, planted, trusttest.Nobody, trusttest.Nobody)
	o := config.DefaultPacemaker()
	o.Cibadmin = planted
	_, err := NewCollector(o, quietLog())
	want := fmt.Sprintf("refused to run the pacemaker programs:\npacemaker.cibadmin: %q: must be a file only root can change: %s: %s is owned by uid 65534", planted, planted, planted)
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("NewCollector = %v, want an error starting %q", err, want)
	}
}
