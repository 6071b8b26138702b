package pool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestPaceAheadOfABlock: a site allows 30 a minute per exit and blocks for ten minutes past that.
// Once exit a learned the period from its blocks (a guess: ratelimit/period.go), exit b, which has
// met no 429 there, is held to the same 30 a minute from its next success on, instead of paying a
// block of its own to learn it: its 31st pick within the minute is refused, with the time until
// its slot.
func TestPaceAheadOfABlock(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 3, 300_000_000, time.UTC) // off the clock's 10-s boundaries
	clk := clock.NewFake(t0)
	a, b := pool.MustParseExit("10.0.0.1:3128"), pool.MustParseExit("10.0.0.2:3128")
	p, err := pool.New(pool.WithExits(a, b), pool.WithClock(clk),
		pool.WithPairSettings(breaker.Settings{Rand: func() float64 { return 0.5 }})) // rests 1.125× theirs
	if err != nil {
		t.Fatal(err)
	}
	const site = "blocks.test"
	ctx := context.Background()
	send := func(e *pool.Exit, v pool.Verdict) error {
		t.Helper()
		l, err := p.Pick(ctx, pool.Request{Origin: site, Exit: e.Label()})
		if err != nil {
			return err
		}
		l.Report(v)
		return nil
	}
	ok := pool.Verdict{Outcome: pool.Success}
	block := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: 10 * time.Minute}
	if err := send(a, block); err != nil {
		t.Fatal(err)
	}
	clk.Advance(11*time.Minute + 16*time.Second) // past the pair's rest: 10 min × 1.125
	for range 30 {
		if err := send(a, ok); err != nil {
			t.Fatalf("a after its block: %v", err)
		}
		clk.Advance(time.Second)
	}
	if err := send(a, block); err != nil { // the 31st: blocked again; a learns 30 per minute, a guess
		t.Fatal(err)
	}
	if c := p.Capacity(site); !c.Guess || c.PerExit != 0.5 {
		t.Fatalf("Capacity after a's second block = %+v, want a guess of 30 a minute per exit", c)
	}
	served := 0
	var refused error
	for range 40 {
		if refused = send(b, ok); refused != nil {
			break
		}
		served++
	}
	var th *pool.ThrottledError
	if served != 31 || !errors.As(refused, &th) || th.RoomIn <= 0 {
		t.Errorf("b, which met no 429: served %d in a row, then %v; want 31 (its first success, then 30 by the origin's window), then a *ThrottledError with RoomIn", served, refused)
	}
}
