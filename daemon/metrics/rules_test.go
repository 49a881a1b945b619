package metrics

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"sigs.k8s.io/yaml"
)

// The example alert rules shipped for operators.
const rulesDir = "../../deploy/prometheus"

var (
	rulesFile     = filepath.Join(rulesDir, "etcdlet-alerts.yaml")
	rulesTestFile = filepath.Join(rulesDir, "etcdlet-alerts_test.yaml")
)

// TestAlertRulesPassPromtool checks the rules with Prometheus's own
// checker (the PromQL parses, every alert is well formed, the linters
// agree) and runs their unit tests.
func TestAlertRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "rules", "--lint=all", "--lint-fatal", rulesFile},
		{"test", "rules", rulesTestFile},
	} {
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// ruleFile is the part of a Prometheus rule file this test reads.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Record      string            `json:"record"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// scraped are the series Prometheus makes itself for every target.
var scraped = map[string]bool{"up": true}

// TestAlertRulesUseRegisteredMetrics checks every metric the rules select,
// and every label they match it on, against what New registers, so that a
// renamed metric or label cannot leave an alert that never fires. Every
// alert has a severity, a summary and a description.
func TestAlertRulesUseRegisteredMetrics(t *testing.T) {
	fams := registered(t)
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		t.Fatal(err)
	}
	alerts := 0
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			alerts++
			name := r.Alert + r.Record
			switch r.Labels["severity"] {
			case "critical", "warning", "info":
			default:
				t.Errorf("%s: severity %q, want critical, warning or info", name, r.Labels["severity"])
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: no summary or description", name)
			}
			sels, err := selectors(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			if len(sels) == 0 {
				t.Errorf("%s: selects no metric: %s", name, r.Expr)
			}
			for _, s := range sels {
				if s.metric == "" {
					t.Errorf("%s: selects series by their labels alone %v; name the metric", name, s.labels)
					continue
				}
				if scraped[s.metric] {
					continue
				}
				fam, labels := s.metric, []string(nil)
				fl, ok := fams[fam]
				if !ok {
					// A histogram's series.
					for _, suffix := range []string{"_bucket", "_sum", "_count"} {
						if base, cut := strings.CutSuffix(fam, suffix); cut && fams[base].Type == "histogram" {
							fam, fl, ok = base, fams[base], true
							if suffix == "_bucket" {
								labels = []string{"le"}
							}
						}
					}
				}
				if !ok {
					t.Errorf("%s: selects %s, which the agent does not register", name, s.metric)
					continue
				}
				labels = append(labels, fl.Labels...)
				for _, l := range s.labels {
					if !slices.Contains(labels, l) {
						t.Errorf("%s: matches %s on label %q; it has %v", name, fam, l, labels)
					}
				}
			}
		}
	}
	if alerts == 0 {
		t.Fatalf("%s holds no rule", rulesFile)
	}
}

func TestSelectors(t *testing.T) {
	for _, tt := range []struct{ expr, want string }{
		{`up{job="etcdlet"} == 0`, `up{job}`},
		{`time() - etcdlet_x_seconds > 600`, `etcdlet_x_seconds{}`},
		{`histogram_quantile(0.9, rate(a_bucket[15m])) > 10`, `a_bucket{}`},
		{`a != ignoring (role) b{role="voter"}`, `a{} b{role}`},
		{`sum without (action, outcome) (increase(c{outcome="done", x!~"a|b"}[1h] offset 5m)) > 1e3`, `c{outcome,x}`},
		{`max by (job) (d{k="}{,"}) and on(job) e unless f @ 100`, `d{k} e{} f{}`},
		{`sum(rate(g[5m])) by (job) > bool 0`, `g{}`},
		{`g{"quoted.name"="x"} or {__name__="h"}`, `g{quoted.name} {__name__}`},
	} {
		sels, err := selectors(tt.expr)
		if err != nil {
			t.Errorf("%s: %v", tt.expr, err)
			continue
		}
		var got []string
		for _, s := range sels {
			got = append(got, s.metric+"{"+strings.Join(s.labels, ",")+"}")
		}
		if strings.Join(got, " ") != tt.want {
			t.Errorf("%s: selectors %v, want %s", tt.expr, got, tt.want)
		}
	}
}

// selector is a metric a PromQL expression selects, with the labels it
// matches on.
type selector struct {
	metric string
	labels []string
}

