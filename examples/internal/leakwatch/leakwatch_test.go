package leakwatch

import (
	"strings"
	"testing"
)

// TestCounts: lines are counted where they end, however the writes split them, and a line
// holding a secret counts once however many it holds; what is written passes through unchanged.
func TestCounts(t *testing.T) {
	var b strings.Builder
	w := New(&b, []string{"s3cret", "", "hunter2"})
	writes := []string{"one\ntw", "o s3c", "ret\nthree hunter2 s3cret\n", "four\nunfinished s3cret"}
	for _, s := range writes {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
		}
	}
	if lines, leaks := w.Counts(); lines != 4 || leaks != 2 {
		t.Errorf("Counts() = %d lines, %d leaks; want 4, 2", lines, leaks)
	}
	if got, want := b.String(), strings.Join(writes, ""); got != want {
		t.Errorf("passed through %q, want %q", got, want)
	}
}
