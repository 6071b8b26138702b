package pool_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestRestoreIsBounded: saved state is clamped whichever way it reaches the pool — a whole
// SavedState (a file), or one SavedBreaker (a fleet message) — so an entry from a clock far ahead
// or an edited row takes an exit out for at most the longest window the policy could produce.
func TestRestoreIsBounded(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	exitSettings := breaker.Settings{Jitter: -1}
	p, err := pool.New(pool.WithExits(
		pool.MustParseExit("10.0.0.1:1").WithLabel("a"),
		pool.MustParseExit("10.0.0.2:1").WithLabel("b"),
	), pool.WithClock(clk), pool.WithExitSettings(exitSettings))
	if err != nil {
		t.Fatal(err)
	}
	pol, err := breaker.NewPolicy(exitSettings)
	if err != nil {
		t.Fatal(err)
	}
	longest := pol.LongestOpen()
	// As a file holds it: JSON, with a window in the year 3000 and an absurd level.
	raw := `{"version":1,"breakers":[{"scope":"exit","exit":"a","state":"open","level":1099511627776,
		"next_probe":"3000-01-01T00:00:00Z","changed":"3000-01-01T00:00:00Z"}]}`
	var st pool.SavedState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	if applied, _, err := p.Restore(clk.Now(), st); err != nil || applied != 1 {
		t.Fatalf("Restore = %d applied, %v; want 1, nil", applied, err)
	}
	// As a fleet message: 87671 hours ahead.
	p.Apply(clk.Now(), pool.SavedBreaker{Scope: pool.ScopeExit, Exit: "b",
		Saved: breaker.Saved{State: breaker.Open, NextProbe: clk.Now().Add(87671 * time.Hour)}})
	for _, e := range p.Snapshot().Exits {
		if got, limit := e.Breaker.NextProbe, clk.Now().Add(longest); got.After(limit) || e.Breaker.Level > pol.MaxLevel() {
			t.Errorf("exit %s restored: next probe %v, level %d; want at most %v, %d", e.Exit, got, e.Breaker.Level, limit, pol.MaxLevel())
		}
	}
	clk.Advance(longest)
	if _, err := p.Pick(t.Context(), pool.Request{Origin: "shop"}); err != nil {
		t.Errorf("Pick after the longest window = %v, want a probe", err)
	}
}
