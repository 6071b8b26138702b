package cli

import (
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
)

const about = `Shows a test double of an example: nothing runs, nothing leaves the machine, and the words
are here only to say what it shows.`

// TestMainExitStatus: -h prints the description and exits 0, a bad flag exits 2 without running,
// a failed run exits 1 after "NAME: error", and a run that ends well exits 0 with the flags set.
func TestMainExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		runErr  error
		code    int
		ran     bool
		stderr  string // a part of what must be printed
		nothing bool   // and nothing else
	}{
		{args: []string{"-h"}, code: 0, stderr: "Usage: go run ./examples/double [flags]\n\nShows a test double"},
		{args: []string{"-nope"}, code: 2, stderr: "flag provided but not defined: -nope"},
		{args: []string{"-n", "3"}, runErr: errors.New("no luck"), code: 1, ran: true, stderr: "double: no luck\n", nothing: true},
		{args: []string{"-n", "3"}, code: 0, ran: true, nothing: true},
	} {
		var n *int
		c := New("double", about, func(fs *flag.FlagSet) { n = fs.Int("n", 1, "how many") })
		ran := false
		var stderr strings.Builder
		code := c.main(tc.args, &stderr, func(ctx context.Context) error {
			ran = ctx.Err() == nil && *n == 3
			return tc.runErr
		})
		if code != tc.code || ran != tc.ran || !strings.Contains(stderr.String(), tc.stderr) ||
			(tc.nothing && stderr.String() != tc.stderr) {
			t.Errorf("main(%q) = %d, ran %v, stderr %q; want %d, ran %v, stderr with %q", tc.args, code, ran, stderr.String(), tc.code, tc.ran, tc.stderr)
		}
	}
}

// TestHelpNamesTheExample: Help is what -h prints: the example as it is run, its description and
// its flags, never the flag package's bare "Usage of" with a temporary binary's path.
func TestHelpNamesTheExample(t *testing.T) {
	c := New("double", about, func(fs *flag.FlagSet) { fs.Duration("wait", 0, "how long to wait") })
	h := c.Help()
	for _, want := range []string{"Usage: go run ./examples/double [flags]\n", about, "Flags:\n", "  -wait duration\n"} {
		if !strings.Contains(h, want) {
			t.Errorf("Help() = %q, want it to contain %q", h, want)
		}
	}
	if strings.Contains(h, "Usage of") {
		t.Errorf("Help() = %q, want no bare \"Usage of\"", h)
	}
	if h := New("bare", about, nil).Help(); strings.Contains(h, "Flags:") {
		t.Errorf("Help() of a command without flags = %q, want no Flags: heading", h)
	}
}

// TestSeed: a seed asked for is kept; 0 picks one that is not 0 and has at most 16 digits.
func TestSeed(t *testing.T) {
	if got := Seed(7); got != 7 {
		t.Errorf("Seed(7) = %d, want 7", got)
	}
	for i := range 100 {
		if got := Seed(0); got == 0 || got >= 1e16 {
			t.Fatalf("step %d: Seed(0) = %d, want 1 … 10^16-1", i, got)
		}
	}
}
