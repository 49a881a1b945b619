package crmmon

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Parse reads one crm_mon XML document. loc is the zone crm_mon's ctime()
// timestamps are in (the node's local zone: pass time.Local in the agent).
// It fails only when the input is not a crm_mon document at all; missing
// sections and odd values are left for the caller to judge (see Check).
func Parse(data []byte, loc *time.Location) (*Document, error) {
	if loc == nil {
		loc = time.Local
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	root, err := rootElement(d)
	if err != nil {
		return nil, err
	}
	var raw rawDoc
	if err := d.DecodeElement(&raw, &root); err != nil {
		return nil, fmt.Errorf("decode crm_mon XML: %w", err)
	}
	w := &warner{loc: loc}
	doc := convert(&raw, root.Name.Local == "crm_mon", w)
	doc.Warnings = w.warnings
	return doc, nil
}

// rootElement finds the document element and checks that it is one of the
// two crm_mon roots.
func rootElement(d *xml.Decoder) (xml.StartElement, error) {
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return xml.StartElement{}, errors.New("no XML element in crm_mon output")
		}
		if err != nil {
			return xml.StartElement{}, fmt.Errorf("decode crm_mon XML: %w", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if se.Name.Local != "pacemaker-result" && se.Name.Local != "crm_mon" {
				return xml.StartElement{}, fmt.Errorf("root element <%s> is not a crm_mon result", se.Name.Local)
			}
			return se, nil
		}
	}
}

func convert(raw *rawDoc, legacy bool, w *warner) *Document {
	doc := &Document{APIVersion: raw.APIVersion, Legacy: legacy}
	if legacy {
		doc.APIVersion = raw.Version
	}
	if raw.Status != nil {
		doc.Status = &Status{
			Code:    w.integer("status", "code", raw.Status.Code, -1),
			Message: raw.Status.Message,
			Errors:  raw.Status.Errors,
		}
	}
	if raw.Summary != nil {
		doc.Summary = convertSummary(raw.Summary, w)
	}
	if raw.Nodes != nil {
		doc.HasNodes = true
		doc.Nodes = make([]Node, 0, len(raw.Nodes.Nodes))
		for i := range raw.Nodes.Nodes {
			doc.Nodes = append(doc.Nodes, convertNode(&raw.Nodes.Nodes[i], w))
		}
	}
	flatten(&raw.Resources, nil, w, &doc.Resources)
	if len(raw.NodeAttributes) > 0 {
		doc.NodeAttributes = make(map[string]map[string]string, len(raw.NodeAttributes))
		for _, n := range raw.NodeAttributes {
			attrs := make(map[string]string, len(n.Attributes))
			for _, a := range n.Attributes {
				attrs[a.Name] = a.Value
			}
			doc.NodeAttributes[n.Name] = attrs
		}
	}
	for _, n := range raw.NodeHistory {
		for _, r := range n.Resources {
			where := "resource_history " + r.ID + " on " + n.Name
			h := ResourceHistory{
				Node:        n.Name,
				Resource:    r.ID,
				FailCount:   r.FailCount,
				LastFailure: w.ctime(where, "last-failure", r.LastFailure),
				Operations:  make([]Operation, 0, len(r.Operations)),
			}
			for _, op := range r.Operations {
				h.Operations = append(h.Operations, Operation{
					Call:         w.integer(where, "call", op.Call, -1),
					Task:         op.Task,
					Interval:     w.millis(where, "interval", op.Interval),
					RC:           w.integer(where, "rc", op.RC, -1),
					RCText:       op.RCText,
					LastRCChange: w.ctime(where, "last-rc-change", op.LastRCChange),
				})
			}
			doc.History = append(doc.History, h)
		}
	}
	for i := range raw.Failures {
		doc.Failures = append(doc.Failures, convertFailure(&raw.Failures[i], w))
	}
	if raw.FenceHistory != nil {
		doc.FenceHistory = make([]FenceEvent, 0, len(raw.FenceHistory.Events))
		for _, e := range raw.FenceHistory.Events {
			doc.FenceHistory = append(doc.FenceHistory, FenceEvent{
				Status:     strings.ToLower(e.Status),
				Action:     e.Action,
				Target:     e.Target,
				Delegate:   e.Delegate,
				Origin:     e.Origin,
				Client:     e.Client,
				ExitReason: e.ExitReason,
				Completed:  w.iso("fence_event for "+e.Target, "completed", e.Completed),
			})
		}
	}
	for _, b := range raw.Bans {
		doc.Bans = append(doc.Bans, Ban{
			ID:       b.ID,
			Resource: b.Resource,
			Node:     b.Node,
			Weight:   w.integer("ban "+b.ID, "weight", b.Weight, 0),
		})
	}
	return doc
}

