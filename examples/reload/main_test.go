package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/examples/internal/exampletest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestRun runs the example and checks what it says it shows: the edited list is synced while
// requests flow; the unchanged res-2 keeps its OPEN pair with the same window and dc-1 its
// *pool.Exit; auth, whose password was fixed, comes back fresh and serves; dc-3 serves; old-1 and
// the rate-limited res-2 get nothing; no request fails after the reload; no password is printed.
func TestRun(t *testing.T) {
	var res result
	text := exampletest.Output(t, []string{rightPass, wrongPass}, func(ctx context.Context, out io.Writer) (err error) {
		res, err = run(ctx, out, config{Requests: 120, Interval: 20 * time.Millisecond})
		return err
	})
	t.Logf("output:\n%s", text)
	if want := (pool.SyncResult{Added: 1, Removed: 1, Replaced: 1, Updated: 1, Kept: 2}); res.Reload != want {
		t.Errorf("reload = %+v, want %+v", res.Reload, want)
	}
	if len(res.ReloadErrors) > 0 {
		t.Errorf("reload errors: %v", res.ReloadErrors)
	}
	if res.PairBefore.State != breaker.Open || res.PairAfter.State != breaker.Open ||
		!res.PairAfter.NextProbe.Equal(res.PairBefore.NextProbe) || res.PairAfter.Trips != res.PairBefore.Trips {
		t.Errorf("res-2's pair: before %+v, after %+v; want open before and the same after", res.PairBefore, res.PairAfter)
	}
	if !res.SameExit {
		t.Error("dc-1 is not the same *pool.Exit after the reload")
	}
	if !res.AuthBefore.Parked || res.AuthAfter.State != breaker.Closed || res.AuthAfter.Parked || res.AuthAfter.Trips != 0 {
		t.Errorf("auth: before %+v, after %+v; want parked, then closed and fresh", res.AuthBefore, res.AuthAfter)
	}
	for key, n := range res.After {
		if strings.Contains(key, "old-1") || strings.Contains(key, "res-2") {
			t.Errorf("after the reload %d requests went %s", n, key)
		}
	}
	for _, via := range []string{"200 via auth", "200 via dc-3"} {
		if res.After[via] == 0 {
			t.Errorf("after the reload no request went %s: %v", via, res.After)
		}
	}
	if res.FailedAfter != 0 {
		t.Errorf("%d requests failed after the reload: %v", res.FailedAfter, res.After)
	}
	if res.DuringEdit == 0 {
		t.Error("no request was answered while the list was edited")
	}
	for _, want := range []string{"reloaded: added 1, removed 1, replaced 1, updated 1, kept 2", "same window: true", "dc-1: the same exit as before: true", "done"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// TestRunRejectsBadFlags: nonsense flags are an error, not a hang.
func TestRunRejectsBadFlags(t *testing.T) {
	if _, err := run(context.Background(), io.Discard, config{Requests: 0, Interval: time.Second}); err == nil {
		t.Error("run(requests 0) = nil error")
	}
}

// TestHelp: -h says what the example shows and how it is run, not a bare "Usage of" and the
// temporary binary's path.
func TestHelp(t *testing.T) {
	exampletest.CheckHelp(t, command(new(config)))
}
