package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/examples/internal/exampletest"
	"github.com/proxybreaker/proxybreaker/examples/internal/world"
)

// TestRun crawls the example's site, sync and async, and checks what the example claims: every
// page loaded exactly once, none lost, only healthy exits carried pages, the exits with a wrong
// password or nothing behind them ended parked if tried, and no password is printed.
func TestRun(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "async", true: "sync"}[sync], func(t *testing.T) {
			testRun(t, config{Pages: 40, Sync: sync})
		})
	}
}

// testRun runs the example with cfg and checks its summary and output.
func testRun(t *testing.T, cfg config) {
	var s summary
	text := exampletest.Output(t, world.Secrets(exitSpecs), func(ctx context.Context, out io.Writer) (err error) {
		s, err = run(ctx, cfg, out)
		return err
	})
	if len(s.Lost) > 0 {
		t.Errorf("run(%+v) lost %v", cfg, s.Lost)
	}
	if len(s.Loaded) != cfg.Pages {
		t.Errorf("run(%+v) loaded %d distinct pages, want %d", cfg, len(s.Loaded), cfg.Pages)
	}
	for path, n := range s.Loaded {
		if n != 1 {
			t.Errorf("run(%+v) loaded %s %d times, want once", cfg, path, n)
		}
	}
	for exit := range s.ByExit {
		if !strings.HasPrefix(exit, "dc-") {
			t.Errorf("run(%+v): a page came through %q, want only the healthy dc-* exits", cfg, exit)
		}
	}
	for key := range s.Failures {
		if exit := strings.Fields(key)[0]; (exit == "auth-bad" || exit == "dead") && !strings.Contains(strings.Join(s.Parked, " "), exit) {
			t.Errorf("run(%+v): %s failed (%s) but is not parked (parked: %v)", cfg, exit, key, s.Parked)
		}
	}
	if !strings.Contains(text, "pages loaded once each, 0 lost") {
		t.Errorf("run(%+v) output lacks the summary:\n%s", cfg, text)
	}
}

// TestHelp: -h says what the example shows and how it is run, not a bare "Usage of" and the
// temporary binary's path.
func TestHelp(t *testing.T) {
	exampletest.CheckHelp(t, command(new(config)))
}
