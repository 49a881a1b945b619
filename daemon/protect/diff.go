package protect

import (
	"bytes"
	"fmt"
	"strings"
)

// contextLines is how many unchanged lines surround a change in a hunk.
const contextLines = 3

// Bounds of a diff. A diff is for a person reading the log line about an
// edit of a manifest (a few KiB, a few hundred lines); the longest common
// subsequence costs the lines of one side times the lines of the other in
// time and memory, so content beyond these bounds is summarised instead
// (sizes and line counts), at a cost that does not grow with it.
const (
	// maxDiffBytes is the most bytes either side of a diff may have: 16
	// times a large manifest, and a bound on the diff's own length.
	maxDiffBytes = 64 << 10
	// maxDiffCells bounds the table of the longest common subsequence:
	// lines of one side times lines of the other, after the lines both
	// start with. At 4 bytes a cell that is 4 MiB; a manifest of 200
	// lines can be diffed against a file of 5,000.
	maxDiffCells = 1 << 20
)

// op is one line of an edit script.
type op struct {
	kind byte // ' ' keep, '-' delete, '+' insert
	text string
}

// UnifiedDiff renders the change from a to b as a unified diff with the
// given file labels, or "" when they are equal. It is line-based (LCS),
// which is plenty for files of a few hundred lines such as manifests.
// Beyond maxDiffBytes a side or maxDiffCells line pairs the hunks are
// replaced by one line saying how large each side is.
func UnifiedDiff(fromLabel, toLabel string, a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	header := fmt.Sprintf("--- %s\n+++ %s\n", fromLabel, toLabel)
	if len(a) > maxDiffBytes || len(b) > maxDiffBytes {
		return header + omitted(a, b)
	}
	x, y := lines(a), lines(b)
	// The lines both sides start with are kept as they are: the edit
	// script below keeps a line whenever both sides have it next, so
	// leaving them out of the table changes nothing but its size.
	prefix := 0
	for prefix < len(x) && prefix < len(y) && x[prefix] == y[prefix] {
		prefix++
	}
	if cells := (len(x) - prefix + 1) * (len(y) - prefix + 1); cells > maxDiffCells {
		return header + omitted(a, b)
	}
	ops := make([]op, 0, len(x)+len(y)-prefix)
	for _, l := range x[:prefix] {
		ops = append(ops, op{' ', l})
	}
	ops = script(ops, x[prefix:], y[prefix:])
	var out strings.Builder
	out.WriteString(header)
	for _, h := range hunks(ops) {
		out.WriteString(h)
	}
	return out.String()
}

// omitted is what replaces the hunks of a diff over the bounds.
func omitted(a, b []byte) string {
	return fmt.Sprintf("diff omitted: from %d bytes (%d lines) to %d bytes (%d lines); a diff is made for at most %d bytes a side and %d line pairs\n",
		len(a), lineCount(a), len(b), lineCount(b), maxDiffBytes, maxDiffCells)
}

// lineCount counts lines as lines does, without splitting.
func lineCount(b []byte) int {
	n := bytes.Count(b, []byte{'\n'})
	if len(b) > 0 && b[len(b)-1] != '\n' {
		n++
	}
	return n
}

// lines splits content into lines; a last line without a newline is
// marked as such, as diff does.
func lines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	s := string(b)
	noEOL := !strings.HasSuffix(s, "\n")
	ls := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if noEOL {
		ls[len(ls)-1] += "\n\\ No newline at end of file"
	}
	return ls
}

// script appends to ops the shortest edit script from x to y by longest
// common subsequence. Its table is one slice of (len(x)+1)*(len(y)+1)
// cells, which the caller bounds (maxDiffCells).
func script(ops []op, x, y []string) []op {
	n, m := len(x), len(y)
	w := m + 1
	lcs := make([]int32, (n+1)*w) // lcs[i*w+j]: of x[i:] and y[j:]
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i*w+j] = lcs[(i+1)*w+j+1] + 1
			} else {
				lcs[i*w+j] = max(lcs[(i+1)*w+j], lcs[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			ops = append(ops, op{' ', x[i]})
			i, j = i+1, j+1
		case i < n && (j == m || lcs[(i+1)*w+j] >= lcs[i*w+j+1]):
			// Deletions before insertions, as diff prints them.
			ops = append(ops, op{'-', x[i]})
			i++
		default:
			ops = append(ops, op{'+', y[j]})
			j++
		}
	}
	return ops
}

// hunks groups the changes with their context; changes closer than twice
// the context share a hunk.
func hunks(ops []op) []string {
	var out []string
	aLine, bLine := make([]int, len(ops)+1), make([]int, len(ops)+1)
	for k, o := range ops {
		aLine[k+1], bLine[k+1] = aLine[k], bLine[k]
		if o.kind != '+' {
			aLine[k+1]++
		}
		if o.kind != '-' {
			bLine[k+1]++
		}
	}
	for k := 0; k < len(ops); {
		if ops[k].kind == ' ' {
			k++
			continue
		}
		start := max(0, k-contextLines)
		end := k
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*contextLines {
				end = min(end+contextLines, len(ops))
				break
			}
			end = run
		}
		var h strings.Builder
		fmt.Fprintf(&h, "@@ -%s +%s @@\n", rangeOf(aLine[start], aLine[end]), rangeOf(bLine[start], bLine[end]))
		for _, o := range ops[start:end] {
			h.WriteByte(o.kind)
			h.WriteString(o.text)
			h.WriteByte('\n')
		}
		out = append(out, h.String())
		k = end
	}
	return out
}

// rangeOf renders a hunk range "start,count" (1-based; an empty range
// names the line before it).
func rangeOf(from, to int) string {
	count := to - from
	if count == 0 {
		return fmt.Sprintf("%d,0", from)
	}
	if count == 1 {
		return fmt.Sprintf("%d", from+1)
	}
	return fmt.Sprintf("%d,%d", from+1, count)
}
