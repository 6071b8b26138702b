package main

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/examples/internal/exampletest"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
)

// TestRun runs the example as `go run ./examples/fleet` does — starting its own redis-server —
// and checks what it says it shows: the parked exit and the trip reach the other member, the fleet
// sends one probe, no request fails (during the probe or the outage), and it ends by itself.
func TestRun(t *testing.T) {
	if _, err := findRedisServer(); err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%v; CI must install redis-server", err)
		}
		t.Skip(err)
	}
	text := exampletest.Output(t, secrets(), func(ctx context.Context, out io.Writer) error { return run(ctx, config{}, out) })
	t.Logf("output:\n%s", text)
	for _, want := range []string{
		"b parked it too",
		"b opened it with the same window",
		"none through res-2 or bad-auth",
		"the shop saw 1 probe(s) through res-2",
		"no request failed",
		"degraded, serving on local state",
		"in step with the fleet again",
		" 0 failed",
		"done",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestRunWithRedisFlag: with -redis the example uses that server and skips the outage step.
func TestRunWithRedisFlag(t *testing.T) {
	addr := servertest.Redis(t) // first: its process waiter ends at cleanup, after the leak check
	text := exampletest.Output(t, secrets(), func(ctx context.Context, out io.Writer) error { return run(ctx, config{Redis: addr}, out) })
	if !strings.Contains(text, "using the Redis at "+addr) || strings.Contains(text, "killed") || !strings.Contains(text, "done") {
		t.Errorf("output:\n%s\nwant the given Redis used, no outage step, and done", text)
	}
}

// TestHelp: -h says what the example shows and how it is run, not a bare "Usage of" and the
// temporary binary's path.
func TestHelp(t *testing.T) {
	exampletest.CheckHelp(t, command(new(config)))
}
