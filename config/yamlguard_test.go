package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// flatAliases is the flat amplification: one anchored value of size bytes
// aliased into n etcd.extraArgs entries whose names break a rule, so that
// each entry is a problem that echoes the whole value.
func flatAliases(size, n int) []byte {
	var b strings.Builder
	b.WriteString(base + "etcd:\n  extraArgs:\n")
	fmt.Fprintf(&b, "    A0: &v %s\n", strings.Repeat("x", size))
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "    A%d: *v\n", i)
	}
	return []byte(b.String())
}

// flatListAliases is the same through a list, at four bytes an alias:
// every etcd.allowInsecureExtraArgs entry that is not an insecure flag is
// a problem echoing it.
func flatListAliases(size, n int) []byte {
	var b strings.Builder
	b.WriteString(base + "etcd:\n  allowInsecureExtraArgs: [&v " + strings.Repeat("x", size))
	b.WriteString(strings.Repeat(", *v", n-1))
	b.WriteString("]\n")
	return []byte(b.String())
}

// laughs is the "billion laughs": levels of anchored lists, each listing
// the one before ten times, the last used where a list belongs: 10^levels
// values in a file of a few hundred bytes once every alias is expanded.
func laughs(levels int) []byte {
	var b strings.Builder
	b.WriteString(base + "etcd:\n  extraArgs:\n    l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < levels; i++ {
		fmt.Fprintf(&b, "    l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	fmt.Fprintf(&b, "  allowInsecureExtraArgs: *l%d\n", levels-1)
	return []byte(b.String())
}

// maxReportBytes bounds the text of any list of problems: at most
// MaxReportedProblems lines and the count of the rest, each line with a
// path, a quoted value (up to ten bytes a rune, as \U0010fffe) and a rule,
// each cut, in UTF-8.
const maxReportBytes = (MaxReportedProblems + 1) * (4*maxPathRunes + 10*maxValueRunes + 4*maxRuleRunes + 100)

// loadMeasured loads data from a file and returns the error text and the
// bytes allocated meanwhile (runtime.MemStats.TotalAlloc).
func loadMeasured(t testing.TB, data []byte) (string, uint64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := Load(path)
	text := ""
	if err != nil {
		text = err.Error()
	}
	runtime.ReadMemStats(&after)
	var problems Errors
	if err != nil && !errors.As(err, &problems) {
		t.Fatalf("not a list of problems: %v", err)
	}
	return text, after.TotalAlloc - before.TotalAlloc
}

// An anchored value aliased many times must not make the problems grow
// with the number of aliases times the size of the value: the file is
// refused for its aliases, in a text and with allocations bounded by the
// file's size.
func TestAliasAmplificationIsBounded(t *testing.T) {
	const aliasRule = "YAML aliases may add at most 64 KiB to the file, and with the aliases before it the alias "
	for _, tt := range []struct {
		name string
		data []byte
		want string // the one problem
	}{
		{"flat: 64 KiB value in 1000 extraArgs", flatAliases(64<<10, MaxMappingEntries),
			"etcd.extraArgs.A1: " + aliasRule + "*v (about 65537 bytes) would add more: write the values out (line 9)"},
		{"flat: 64 KiB value in 5000 list entries", flatListAliases(64<<10, 5000),
			"etcd.allowInsecureExtraArgs[1]: " + aliasRule + "*v (about 65537 bytes) would add more: write the values out (line 7)"},
		{"nested: billion laughs", laughs(9),
			"etcd.extraArgs.l4[0]: " + aliasRule + "*l3 (about 41111 bytes) would add more: write the values out (line 12)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			text, alloc := loadMeasured(t, tt.data)
			t.Logf("file %d bytes: error text %d bytes, %d bytes allocated", len(tt.data), len(text), alloc)
			if len(text) > maxReportBytes {
				t.Errorf("error text of %d bytes, want at most %d", len(text), maxReportBytes)
			}
			if limit := uint64(64*len(tt.data) + 8<<20); alloc > limit {
				t.Errorf("%d bytes allocated, want at most %d (64 times the file, plus 8 MiB)", alloc, limit)
			}
			if text != tt.want {
				t.Errorf("problems:\n%.3000s\nwant:\n%s", text, tt.want)
			}
		})
	}
}

// What would make the checks see other than the file shows, or more than
// it holds, is refused with the field, the value and the rule.
func TestYAMLGuardRefuses(t *testing.T) {
	const head = "members:\n  source: static\n  addresses: [192.0.2.1]\n" // three lines
	const tagRule = "is not accepted: a tag changes how a value is read (!!binary decodes base64) and no field needs one; write the value itself, quoted for a string"
	long := strings.Repeat("x", MaxAliasExpansion-1) // an alias of it adds MaxAliasExpansion
	for _, tt := range []struct {
		name string
		yaml string
		want []string
	}{
		{"a second document", base + "---\ncluster:\n  name: other\n", []string{
			"(file): line 6: a second YAML document: etcdlet reads one; remove it"}},
		{"an empty second document", base + "---\n", []string{
			"(file): line 6: a second YAML document: etcdlet reads one; remove it"}},
		{"a second document after an end marker", base + "...\n---\n# nothing\n", []string{
			"(file): line 7: a second YAML document: etcdlet reads one; remove it"}},
		{"a second document that is not YAML", base + "---\n[:\n", []string{
			"(file): not valid YAML: yaml: line 6: did not find expected node content"}},
		{"!!binary", head + "cluster:\n  name: !!binary ZXRjZC1tYWlu\n", []string{
			`cluster.name: "ZXRjZC1tYWlu": the explicit tag !!binary ` + tagRule + " (line 5)"}},
		{"!!str", head + "cluster:\n  name: !!str etcd-main\n", []string{
			`cluster.name: "etcd-main": the explicit tag !!str ` + tagRule + " (line 5)"}},
		{"!!timestamp", head + "cluster: {name: etcd-main}\netcd:\n  dataDir: !!timestamp 2001-12-14\n", []string{
			`etcd.dataDir: "2001-12-14": the explicit tag !!timestamp ` + tagRule + " (line 6)"}},
		{"a custom tag on a section", head + "cluster: !etcd\n  name: etcd-main\n", []string{
			"cluster: the explicit tag !etcd " + tagRule + " (line 4)"}},
		{"a tag on a key", base + "etcd:\n  extraArgs:\n    !!binary ZGF0YS1kaXI=: /x\n", []string{
			`etcd.extraArgs.ZGF0YS1kaXI=: "ZGF0YS1kaXI=": the explicit tag !!binary ` + tagRule + " (line 8)"}},
		{"every tag, up to the bound", head + "cluster: {name: etcd-main}\netcd:\n  extraArgs:\n" + strings.Repeat("    a: !!binary eA==\n", 25),
			append(tagLines(tagRule, 7, 20), "… and 5 more problems")},
		{"a merge key", base + "etcd:\n  tls:\n    client: &tls {certFile: /a, keyFile: /b, caFile: /c}\n    peer:\n      <<: *tls\n      caFile: /d\n", []string{
			"etcd.tls.peer.<<: merge keys are not accepted: the checks cannot see the fields they merge in; write the fields out, or alias the whole section (line 10)"}},
		{"an alias as a key", base + "etcd:\n  extraArgs:\n    &k snapshot-count: \"1\"\n    *k : \"2\"\n", []string{
			"etcd.extraArgs.k: an alias (*k) as a key is not accepted: write the key out (line 9)"}},
		{"an alias inside its own anchor", head + "cluster: {name: etcd-main}\netcd:\n  allowInsecureExtraArgs: &a [*a]\n", []string{
			"etcd.allowInsecureExtraArgs[0]: the alias *a refers to a value that contains it (line 6)"}},
		{"a mapping of too many entries", base + "etcd:\n  extraArgs:\n" + manyKeys(MaxMappingEntries+1), []string{
			`etcd.extraArgs: "1001 entries": must have at most 1000 entries: the YAML decoder compares every pair of keys (line 8)`}},
		{"aliases past the budget", base + "etcd:\n  extraArgs:\n    a: &v " + long + "\n    b: *v\n    c: *v\n", []string{
			"etcd.extraArgs.c: YAML aliases may add at most 64 KiB to the file, and with the aliases before it the alias *v (about 65536 bytes) would add more: write the values out (line 10)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			if err == nil {
				t.Fatal("accepted")
			}
			if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// manyKeys is n etcd.extraArgs entries.
func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "    a%d: x\n", i)
	}
	return b.String()
}

// tagLines are the problems of n etcd.extraArgs entries tagged !!binary,
// from line first on.
func tagLines(rule string, first, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`etcd.extraArgs.a: "eA==": the explicit tag !!binary %s (line %d)`, rule, first+i)
	}
	return out
}

