package pool

import (
	"context"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// TestUnannouncedLimitTeachesTheOrigin checks the pool's side of learning a window the origin does
// not announce (ratelimit/unannounced.go): in a pool without configured limits, a pair whose runs
// of 429s without Retry-After come a minute apart, four successes between them, is held to a
// window, and its origin keeps it as the prior for its other pairs.
func TestUnannouncedLimitTeachesTheOrigin(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	exits := []*Exit{MustParseExit("10.0.0.1:3128"), MustParseExit("10.0.0.2:3128")}
	p, err := New(WithExits(exits...), WithClock(clk), WithInlineSweep())
	if err != nil {
		t.Fatal(err)
	}
	const origin = "quiet-limit.example"
	ctx := context.Background()
	send := func(at time.Duration, v Verdict) {
		t.Helper()
		clk.Set(t0.Add(at))
		l, err := p.Pick(ctx, Request{Origin: origin, Exit: exits[0].Label(), FailFast: true})
		if err != nil {
			t.Fatalf("pick at %v: %v", at, err)
		}
		l.Report(v)
	}
	ok, limited := Verdict{Outcome: Success}, Verdict{Outcome: Transient, Class: ClassRateLimited}
	for run := range 2 {
		base := time.Duration(run) * time.Minute
		for i := range 4 {
			send(base+time.Duration(i)*time.Second, ok)
		}
		send(base+10*time.Second, limited) // the run's first 429, a minute after the last one's
	}
	o := p.origin(origin)
	w := o.pace.prior()
	// The runs say a window of a minute at most; the four successes came within 10 s, so the
	// pair (and the origin's prior) is held to a guess of the period: 15 s, up to a minute
	// (ratelimit/period.go).
	if want := (ratelimit.Window{N: 4, Length: 15 * time.Second, Upper: time.Minute}); w != want {
		t.Fatalf("origin's prior = %+v; want %+v, learned from the runs", w, want)
	}
	if id := p.set.Load().byLabel[exits[0].Label()].id; !o.learning.get(id) {
		t.Fatal("the pair that met the limit is not counting its window")
	}
}
