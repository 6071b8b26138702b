package probe_test

import (
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/probe"
)

// TestReadTargetsLongLine: a line longer than MaxTargetLine (here 5 MiB, a password in it) is an
// error naming its line number and the limit, and none of its text (issue 14: it was "after line
// 0: bufio.Scanner: token too long"). A line just under the limit is read.
func TestReadTargetsLongLine(t *testing.T) {
	long := "https://user:hunter2@shop.example/?q=" + strings.Repeat("a", 5<<20)
	for _, tc := range []struct {
		name, in string
		want     []string
	}{
		{"first line", long + "\n", []string{"line 1: longer than 1048576 bytes (1 MiB)"}},
		{"after a comment and a target", "# targets\nhttps://shop.example/\n" + long + "\nhttps://api.example/\n", []string{"line 3: longer than 1048576 bytes"}},
		{"last line, no newline", "https://shop.example/\n" + long, []string{"line 2: longer than 1048576 bytes"}},
		{"after a bad line", "ftp://x/\n" + long, []string{`probe: target list: line 1: target "ftp://x/": want an http or https URL`, "line 2: longer than"}},
	} {
		targets, err := probe.ReadTargets(strings.NewReader(tc.in))
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: ReadTargets = %d targets, %.300v; want an error containing %q", tc.name, len(targets), err, want)
			}
		}
		if err == nil {
			continue
		}
		if n := strings.Count(err.Error(), "probe:"); n != 1 {
			t.Errorf("%s: ReadTargets = error %.300q: %d package prefixes, want 1", tc.name, err, n)
		}
		if msg := err.Error(); strings.Contains(msg, "hunter2") || strings.Contains(msg, "aaaa") || len(msg) > 300 {
			t.Errorf("%s: the error shows the line: %.300s", tc.name, msg)
		}
	}

	fits := "https://shop.example/?q=" + strings.Repeat("a", probe.MaxTargetLine-100)
	targets, err := probe.ReadTargets(strings.NewReader(fits + "\n"))
	if err != nil || len(targets) != 1 {
		t.Errorf("a line of %d bytes: %d targets, %v; want it read", len(fits), len(targets), err)
	}
}
