package protect

import "testing"

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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := UnifiedDiff("old", "new", []byte(tt.a), []byte(tt.b)); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
