package layering

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestImportsFlowOneWay reads the import graph of every package of the
// module (production code, not tests) and checks etcdlet's rules:
//
//   - nothing imports cmd, and only cmd imports the root daemon package,
//     the composition root;
//   - the ground (config, pki, systemd, internal) imports nothing of
//     daemon, cmd, test or hack;
//   - the product (cmd, daemon and the ground) imports nothing of test or
//     hack;
//   - the concerns import each other without a circle: a concern is a
//     folder under daemon/ or test/ with everything below it, or another
//     top-level folder. Go forbids a circle of packages; this forbids one
//     of folders (daemon/runtime/staticpod importing daemon/manifest,
//     which imports daemon/runtime, was one).
func TestImportsFlowOneWay(t *testing.T) {
	module, edges := importGraph(t)
	if len(edges) < 100 {
		t.Fatalf("read %d imports between the module's packages; the graph is not whole", len(edges))
	}
	var broken []string
	for _, e := range edges {
		if why := ruleBroken(e); why != "" {
			broken = append(broken, fmt.Sprintf("%s imports %s: %s", e.from, e.to, why))
		}
	}
	if circle := concernCircle(edges); circle != nil {
		broken = append(broken, "the concerns import each other in a circle: "+strings.Join(circle, " → "))
	}
	for _, b := range broken {
		t.Errorf("%s (module %s)", b, module)
	}
}

type edge struct{ from, to string }

// importGraph lists the module's packages with go list and returns the
// imports between them, paths relative to the module ("" is its root).
func importGraph(t *testing.T) (string, []edge) {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH (%v): this test reads the import graph with go list", err)
	}
	modOut, err := exec.Command(goTool, "list", "-m").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	module := strings.TrimSpace(string(modOut))
	cmd := exec.Command(goTool, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var edges []edge
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		from, _ := relative(module, fields[0])
		for _, imp := range fields[1:] {
			if to, ok := relative(module, imp); ok {
				edges = append(edges, edge{from, to})
			}
		}
	}
	return module, edges
}

func relative(module, path string) (string, bool) {
	if path == module {
		return "", true
	}
	rest, ok := strings.CutPrefix(path, module+"/")
	return rest, ok
}

// top is a package's top-level folder.
func top(pkg string) string {
	first, _, _ := strings.Cut(pkg, "/")
	return first
}

var ground = []string{"config", "pki", "systemd", "internal"}

func ruleBroken(e edge) string {
	from, to := top(e.from), top(e.to)
	switch {
	case to == "cmd" && from != "cmd":
		return "nothing imports the command line"
	case e.to == "daemon" && from != "cmd":
		return "only cmd imports the composition root"
	case slices.Contains(ground, from) && (to == "daemon" || to == "cmd" || to == "test" || to == "hack"):
		return from + " is ground: it imports only ground packages"
	case (to == "test" || to == "hack") && from != "test" && from != "hack":
		return "the product imports no test or build tooling"
	}
	return ""
}

// concern is the folder that stands for a package in the circle check.
func concern(pkg string) string {
	parts := strings.Split(pkg, "/")
	if (parts[0] == "daemon" || parts[0] == "test") && len(parts) > 1 {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

// concernCircle returns one circle of concerns, or nil.
func concernCircle(edges []edge) []string {
	next := map[string][]string{}
	for _, e := range edges {
		from, to := concern(e.from), concern(e.to)
		if from != to && !slices.Contains(next[from], to) {
			next[from] = append(next[from], to)
		}
	}
	names := make([]string, 0, len(next))
	for n := range next {
		names = append(names, n)
		sort.Strings(next[n])
	}
	sort.Strings(names)
	const (
		unseen = iota
		onPath
		done
	)
	mark := map[string]int{}
	var path []string
	var visit func(string) []string
	visit = func(n string) []string {
		mark[n] = onPath
		path = append(path, n)
		for _, m := range next[n] {
			switch mark[m] {
			case onPath:
				i := slices.Index(path, m)
				return append(slices.Clone(path[i:]), m)
			case unseen:
				if c := visit(m); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		mark[n] = done
		return nil
	}
	for _, n := range names {
		if mark[n] == unseen {
			if c := visit(n); c != nil {
				return c
			}
		}
	}
	return nil
}

// TestTheRulesCatchABreak shows each rule failing on the import that
// breaks it, so that TestImportsFlowOneWay cannot pass by reading too
// little.
func TestTheRulesCatchABreak(t *testing.T) {
	for _, tc := range []struct {
		e    edge
		want string
	}{
		{edge{"daemon/node", "cmd/etcdlet"}, "nothing imports the command line"},
		{edge{"daemon/node", "daemon"}, "only cmd imports the composition root"},
		{edge{"pki", "daemon/atomicfile"}, "pki is ground"},
		{edge{"internal/eventually", "test/harness"}, "internal is ground"},
		{edge{"daemon/node", "test/harness"}, "the product imports no test"},
		{edge{"cmd/etcdlet", "daemon"}, ""},
		{edge{"daemon/node", "internal/atomicfile"}, ""},
		{edge{"test/campaign", "daemon/node"}, ""},
	} {
		if got := ruleBroken(tc.e); tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s → %s: %q, want %q", tc.e.from, tc.e.to, got, tc.want)
		}
	}
	circle := concernCircle([]edge{
		{"daemon/runtime/staticpod", "daemon/manifest"},
		{"daemon/manifest", "daemon/runtime"},
		{"daemon/manifest", "config"},
	})
	if want := []string{"daemon/manifest", "daemon/runtime", "daemon/manifest"}; !slices.Equal(circle, want) {
		t.Errorf("circle = %v, want %v", circle, want)
	}
	if c := concernCircle([]edge{{"daemon/runtime/staticpod/manifest", "daemon/runtime"}, {"daemon/runtime/staticpod", "daemon/runtime/staticpod/manifest"}}); c != nil {
		t.Errorf("packages inside one concern are no circle: %v", c)
	}
}
