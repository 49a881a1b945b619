// Package pacemaker polls pacemaker (crm_mon, the CIB, corosync's node
// list) and builds the OpenShift PacemakerCluster status from what it
// sees. Poll never fails: a hung, missing or failing crm_mon yields an
// unknown state with the reason. Build turns a known state into the typed
// object of the configured API version, validated against the CRD's rules.
//
// Sub-packages: runner (exec with timeout, output cap, group kill), crmmon
// (XML parser), cib (CIB configuration reader), corosync (node list),
// model (facts per node) and status (conditions, conversion, validation).
package pacemaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/cib"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/corosync"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/runner"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
)

// crmMonArgs is what `pcs status xml` runs. In XML mode crm_mon already
// shows inactive resources; --inactive keeps that explicit.
var crmMonArgs = []string{"--one-shot", "--inactive", "--output-as=xml"}

// Snapshot is the outcome of one poll.
type Snapshot struct {
	// Time is when the poll started; Duration how long it took.
	Time     time.Time
	Duration time.Duration
	// Known is false when crm_mon gave no usable answer; Reason says why.
	Known  bool
	Reason string
	// Cluster holds the facts; nil when not Known.
	Cluster *model.Cluster
}

// ErrUnknown is returned by Build for a snapshot that is not Known: there
// is nothing truthful to write, and the previous status is left to age
// (OpenShift's health check treats a status older than five minutes as
// unknown).
var ErrUnknown = errors.New("pacemaker state unknown")

// Collector polls pacemaker and builds statuses.
type Collector struct {
	opts    config.Pacemaker
	mapping model.Mapping
	// Runner executes the commands; tests of pure logic may replace it.
	Runner runner.Runner
	// Log receives warnings about inputs that could not be read.
	Log *slog.Logger
	// Now is the clock; Location the zone of crm_mon's ctime() timestamps
	// (the node's local zone).
	Now      func() time.Time
	Location *time.Location
	// tz is the agent's own TZ ("TZ=..."), empty when it has none: the
	// one entry of the agent's environment crm_mon gets (see crmMon).
	tz string
}

// NewCollector validates opts and returns a collector that runs the real
// commands. It refuses programs that someone other than root could change
// before any of them runs (the agent and etcdlet pacemaker status both
// come through here).
func NewCollector(opts config.Pacemaker, log *slog.Logger) (*Collector, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("invalid pacemaker options: %w", err)
	}
	if err := opts.CheckPrograms(); err != nil {
		return nil, fmt.Errorf("refused to run the pacemaker programs:\n%w", err)
	}
	if log == nil {
		log = slog.Default()
	}
	return &Collector{
		opts: opts,
		mapping: model.Mapping{
			Kubelet: model.Matcher{Agent: opts.KubeletAgent, IDs: opts.KubeletResources},
			Etcd:    model.Matcher{Agent: opts.EtcdAgent, IDs: opts.EtcdResources},
		},
		Runner:   runner.Exec{Timeout: opts.CommandTimeout, MaxOutput: opts.MaxOutputBytes},
		Log:      log,
		Now:      time.Now,
		Location: time.Local,
		tz:       tzEntry(),
	}, nil
}

// tzEntry returns "TZ=<value>" when the agent's environment sets TZ, which
// Go's time.Local follows.
func tzEntry() string {
	if tz, ok := os.LookupEnv("TZ"); ok {
		return "TZ=" + tz
	}
	return ""
}

// Options returns the collector's options.
func (c *Collector) Options() config.Pacemaker { return c.opts }

// Poll reads pacemaker's state once. crm_mon, the CIB and corosync's node
// list are read concurrently; only crm_mon is essential.
func (c *Collector) Poll(ctx context.Context) (snap Snapshot) {
	start := c.Now()
	var (
		wg       sync.WaitGroup
		doc      *crmmon.Document
		docErr   error
		cfg      *cib.Config
		cfgErr   error
		nodes    []corosync.Node
		nodesErr error
	)
	wg.Add(3)
	go func() { defer wg.Done(); doc, docErr = c.crmMon(ctx) }()
	go func() { defer wg.Done(); cfg, cfgErr = c.cib(ctx) }()
	go func() { defer wg.Done(); nodes, nodesErr = c.corosyncNodes(ctx) }()
	wg.Wait()

	snap.Time = start
	defer func() { snap.Duration = c.Now().Sub(start) }()
	if docErr != nil {
		c.Log.Warn("pacemaker state unknown", "reason", docErr.Error())
		snap.Reason = docErr.Error()
		return snap
	}
	in := model.Input{Doc: doc, CIB: cfg, Corosync: nodes}
	if cfgErr != nil {
		in.CIBProblem = cfgErr.Error()
	}
	if nodesErr != nil {
		in.CorosyncProblem = nodesErr.Error()
		c.Log.Debug("no corosync node list", "reason", nodesErr)
	}
	snap.Known, snap.Cluster = true, model.Build(in, c.mapping)
	// Notes are inputs that could not be read or used (the CIB, an
	// unparsable timestamp, a device without target): worth a warning.
	for _, note := range snap.Cluster.Notes {
		c.Log.Warn("pacemaker input problem", "note", note)
	}
	return snap
}

