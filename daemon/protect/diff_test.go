package protect

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name, a, b, want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"one line changed", "a\nb\nc\n", "a\nB\nc\n",
			"--- old\n+++ new\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{"deleted file", "a\nb\n", "",
			"--- old\n+++ new\n@@ -1,2 +0,0 @@\n-a\n-b\n"},
		{"created file", "", "x\n",
			"--- old\n+++ new\n@@ -0,0 +1 @@\n+x\n"},
		{"no newline at end", "a\nb", "a\nb\n",
			"--- old\n+++ new\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n"},
		{"distant changes make two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "X\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\nY\n",
			"--- old\n+++ new\n@@ -1,4 +1,4 @@\n-1\n+X\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+Y\n"},
		{"near changes share a hunk", "1\n2\n3\n4\n5\n", "X\n2\n3\n4\nY\n",
			"--- old\n+++ new\n@@ -1,5 +1,5 @@\n-1\n+X\n 2\n 3\n 4\n-5\n+Y\n"},
		{"a side over the byte bound", "a\n", strings.Repeat("x", maxDiffBytes+1),
			"--- old\n+++ new\ndiff omitted: from 2 bytes (1 lines) to 65537 bytes (1 lines); a diff is made for at most 65536 bytes a side and 1048576 line pairs\n"},
		{"over the line-pair bound", numbered(0, 200), numbered(1000, 7000),
			fmt.Sprintf("--- old\n+++ new\ndiff omitted: from %d bytes (200 lines) to %d bytes (6000 lines); a diff is made for at most 65536 bytes a side and 1048576 line pairs\n",
				len(numbered(0, 200)), len(numbered(1000, 7000)))},
		// The lines both sides start with do not count towards the bound.
		{"a long common start is diffed", numbered(0, 2000) + "a\n", numbered(0, 2000) + "b\n",
			"--- old\n+++ new\n@@ -1998,4 +1998,4 @@\n 1997\n 1998\n 1999\n-a\n+b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UnifiedDiff("old", "new", []byte(tt.a), []byte(tt.b)); got != tt.want {
				t.Errorf("got:\n%.2000s\nwant:\n%.2000s", got, tt.want)
			}
		})
	}
}

// The bounded diff is the diff of the plain longest common subsequence
// (the table over all lines, common start included) wherever it is made.
func TestUnifiedDiffMatchesThePlainLCS(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "b", "c", "d"}
	random := func() []byte {
		var s strings.Builder
		for range r.IntN(30) {
			s.WriteString(words[r.IntN(len(words))])
			s.WriteByte('\n')
		}
		if r.IntN(4) == 0 {
			s.WriteString("e") // no newline at the end
		}
		return []byte(s.String())
	}
	for i := range 2000 {
		a, b := random(), random()
		if r.IntN(2) == 0 {
			b = append(bytes.Clone(a[:r.IntN(len(a)+1)]), b...) // a common start
		}
		got := UnifiedDiff("old", "new", a, b)
		want := plainDiff(a, b)
		if got != want {
			t.Fatalf("case %d: %q against %q:\ngot:\n%s\nwant:\n%s", i, a, b, got, want)
		}
	}
}

// plainDiff is the unified diff by the full table of the longest common
// subsequence, as it was before the bounds.
func plainDiff(a, b []byte) string {
	if bytes.Equal(a, b) {
		return ""
	}
	x, y := lines(a), lines(b)
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
	for i, j := 0, 0; i < n || j < m; {
		switch {
		case i < n && j < m && x[i] == y[j]:
			ops = append(ops, op{' ', x[i]})
			i, j = i+1, j+1
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', x[i]})
			i++
		default:
			ops = append(ops, op{'+', y[j]})
			j++
		}
	}
	return "--- old\n+++ new\n" + strings.Join(hunks(ops), "")
}

// numbered is the lines "from" to "to-1", one number each.
func numbered(from, to int) string {
	var s strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&s, "%d\n", i)
	}
	return s.String()
}

// manifestLike is a manifest of a realistic size: about 100 lines, 4 KiB.
func manifestLike() []byte {
	var s strings.Builder
	s.WriteString("apiVersion: v1\nkind: Pod\nmetadata:\n  name: etcd\n  namespace: kube-system\nspec:\n  containers:\n  - command:\n    - etcd\n")
	for i := range 90 {
		fmt.Fprintf(&s, "    - --flag-number-%02d=some-value-of-a-realistic-length\n", i)
	}
	s.WriteString("    image: registry.k8s.io/etcd:3.7.3-0\n    name: etcd\n  hostNetwork: true\n")
	return []byte(s.String())
}

// foreignFile is size bytes of lines of lineLen bytes that the manifest
// does not have.
func foreignFile(size, lineLen int) []byte {
	line := strings.Repeat("f", lineLen-1) + "\n"
	return []byte(strings.Repeat(line, size/lineLen))
}

// The figures of a diff against a manifest: an operator's edit of it, the
// largest table a diff makes, and a foreign file of 4 MiB (32-byte lines),
// summarised.
func BenchmarkUnifiedDiff(b *testing.B) {
	manifest := manifestLike()
	edited := bytes.Replace(manifest, []byte("flag-number-42"), []byte("flag-number-XX"), 1)
	tests := []struct {
		name  string
		found []byte
	}{
		{"edited manifest", edited},
		{"near the line-pair bound", foreignFile(60000, 6)}, // 10,000 lines: 1,030,103 cells
		{"foreign 4MiB", foreignFile(4<<20, 32)},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tt.found)))
			for b.Loop() {
				if UnifiedDiff("etcd.yaml (written by etcdlet)", "etcd.yaml (found)", manifest, tt.found) == "" {
					b.Fatal("no diff")
				}
			}
		})
	}
}
