package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestStreamShowsWhatPlainGoTestShows(t *testing.T) {
	tests := []struct {
		name    string
		verbose bool
		want    []string
		notWant []string
	}{
		{
			name: "plain",
			want: []string{
				"[unit] # example.com/c [example.com/c.test]\n",
				"[unit] go: a line that is not JSON\n",
				"[unit]     a_test.go:4: boom\n",
				"[unit] --- FAIL: TestFails (30.00s)\n",
				"[unit] FAIL\texample.com/a\t42.600s\n",
				"[unit] ok  \texample.com/b\t0.200s\n",
			},
			notWant: []string{"slow log", "--- PASS", "[unit] PASS\n"},
		},
		{
			name:    "verbose",
			verbose: true,
			want:    []string{"[unit]     a_test.go:3: slow log\n", "[unit] --- PASS: TestB (0.10s)\n", "[unit]     a_test.go:4: boom\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := os.Open("testdata/run.json")
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			var out bytes.Buffer
			if err := stream(in, &out, "unit", tt.verbose); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out.String(), w) {
					t.Errorf("output has %q:\n%s", w, out.String())
				}
			}
			if strings.Count(out.String(), "a_test.go:4: boom") != 1 {
				t.Errorf("the failing subtest's output is not shown exactly once:\n%s", out.String())
			}
		})
	}
}

func TestReportNamesTimesSlowestTestsAndFailures(t *testing.T) {
	dir := t.TempDir()
	passing := filepath.Join(dir, "sim.json")
	write(t, passing, `{"Action":"pass","Package":"example.com/sim","Test":"TestSchedules","Elapsed":80}
{"Action":"pass","Package":"example.com/sim","Elapsed":81}
`)
	write(t, passing+".rc", "0\n")
	crashed := filepath.Join(dir, "e2e.json")
	write(t, crashed, "panic: a crash outside any test\n")
	write(t, crashed+".rc", "2\n")

	runs, err := readRuns([]string{"unit=testdata/run.json", "sim=" + passing, "e2e=" + crashed})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if report(&out, runs) {
		t.Error("report says everything passed")
	}
	got := out.String()
	for _, w := range []string{
		"   unit  FAIL    42.6s  example.com/a\n   unit  ok       0.2s  example.com/b\n   unit  FAIL     0.0s  example.com/c\n",
		"   sim   ok      81.0s  example.com/sim\n",
		"== the ten slowest tests\n      80.0s  TestSchedules  example.com/sim\n      30.0s  TestFails  example.com/a\n      12.5s  TestSlow  example.com/a\n       0.1s  TestB  example.com/b\n",
		"   unit: FAIL example.com/c\n   unit: FAIL example.com/a\n   unit: failing tests: TestFails/sub TestFails\n",
		// Why it failed, under what failed: the lines t.Error wrote.
		"   unit: TestFails/sub: a_test.go:4: boom\n   unit: TestFails/sub: the reason, on a line of its own\n",
		"   e2e: go test exited 2 without a failing package",
	} {
		if !strings.Contains(got, w) {
			t.Errorf("report lacks %q:\n%s", w, got)
		}
	}
	if strings.Contains(got, "slow log") {
		t.Errorf("a passing test's log is among the failures:\n%s", got)
	}
	if strings.Contains(got, "sim:") {
		t.Errorf("a passing run is named among the failures:\n%s", got)
	}

	runs, err = readRuns([]string{"sim=" + passing})
	if err != nil {
		t.Fatal(err)
	}
	if !report(&out, runs) {
		t.Error("a passing run reads as failed")
	}
}

func TestErrorLinesAreTrimmedForTheEndOfALog(t *testing.T) {
	tests := []struct {
		name string
		errs []string
		want []string
	}{
		{"none", nil, nil},
		{"indented", []string{"    x_test.go:9: violation: two clusters"}, []string{"T: x_test.go:9: violation: two clusters"}},
		{"many", []string{"1", "2", "3", "4", "5", "6", "7", "8"}, []string{"T: 1", "T: 2", "T: 3", "T: 4", "T: 5", "T: 6", "T: … and 2 more lines"}},
		{"long", []string{strings.Repeat("x", 400)}, []string{"T: " + strings.Repeat("x", 300) + "…"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errorLines("T", tt.errs); !slices.Equal(got, tt.want) {
				t.Errorf("errorLines = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReportKeepsTenTests(t *testing.T) {
	var r run
	for i := range 15 {
		r.Tests = append(r.Tests, result{Name: "T", Package: "p", Elapsed: float64(i)})
	}
	var out bytes.Buffer
	report(&out, []run{r})
	if n := strings.Count(out.String(), "  T  p\n"); n != 10 {
		t.Errorf("%d tests listed, want 10:\n%s", n, out.String())
	}
	if !strings.Contains(out.String(), "14.0s") || strings.Contains(out.String(), "   4.0s") {
		t.Errorf("not the ten slowest:\n%s", out.String())
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