func (c *Collector) crmMon(ctx context.Context) (*crmmon.Document, error) {
	cmd := runner.Command{Path: c.opts.CrmMon, Args: crmMonArgs}
	// crm_mon prints times with ctime() in its local zone, and they are
	// read back in Location (the agent's time.Local). Without the agent's
	// TZ, if it has one, crm_mon would fall back to /etc/localtime and
	// every time would be off by the difference.
	if c.tz != "" {
		cmd.Env = append(cmd.Env, c.tz)
	}
	if c.opts.CIBFile != "" {
		// crm_mon would block opening a FIFO (or a device) until the
		// timeout; refuse it at once with the reason. Stat does not open.
		if fi, err := os.Stat(c.opts.CIBFile); err == nil {
			if err := config.CheckRegular(fi.Mode()); err != nil {
				return nil, fmt.Errorf("CIB file %s %w", c.opts.CIBFile, err)
			}
		}
		cmd.Env = append(cmd.Env, "CIB_file="+c.opts.CIBFile)
	}
	res, err := c.Runner.Run(ctx, cmd)
	if err != nil {
		return nil, fmt.Errorf("run crm_mon: %w", err)
	}
	doc, perr := crmmon.Parse(res.Stdout, c.Location)
	if perr != nil {
		if res.ExitCode != 0 {
			return nil, fmt.Errorf("crm_mon exited %d (%s): %s", res.ExitCode, crmmon.ExitText(res.ExitCode), firstLine(res.Stderr))
		}
		return nil, fmt.Errorf("parse crm_mon output: %w", perr)
	}
	if err := crmmon.Check(doc, res.ExitCode); err != nil {
		return nil, err
	}
	return doc, nil
}

func (c *Collector) cib(ctx context.Context) (*cib.Config, error) {
	var data []byte
	if c.opts.CIBFile != "" {
		var err error
		if data, err = c.readFile(ctx, c.opts.CIBFile); err != nil {
			return nil, fmt.Errorf("read CIB file: %w", err)
		}
	} else {
		res, err := c.Runner.Run(ctx, runner.Command{Path: c.opts.Cibadmin, Args: []string{"--query", "--scope", "configuration"}})
		if err != nil {
			return nil, fmt.Errorf("run cibadmin: %w", err)
		}
		if res.ExitCode != 0 {
			return nil, fmt.Errorf("cibadmin exited %d (%s): %s", res.ExitCode, crmmon.ExitText(res.ExitCode), firstLine(res.Stderr))
		}
		data = res.Stdout
	}
	cfg, err := cib.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("parse CIB: %w", err)
	}
	return cfg, nil
}

func (c *Collector) corosyncNodes(ctx context.Context) ([]corosync.Node, error) {
	switch {
	case c.opts.CorosyncConf != "":
		data, err := c.readFile(ctx, c.opts.CorosyncConf)
		if err != nil {
			return nil, fmt.Errorf("read corosync.conf: %w", err)
		}
		return corosync.ParseConf(data)
	case c.opts.CIBFile != "":
		// Offline: the running corosync, if any, is not the file's cluster.
		return nil, errors.New("not read (cibFile is set and corosyncConf is not)")
	}
	res, err := c.Runner.Run(ctx, runner.Command{Path: c.opts.CorosyncCmapctl, Args: []string{"nodelist.node"}})
	if err != nil {
		return nil, fmt.Errorf("run corosync-cmapctl: %w", err)
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("corosync-cmapctl exited %d: %s", res.ExitCode, firstLine(append(res.Stderr, res.Stdout...)))
	}
	return corosync.ParseCmap(res.Stdout)
}

// readFile reads a regular file of at most limit bytes within the
// command timeout. A FIFO or device is refused (opened non-blocking, so the
// open itself cannot hang); a read stuck on a dead file system is
// abandoned after the timeout rather than stalling the poll.
func (c *Collector) readFile(ctx context.Context, name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.CommandTimeout)
	defer cancel()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := config.ReadRegularFile(name, c.opts.MaxOutputBytes)
		if err != nil {
			err = fmt.Errorf("%s %w", name, err)
		}
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("read %s: %w", name, ctx.Err())
	}
}

func firstLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return "no output"
	}
	return s
}

// Build turns a snapshot into the PacemakerCluster object of the
// configured API version. prev is the stored object (nil when none): its
// metadata is kept, its lastTransitionTimes carried over while a
// condition's status holds, and lastUpdated never goes below its value.
// The result has passed status.Validate against prev, the check to repeat
// before any write.
func (c *Collector) Build(s Snapshot, prev status.Object, now time.Time) (status.Object, error) {
	if !s.Known || s.Cluster == nil {
		return nil, fmt.Errorf("%w: %s", ErrUnknown, s.Reason)
	}
	old, _, err := status.FromObject(prev)
	if err != nil {
		return nil, fmt.Errorf("read previous status: %w", err)
	}
	st := status.Build(s.Cluster, c.opts.ExpectedNodes, old, now)
	obj, err := status.ToObject(st, c.opts.APIVersion, prev)
	if err != nil {
		return nil, err
	}
	if err := status.Validate(obj, prev); err != nil {
		return nil, fmt.Errorf("built status fails the CRD's validation: %w", err)
	}
	return obj, nil
}
