package metrics

import (
	"bufio"
	"bytes"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/etcdlet/etcdlet/internal/testbin"
)

// The operator's documentation of the metrics: a table whose rows start
// with the metric's name (docs/operations.md, "Metrics and health").
var docPath = flag.String("metrics.doc", "../../docs/operations.md", "the document whose metrics table must match the registry")

// family is one metric family as the agent registers it.
type family struct {
	Type   string   // counter, gauge, histogram
	Labels []string // variable labels, sorted
}

var (
	descName   = regexp.MustCompile(`^Desc\{fqName: "([^"]*)"`)
	descLabels = regexp.MustCompile(`variableLabels: \{([^}]*)\}\}$`)
)

// registered returns every etcdlet_ family New (and CountKubernetesRequests,
// SetBuildInfo)
// registers, with its type and labels. Vectors are given one child each,
// so that the registry gathers them; a field of Metrics that is a
// collector but not registered fails the test.
func registered(t *testing.T) map[string]family {
	t.Helper()
	m := New("etcd-main")
	m.CountKubernetesRequests(func() int64 { return 0 })
	m.SetBuildInfo("test")
	labels := map[string][]string{}
	v := reflect.ValueOf(m).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		c, ok := f.Interface().(prometheus.Collector)
		if !ok || f.Type() == reflect.TypeFor[*prometheus.Registry]() {
			continue
		}
		descs := make(chan *prometheus.Desc, 4)
		c.Describe(descs)
		close(descs)
		for d := range descs {
			s := d.String()
			name, ls := descName.FindStringSubmatch(s), descLabels.FindStringSubmatch(s)
			if name == nil || ls == nil {
				t.Fatalf("cannot read the description of field %s: %s", v.Type().Field(i).Name, s)
			}
			var names []string
			if ls[1] != "" {
				names = strings.Split(ls[1], ",")
			}
			slices.Sort(names)
			labels[name[1]] = names
			values := make([]string, len(names))
			for j := range values {
				values[j] = "x"
			}
			switch vec := c.(type) {
			case *prometheus.CounterVec:
				vec.WithLabelValues(values...)
			case *prometheus.GaugeVec:
				vec.WithLabelValues(values...)
			case *prometheus.HistogramVec:
				vec.WithLabelValues(values...)
			}
		}
	}
	gathered, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]family{}
	for _, mf := range gathered {
		name := mf.GetName()
		if !strings.HasPrefix(name, "etcdlet_") {
			continue
		}
		ls, ok := labels[name]
		if !ok {
			t.Errorf("%s is registered but is no field of Metrics", name)
		}
		out[name] = family{Type: strings.ToLower(mf.GetType().String()), Labels: ls}
	}
	for name := range labels {
		if _, ok := out[name]; !ok {
			t.Errorf("%s is a field of Metrics but New does not register it", name)
		}
	}
	return out
}

func TestEveryMetricIsEtcdletsAndRegisteredOnce(t *testing.T) {
	fams := registered(t)
	if len(fams) == 0 {
		t.Fatal("no etcdlet_ family gathered")
	}
	for name, f := range fams {
		switch {
		case f.Type == "counter" && !strings.HasSuffix(name, "_total"):
			t.Errorf("counter %s does not end in _total", name)
		case f.Type != "counter" && strings.HasSuffix(name, "_total"):
			t.Errorf("%s %s ends in _total", f.Type, name)
		}
	}
}

// docRow matches a row of the metrics table: | `name` | type | labels | ...
var docRow = regexp.MustCompile("^\\| `(etcdlet_[a-z0-9_]+)` \\| ([a-z]+) \\| ([^|]*) \\|")

// TestMetricsAreDocumented checks the operator's table of metrics against
// the registry, both ways: every registered metric has a row with its
// type and labels, every row names a registered metric. Run with
// -metrics.doc=FILE to check another copy of the table.
func TestMetricsAreDocumented(t *testing.T) {
	fams := registered(t)
	data, err := os.ReadFile(*docPath)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		row := docRow.FindStringSubmatch(sc.Text())
		if row == nil {
			continue
		}
		name, typ := row[1], row[2]
		var labels []string
		for _, l := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(row[3], -1) {
			labels = append(labels, l[1])
		}
		slices.Sort(labels)
		if documented[name] {
			t.Errorf("%s: %s has two rows", *docPath, name)
		}
		documented[name] = true
		f, ok := fams[name]
		switch {
		case !ok:
			t.Errorf("%s documents %s, which the agent does not register", *docPath, name)
		case f.Type != typ:
			t.Errorf("%s documents %s as a %s; it is a %s", *docPath, name, typ, f.Type)
		case !slices.Equal(f.Labels, labels):
			t.Errorf("%s documents %s with labels %v; it has %v", *docPath, name, labels, f.Labels)
		}
	}
	for name := range fams {
		if !documented[name] {
			t.Errorf("%s has no row for %s", *docPath, name)
		}
	}
}

// promtool is the binary hack/promtool.sh builds.
func promtool(t *testing.T) string {
	t.Helper()
	return testbin.Executable(t, "ETCDLET_PROMTOOL", "", "export ETCDLET_PROMTOOL=$(hack/promtool.sh) (builds Prometheus's promtool once into the cache) or run make test")
}

// TestExpositionPassesPromtool lints what /metrics serves, with a child
// in the vectors, by `promtool check metrics`: names, units, help.
func TestExpositionPassesPromtool(t *testing.T) {
	bin := promtool(t)
	m := New("etcd-main")
	m.CountKubernetesRequests(func() int64 { return 0 })
	m.MembershipChanges.WithLabelValues("add-learner", "done")
	m.EtcdCallErrors.WithLabelValues("promote", "retry")
	m.Refusals.WithLabelValues("foreign-data")
	m.Members.WithLabelValues("voter")
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	cmd := exec.Command(bin, "check", "metrics")
	cmd.Stdin = rec.Body
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// TestEverySeriesNamesTheCluster: a host may run one agent per cluster,
// and a dashboard or an alert tells their series apart by the label
// cluster, on etcdlet's series and on the Go and process ones alike.
func TestEverySeriesNamesTheCluster(t *testing.T) {
	m := New("etcd-events")
	m.CountKubernetesRequests(func() int64 { return 0 })
	m.SetBuildInfo("test")
	m.Members.WithLabelValues("voter").Set(3)
	gathered, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	prefixes := map[string]bool{}
	for _, mf := range gathered {
		prefix, _, _ := strings.Cut(mf.GetName(), "_")
		prefixes[prefix] = true
		for _, s := range mf.GetMetric() {
			labelled := false
			for _, l := range s.GetLabel() {
				labelled = labelled || l.GetName() == "cluster" && l.GetValue() == "etcd-events"
			}
			if !labelled {
				t.Errorf("a series of %s has no label cluster=\"etcd-events\": %v", mf.GetName(), s.GetLabel())
			}
		}
	}
	for _, want := range []string{"etcdlet", "go", "process"} {
		if !prefixes[want] {
			t.Errorf("no %s_ series gathered (got %v)", want, prefixes)
		}
	}
}