// Aliases stay usable within their budget, and so does what only looks
// like a refused construct.
func TestYAMLGuardAccepts(t *testing.T) {
	const tls = "etcd:\n  tls:\n    client: &tls {certFile: /pki/server.crt, keyFile: /pki/server.key, caFile: &ca /pki/ca.crt}\n    peer: *tls\n"
	for _, tt := range []struct {
		name  string
		yaml  string
		check func(*Config) string
	}{
		{"comments and --- before the document", "# etcdlet\n---\n" + base, nil},
		{"a document end marker", base + "...\n", nil},
		{"one TLS section aliased", base + tls, func(c *Config) string {
			if c.Etcd.TLS.Peer != c.Etcd.TLS.Client || c.Etcd.TLS.Peer.KeyFile != "/pki/server.key" {
				return fmt.Sprintf("peer %+v, want client's %+v", c.Etcd.TLS.Peer, c.Etcd.TLS.Client)
			}
			return ""
		}},
		{"a path aliased", base + tls + "agent:\n  etcdClientTLS: {certFile: /pki/client.crt, keyFile: /pki/client.key, caFile: *ca}\n", func(c *Config) string {
			if c.Agent.EtcdClientTLS.CAFile != "/pki/ca.crt" {
				return "agent.etcdClientTLS.caFile " + c.Agent.EtcdClientTLS.CAFile
			}
			return ""
		}},
		{"a mapping of MaxMappingEntries entries", base + "etcd:\n  extraArgs:\n" + manyKeys(MaxMappingEntries), func(c *Config) string {
			if len(c.Etcd.ExtraArgs) != MaxMappingEntries {
				return fmt.Sprintf("%d etcd.extraArgs", len(c.Etcd.ExtraArgs))
			}
			return ""
		}},
		{"aliases adding exactly the budget", base + "etcd:\n  extraArgs:\n    a: &v " + strings.Repeat("x", MaxAliasExpansion-1) + "\n    b: *v\n", func(c *Config) string {
			if len(c.Etcd.ExtraArgs["b"]) != MaxAliasExpansion-1 {
				return fmt.Sprintf("etcd.extraArgs.b has %d bytes", len(c.Etcd.ExtraArgs["b"]))
			}
			return ""
		}},
		{"a quoted << is an ordinary key", base + "etcd:\n  extraArgs:\n    \"<<\": x\n", func(c *Config) string {
			if c.Etcd.ExtraArgs["<<"] != "x" {
				return fmt.Sprintf("etcd.extraArgs %v", c.Etcd.ExtraArgs)
			}
			return ""
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				if msg := tt.check(cfg); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

// FuzzParse checks that no input makes Parse or Validate panic, or report
// more than the bounded text. Seeds: the examples and the amplifications.
func FuzzParse(f *testing.F) {
	examples, _ := filepath.Glob("examples/*.yaml")
	for _, path := range examples {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(laughs(9))
	f.Add(flatAliases(200, 50))
	f.Add(flatListAliases(200, 50))
	f.Add([]byte(base + "---\ncluster:\n  name: other\n"))
	f.Add([]byte(base + "etcd:\n  dataDir: !!binary L3Zhcg==\n  tls:\n    client: &t {certFile: /a}\n    peer: {<<: *t}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > MaxConfigBytes {
			return // Load reads no more
		}
		cfg, err := Parse(data)
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil {
			return
		}
		var problems Errors
		if !errors.As(err, &problems) {
			t.Fatalf("not a list of problems: %v", err)
		}
		if n := len(problems.Reported()); n > MaxReportedProblems+1 {
			t.Errorf("%d problems reported", n)
		}
		if n := len(err.Error()); n > maxReportBytes {
			t.Errorf("%d bytes of problems", n)
		}
	})
}

// BenchmarkParse measures Parse, Validate and the problems' text of a
// real file and of the amplifications at the largest size Load reads:
// the refusal costs one visit of each node of the file.
func BenchmarkParse(b *testing.B) {
	example, err := os.ReadFile("examples/static-tls.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var many strings.Builder // a problem for each entry
	many.WriteString(base + "etcd:\n  allowInsecureExtraArgs:\n")
	for i := 0; many.Len() < MaxConfigBytes-100; i++ {
		fmt.Fprintf(&many, "    - a%d\n", i)
	}
	for _, bb := range []struct {
		name string
		data []byte
	}{
		{"example", example},
		{"flat aliases 1MiB", flatAliases(512<<10, 35000)},
		{"flat list aliases 1MiB", flatListAliases(512<<10, 130000)},
		{"billion laughs", laughs(9)},
		{"written-out problems 1MiB", []byte(many.String())},
		{"etcd.extraArgs entries 1MiB", []byte(base + "etcd:\n  extraArgs:\n" + manyKeys(75000))},
	} {
		if len(bb.data) > MaxConfigBytes {
			b.Fatalf("%s: %d bytes", bb.name, len(bb.data))
		}
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.data)))
			var text int
			for b.Loop() {
				cfg, err := Parse(bb.data)
				if err == nil {
					err = cfg.Validate()
				}
				if err != nil {
					text = len(err.Error())
				}
			}
			b.ReportMetric(float64(text), "problem-bytes")
		})
	}
}
