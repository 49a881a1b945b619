// Command testsummary reads the JSON event streams of `go test -json` for
// make test (hack/test.sh).
//
//	testsummary stream [-v] NAME   prints a stream as go test would, each line prefixed [NAME]
//	testsummary report NAME=FILE…  each package's time, the slowest ten tests, every failure
//
// stream without -v prints what plain `go test` prints: the output of the
// failing tests and each package's verdict; with -v every line. Lines that
// are not JSON (the go command's own errors) are printed as they come.
//
// report prints, for every run, each package's elapsed time (slowest first)
// and then the ten slowest top-level tests of all runs together, so that a
// suite that creeps is seen in every CI log. It ends with the failing
// packages and tests of each run and exits 1 if any run failed, including a
// run whose go test exited non-zero without a failing package (a build error,
// a panic outside a test): FILE.rc holds that exit status.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"unicode/utf8"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "stream":
		args := os.Args[2:]
		verbose := len(args) > 0 && args[0] == "-v"
		if verbose {
			args = args[1:]
		}
		if len(args) != 1 {
			usage()
		}
		if err := stream(os.Stdin, os.Stdout, args[0], verbose); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
	case "report":
		if len(os.Args) < 3 {
			usage()
		}
		runs, err := readRuns(os.Args[2:])
		if err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(2)
		}
		if !report(os.Stdout, runs) {
			os.Exit(1)
		}
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testsummary stream [-v] NAME < go-test-json\n       testsummary report NAME=FILE...")
	os.Exit(2)
}

// event is one line of `go test -json` (cmd/test2json), with the build
// events of the go command.
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
	// OutputType is "error" for the first line a t.Error or t.Fatal
	// wrote and "error-continue" for the lines after it (Go 1.25 on).
	OutputType string
}

// stream copies the output of one go test run, as plain go test would show
// it, each line prefixed with [name].
func stream(in io.Reader, out io.Writer, name string, verbose bool) error {
	w := bufio.NewWriter(out)
	defer w.Flush()
	prefix := "[" + name + "] "
	// A failed write to out is not acted on: the input is read to its end
	// whatever becomes of the output, so that the writer before this one in
	// the pipe (tee, keeping the JSON for the report: hack/test.sh) never
	// stops on a broken pipe. bufio.Writer keeps its first error and writes
	// nothing more after it.
	emit := func(text string) {
		for line := range strings.SplitAfterSeq(text, "\n") {
			if line != "" {
				_, _ = w.WriteString(prefix + line)
			}
		}
		if !strings.HasSuffix(text, "\n") {
			_, _ = w.WriteString("\n")
		}
		w.Flush()
	}
	// held is the output of running tests, kept until the test's verdict.
	held := map[string][]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		var e event
		if !strings.HasPrefix(line, "{") || json.Unmarshal([]byte(line), &e) != nil {
			emit(line + "\n")
			continue
		}
		switch {
		case e.Action == "build-output":
			emit(e.Output)
		case e.Action != "output":
		case verbose:
			emit(e.Output)
		case e.Test == "":
			// The test binary's own PASS, which plain go test leaves out.
			if e.Output != "PASS\n" {
				emit(e.Output)
			}
		default:
			key := e.Package + " " + e.Test
			held[key] = append(held[key], e.Output)
		}
		if e.Test != "" && (e.Action == "pass" || e.Action == "skip" || e.Action == "fail") {
			key := e.Package + " " + e.Test
			if e.Action == "fail" && !verbose {
				emit(strings.Join(held[key], ""))
			}
			delete(held, key)
		}
	}
	return sc.Err()
}

// run is what one go test invocation reported.
type run struct {
	Name     string
	Packages []result // in the order they finished
	Tests    []result // top-level tests only
	Failed   []string // failing tests, subtests included
	Exit     int      // go test's exit status; -1 if unknown
	// Errors holds what each failing test reported through t.Error and
	// t.Fatal, keyed by the test's name, so that the report at the end of
	// a CI log says why, not only what, failed.
	Errors map[string][]string
}

type result struct {
	Name    string
	Package string
	Elapsed float64
	Failed  bool
}