func convertSummary(s *rawSummary, w *warner) *Summary {
	stonith := s.Options.StonithEnabled
	if s.Options.FencingEnabled != "" {
		// 3.0.2 renamed stonith-enabled; the new name wins when both exist.
		stonith = s.Options.FencingEnabled
	}
	return &Summary{
		Stack:            s.Stack.Type,
		DCPresent:        w.boolean("current_dc", "present", s.DC.Present),
		DCName:           s.DC.Name,
		WithQuorum:       w.boolean("current_dc", "with_quorum", s.DC.WithQuorum),
		LastUpdate:       w.ctime("last_update", "time", s.LastUpdate.Time),
		LastChange:       w.ctime("last_change", "time", s.LastChange.Time),
		StonithEnabled:   w.boolean("cluster_options", "stonith-enabled", stonith),
		MaintenanceMode:  w.boolean("cluster_options", "maintenance-mode", s.Options.MaintenanceMode),
		StopAllResources: w.boolean("cluster_options", "stop-all-resources", s.Options.StopAllResources),
		NoQuorumPolicy:   s.Options.NoQuorumPolicy,
	}
}

func convertNode(n *rawNode, w *warner) Node {
	where := "node " + n.Name
	container := n.IDAsResource
	if container == "" {
		container = n.ContainerID
	}
	return Node{
		Name:          n.Name,
		ID:            n.ID,
		Online:        w.boolean(where, "online", n.Online),
		Standby:       w.boolean(where, "standby", n.Standby),
		StandbyOnFail: w.boolean(where, "standby_onfail", n.StandbyOnFail),
		Maintenance:   w.boolean(where, "maintenance", n.Maintenance),
		Pending:       w.boolean(where, "pending", n.Pending),
		Unclean:       w.boolean(where, "unclean", n.Unclean),
		Shutdown:      w.boolean(where, "shutdown", n.Shutdown),
		ExpectedUp:    w.boolean(where, "expected_up", n.ExpectedUp),
		IsDC:          w.boolean(where, "is_dc", n.IsDC),
		Type:          strings.ToLower(n.Type),
		Container:     container,
	}
}

// flatten walks the interleaved resource tree depth-first and appends one
// Primitive per <resource>, each carrying its chain of containers.
func flatten(l *rawList, parents []Parent, w *warner, out *[]Primitive) {
	for _, it := range l.items {
		if r := it.resource; r != nil {
			*out = append(*out, convertResource(r, parents, w))
			continue
		}
		c := it.container
		where := string(c.kind) + " " + c.attr("id")
		p := Parent{
			Kind:        c.kind,
			ID:          c.attr("id"),
			Managed:     w.boolean(where, "managed", c.attr("managed")),
			Failed:      w.boolean(where, "failed", c.attr("failed")),
			Maintenance: w.boolean(where, "maintenance", c.attr("maintenance")),
			Disabled:    w.boolean(where, "disabled", c.attr("disabled")),
			TargetRole:  NormalizeRole(c.attr("target_role")),
		}
		// A fresh slice per level: siblings must not share a backing array.
		chain := make([]Parent, len(parents), len(parents)+1)
		copy(chain, parents)
		flatten(&c.children, append(chain, p), w, out)
	}
}

func convertResource(r *rawResource, parents []Parent, w *warner) Primitive {
	where := "resource " + r.ID
	orphaned := r.Orphaned
	if r.Removed != "" {
		// 3.0.2 renamed orphaned to removed and keeps both for a while.
		orphaned = r.Removed
	}
	p := Primitive{
		ID:             r.ID,
		Agent:          ParseAgent(r.Agent),
		Role:           NormalizeRole(r.Role),
		TargetRole:     NormalizeRole(r.TargetRole),
		Active:         w.boolean(where, "active", r.Active),
		Orphaned:       w.boolean(where, "orphaned", orphaned),
		Blocked:        w.boolean(where, "blocked", r.Blocked),
		Managed:        w.boolean(where, "managed", r.Managed),
		Failed:         w.boolean(where, "failed", r.Failed),
		FailureIgnored: w.boolean(where, "failure_ignored", r.FailureIgnored),
		Maintenance:    w.boolean(where, "maintenance", r.Maintenance),
		Pending:        r.Pending,
		Parents:        parents,
	}
	if len(r.Nodes) > 0 {
		p.Nodes = make([]NodeRef, 0, len(r.Nodes))
		for _, n := range r.Nodes {
			p.Nodes = append(p.Nodes, NodeRef{Name: n.Name, Cached: w.boolean(where, "cached", n.Cached)})
		}
	}
	return p
}