// keywords are PromQL's words that are neither metrics nor functions.
var keywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
	"inf": true, "nan": true, "start": true, "end": true}

// aggregations may be followed by a grouping before their "(".
var aggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
	"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true}

// grouping words are followed by a list of label names, not of series.
var grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// selectors lists the metrics an expression selects: every identifier
// that is not a function or aggregation (followed by "("), a keyword, or
// a label name (inside {...} or a grouping's (...)), with the label names
// its {...} matches on. The expression is known to parse (promtool checks
// it), so this only has to tell those apart.
func selectors(expr string) ([]selector, error) {
	var out []selector
	rs := []rune(expr)
	i := 0
	skipSpace := func() {
		for i < len(rs) && unicode.IsSpace(rs[i]) {
			i++
		}
	}
	ident := func() string {
		start := i
		for i < len(rs) && (rs[i] == '_' || rs[i] == ':' || unicode.IsLetter(rs[i]) || unicode.IsDigit(rs[i])) {
			i++
		}
		return string(rs[start:i])
	}
	str := func() error { // a quoted string at i
		q := rs[i]
		for i++; i < len(rs) && rs[i] != q; i++ {
			if rs[i] == '\\' && q != '`' {
				i++
			}
		}
		if i >= len(rs) {
			return fmt.Errorf("unterminated string in %q", expr)
		}
		i++
		return nil
	}
	// matchers reads {...} at i and returns the label names it matches on.
	matchers := func() ([]string, error) {
		var names []string
		i++ // {
		for {
			skipSpace()
			switch {
			case i >= len(rs):
				return nil, fmt.Errorf("unterminated {} in %q", expr)
			case rs[i] == '}':
				i++
				return names, nil
			case rs[i] == ',':
				i++
			case rs[i] == '"' || rs[i] == '\'' || rs[i] == '`':
				start := i
				if err := str(); err != nil {
					return nil, err
				}
				end := i
				skipSpace()
				if i < len(rs) && strings.ContainsRune("=!", rs[i]) { // a quoted label name
					names = append(names, string(rs[start+1:end-1]))
					for i < len(rs) && strings.ContainsRune("=!~ ", rs[i]) {
						i++
					}
					if i >= len(rs) {
						return nil, fmt.Errorf("a matcher without a value in %q", expr)
					}
					if err := str(); err != nil {
						return nil, err
					}
				}
			default:
				name := ident()
				if name == "" {
					return nil, fmt.Errorf("unexpected %q in {} of %q", rs[i], expr)
				}
				names = append(names, name)
				skipSpace()
				for i < len(rs) && strings.ContainsRune("=!~", rs[i]) {
					i++
				}
				skipSpace()
				if i < len(rs) && (rs[i] == '"' || rs[i] == '\'' || rs[i] == '`') {
					if err := str(); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	skipTo := func(close rune) error {
		for i < len(rs) && rs[i] != close {
			i++
		}
		if i >= len(rs) {
			return fmt.Errorf("unterminated %q in %q", close, expr)
		}
		i++
		return nil
	}
	for i < len(rs) {
		c := rs[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case unicode.IsDigit(c) || c == '.' && i+1 < len(rs) && unicode.IsDigit(rs[i+1]):
			// A number or a duration: 0.9, 1e3, 5m, 0x1f.
			for i < len(rs) && (unicode.IsLetter(rs[i]) || unicode.IsDigit(rs[i]) || rs[i] == '.') {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			if err := str(); err != nil {
				return nil, err
			}
		case c == '[':
			if err := skipTo(']'); err != nil {
				return nil, err
			}
		case c == '{': // a selector by its matchers alone
			names, err := matchers()
			if err != nil {
				return nil, err
			}
			out = append(out, selector{labels: names})
		case c == '_' || c == ':' || unicode.IsLetter(c):
			word := ident()
			skipSpace()
			next := rune(0)
			if i < len(rs) {
				next = rs[i]
			}
			switch {
			case grouping[strings.ToLower(word)]:
				if next == '(' {
					if err := skipTo(')'); err != nil {
						return nil, err
					}
				}
			case next == '(' || keywords[strings.ToLower(word)] || aggregations[strings.ToLower(word)]:
				// A function or an aggregation; its arguments follow.
			case next == '{':
				names, err := matchers()
				if err != nil {
					return nil, err
				}
				out = append(out, selector{metric: word, labels: names})
			default:
				out = append(out, selector{metric: word})
			}
		default:
			i++
		}
	}
	return out, nil
}