func readRuns(args []string) ([]run, error) {
	var runs []run
	for _, arg := range args {
		name, path, ok := strings.Cut(arg, "=")
		if !ok {
			return nil, fmt.Errorf("%q: want NAME=FILE", arg)
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		r, err := parse(name, f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r.Exit = readExit(path + ".rc")
		runs = append(runs, r)
	}
	return runs, nil
}

func readExit(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	var code int
	if _, err := fmt.Sscan(string(b), &code); err != nil {
		return -1
	}
	return code
}

// parse collects the verdicts of one run's event stream.
func parse(name string, in io.Reader) (run, error) {
	r := run{Name: name, Errors: map[string][]string{}}
	// errs is what each test (of any package) reported as an error, kept
	// until its verdict: only a failing test's errors are reported.
	errs := map[string][]string{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		key := e.Package + " " + e.Test
		if e.Action == "output" && e.Test != "" && strings.HasPrefix(e.OutputType, "error") {
			errs[key] = append(errs[key], strings.TrimRight(e.Output, "\n"))
		}
		if e.Action != "pass" && e.Action != "fail" {
			continue
		}
		failed := e.Action == "fail"
		switch {
		case e.Test == "":
			r.Packages = append(r.Packages, result{Package: e.Package, Elapsed: e.Elapsed, Failed: failed})
		case !strings.Contains(e.Test, "/"):
			r.Tests = append(r.Tests, result{Name: e.Test, Package: e.Package, Elapsed: e.Elapsed, Failed: failed})
		}
		if failed && e.Test != "" {
			r.Failed = append(r.Failed, e.Test)
			r.Errors[e.Test] = append(r.Errors[e.Test], errs[key]...)
		}
		delete(errs, key)
	}
	return r, sc.Err()
}

// report writes the summary of all runs and says whether all passed.
func report(w io.Writer, runs []run) bool {
	fmt.Fprintln(w, "== time per package")
	var tests []result
	for _, r := range runs {
		pkgs := sortedBySlowest(r.Packages)
		for _, p := range pkgs {
			verdict := "ok  "
			if p.Failed {
				verdict = "FAIL"
			}
			fmt.Fprintf(w, "   %-5s %s %7.1fs  %s\n", r.Name, verdict, p.Elapsed, p.Package)
		}
		tests = append(tests, r.Tests...)
	}
	fmt.Fprintln(w, "== the ten slowest tests")
	for i, t := range sortedBySlowest(tests) {
		if i == 10 {
			break
		}
		fmt.Fprintf(w, "   %7.1fs  %s  %s\n", t.Elapsed, t.Name, t.Package)
	}
	ok := true
	for _, r := range runs {
		for _, line := range failures(r) {
			if ok {
				fmt.Fprintln(w, "== failures")
				ok = false
			}
			fmt.Fprintf(w, "   %s: %s\n", r.Name, line)
		}
	}
	return ok
}

// failures are the lines that name what failed in one run.
func failures(r run) []string {
	var lines []string
	for _, p := range r.Packages {
		if p.Failed {
			lines = append(lines, "FAIL "+p.Package)
		}
	}
	if len(r.Failed) > 0 {
		lines = append(lines, "failing tests: "+strings.Join(r.Failed, " "))
	}
	for _, test := range r.Failed {
		lines = append(lines, errorLines(test, r.Errors[test])...)
	}
	if len(lines) == 0 && r.Exit != 0 {
		if r.Exit < 0 {
			lines = append(lines, "go test's exit status is unknown (it did not finish?); see its output above")
		} else {
			lines = append(lines, fmt.Sprintf("go test exited %d without a failing package (see its output above)", r.Exit))
		}
	}
	return lines
}

// A failing test's errors are shown in the report at most this many lines
// each, and each line at most this long: enough to say why it failed, short
// enough that the end of a CI log (which may be all a reader gets) holds it.
const (
	errorLinesShown = 6
	errorLineWidth  = 300
)

// errorLines are what test reported as errors, trimmed for the report.
func errorLines(test string, errs []string) []string {
	var lines []string
	for i, e := range errs {
		if i == errorLinesShown {
			lines = append(lines, fmt.Sprintf("%s: … and %d more lines", test, len(errs)-i))
			break
		}
		e = strings.TrimSpace(e)
		if len(e) > errorLineWidth {
			cut := errorLineWidth
			for !utf8.RuneStart(e[cut]) { // never half a character
				cut--
			}
			e = e[:cut] + "…"
		}
		lines = append(lines, test+": "+e)
	}
	return lines
}

func sortedBySlowest(rs []result) []result {
	out := slices.Clone(rs)
	slices.SortStableFunc(out, func(a, b result) int { return cmp.Compare(b.Elapsed, a.Elapsed) })
	return out
}
