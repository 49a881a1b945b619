package protect

import (
	"fmt"
	"strings"
)

// contextLines is how many unchanged lines surround a change in a hunk.
const contextLines = 3

// op is one line of an edit script.
type op struct {
	kind byte // ' ' keep, '-' delete, '+' insert
	text string
}

// UnifiedDiff renders the change from a to b as a unified diff with the
// given file labels, or "" when they are equal. It is line-based (LCS),
// which is plenty for files of a few hundred lines such as manifests.
func UnifiedDiff(fromLabel, toLabel string, a, b []byte) string {
	if string(a) == string(b) {
		return ""
	}
	x, y := lines(a), lines(b)
	ops := script(x, y)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", fromLabel, toLabel)
	for _, h := range hunks(ops) {
		out.WriteString(h)
	}
	return out.String()
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

// script is the shortest edit script from x to y by longest common
// subsequence.
func script(x, y []string) []op {
	n, m := len(x), len(y)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []op
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			ops = append(ops, op{' ', x[i]})
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
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
