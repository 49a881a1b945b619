package pacemaker

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Output formats of Render.
const (
	FormatYAML  = "yaml"
	FormatJSON  = "json"
	FormatTable = "table"
)

// Render writes obj as YAML or JSON (the object as it would be sent to
// the API server) or as a table for people: one line per node, then every
// condition that is not True with its message.
func Render(w io.Writer, obj status.Object, format string) error {
	switch format {
	case FormatYAML:
		out, err := yaml.Marshal(obj)
		if err != nil {
			return fmt.Errorf("render yaml: %w", err)
		}
		_, err = w.Write(out)
		return err
	case FormatJSON:
		out, err := json.MarshalIndent(obj, "", "  ")
		if err != nil {
			return fmt.Errorf("render json: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", out)
		return err
	case FormatTable:
		s, _, err := status.FromObject(obj)
		if err != nil {
			return err
		}
		return renderTable(w, s)
	default:
		return fmt.Errorf("unknown format %q (want %s, %s or %s)", format, FormatYAML, FormatJSON, FormatTable)
	}
}

var nodeColumns = []string{"Healthy", "Online", "InService", "Active", "Ready", "Clean", "Member", "FencingAvailable", "FencingHealthy"}

func renderTable(w io.Writer, s *status.Status) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "CLUSTER\tHEALTHY\tIN-SERVICE\tNODE-COUNT\tLAST-UPDATED\n")
	fmt.Fprintf(tw, "cluster\t%s\t%s\t%s\t%s\n", cond(s.Conditions, "Healthy"), cond(s.Conditions, "InService"),
		cond(s.Conditions, "NodeCountAsExpected"), s.LastUpdated.UTC().Format(time.RFC3339))
	fmt.Fprintln(tw)
	header := []string{"NODE", "ADDRESSES"}
	for _, c := range nodeColumns {
		header = append(header, strings.ToUpper(c))
	}
	header = append(header, "KUBELET", "ETCD", "FENCING-AGENTS")
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, n := range s.Nodes {
		row := []string{n.Name, strings.Join(n.Addresses, ",")}
		for _, c := range nodeColumns {
			row = append(row, cond(n.Conditions, c))
		}
		for _, r := range n.Resources {
			row = append(row, cond(r.Conditions, "Healthy"))
		}
		var agents []string
		for _, a := range n.FencingAgents {
			agents = append(agents, fmt.Sprintf("%s(%s)=%s", a.Name, a.Method, cond(a.Conditions, "Healthy")))
		}
		row = append(row, strings.Join(agents, ","))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var problems []string
	add := func(subject string, conds []metav1.Condition) {
		for _, c := range conds {
			if c.Status != metav1.ConditionTrue {
				problems = append(problems, fmt.Sprintf("%s %s=%s (%s): %s", subject, c.Type, c.Status, c.Reason, c.Message))
			}
		}
	}
	add("cluster", s.Conditions)
	for _, n := range s.Nodes {
		add("node "+n.Name, n.Conditions)
		for _, r := range n.Resources {
			add("node "+n.Name+" resource "+r.Name, r.Conditions)
		}
		for _, a := range n.FencingAgents {
			add("node "+n.Name+" fencing agent "+a.Name, a.Conditions)
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(w, "\nNOT TRUE:\n  %s\n", strings.Join(problems, "\n  "))
	}
	return nil
}

func cond(conds []metav1.Condition, typ string) string {
	for _, c := range conds {
		if c.Type == typ {
			return string(c.Status)
		}
	}
	return "-"
}