func convertFailure(f *rawFailure, w *warner) Failure {
	key := f.OpKey
	if key == "" {
		key = f.ID
	}
	where := "failure " + key + " on " + f.Node
	out := Failure{
		OpKey:        key,
		Node:         f.Node,
		Task:         f.Task,
		Interval:     w.millis(where, "interval", f.Interval),
		ExitStatus:   f.ExitStatus,
		ExitReason:   f.ExitReason,
		ExitCode:     w.integer(where, "exitcode", f.ExitCode, -1),
		Call:         w.integer(where, "call", f.Call, -1),
		Status:       f.Status,
		LastRCChange: w.iso(where, "last-rc-change", f.LastRCChange),
	}
	out.Resource, out.Task = splitOpKey(key, f.Task, f.Interval)
	return out
}

// opKeyPattern splits "<rsc>_<task>_<interval>" and the older operation ids
// "<rsc>_last_failure_<n>" when crm_mon did not print task and interval.
var opKeyPattern = regexp.MustCompile(`^(.+?)_(last_failure|last|start|stop|monitor|promote|demote|notify|migrate_to|migrate_from|reload|reload-agent|meta-data|validate-all|cancel)_[0-9]+$`)

func splitOpKey(key, task, interval string) (resource, taskOut string) {
	if task != "" && interval != "" {
		if suffix := "_" + task + "_" + interval; strings.HasSuffix(key, suffix) {
			return strings.TrimSuffix(key, suffix), task
		}
	}
	if m := opKeyPattern.FindStringSubmatch(key); m != nil {
		if task == "" && m[2] != "last_failure" && m[2] != "last" {
			task = m[2]
		}
		return m[1], task
	}
	return key, task
}

// ExitText describes a pacemaker exit code (crm_error -X).
func ExitText(code int) string {
	if s, ok := exitTexts[code]; ok {
		return s
	}
	return "exit status " + strconv.Itoa(code)
}

var exitTexts = map[int]string{
	0:   "OK",
	1:   "error occurred",
	2:   "invalid parameter",
	3:   "unimplemented",
	4:   "insufficient privileges",
	5:   "not installed",
	6:   "not configured",
	7:   "not running",
	64:  "incorrect usage",
	65:  "invalid data given",
	66:  "input file not available",
	69:  "necessary service unavailable",
	70:  "internal software bug",
	77:  "insufficient privileges",
	78:  "invalid configuration",
	100: "fatal error occurred",
	102: "not connected",
	103: "update was older than existing configuration",
	105: "no such object",
	106: "quorum required",
	112: "could not determine status",
	124: "timeout occurred",
}

// ErrUnusable marks crm_mon output that must not be read as cluster state.
var ErrUnusable = errors.New("crm_mon output is not a usable cluster status")

// Check applies the rule for trusting crm_mon output: the command exited 0,
// its <status> (when present) has code 0 and no <errors>, and both a
// <summary> and a <nodes> section are present. crm_mon exits 0 with an
// error inside when CIB_file names a missing or too-new CIB; without this
// check that would read as "a cluster with no nodes".
func Check(doc *Document, exitCode int) error {
	var details []string
	if doc != nil && doc.Status != nil {
		details = doc.Status.Errors
	}
	detail := ""
	if len(details) > 0 {
		detail = ": " + strings.Join(details, "; ")
	}
	switch {
	case exitCode != 0:
		return fmt.Errorf("%w: crm_mon exited %d (%s)%s", ErrUnusable, exitCode, ExitText(exitCode), detail)
	case doc == nil:
		return fmt.Errorf("%w: no document", ErrUnusable)
	case doc.Status != nil && doc.Status.Code != 0:
		return fmt.Errorf("%w: status %d (%s)%s", ErrUnusable, doc.Status.Code, doc.Status.Message, detail)
	case len(details) > 0:
		return fmt.Errorf("%w%s", ErrUnusable, detail)
	case doc.Summary == nil:
		return fmt.Errorf("%w: no <summary> section", ErrUnusable)
	case !doc.HasNodes:
		return fmt.Errorf("%w: no <nodes> section", ErrUnusable)
	}
	return nil
}
