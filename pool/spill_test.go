package pool

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
)

// TestSpillByHealthFraction checks spill.go on a fake clock with two tiers of ten exits for one
// origin: each tier takes min(1, 1.4 × its healthy fraction) of the picks that reach it, the rest
// spill to the next tier; a tier back from empty ramps over spillRamp.
func TestSpillByHealthFraction(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	var exits []*Exit
	for tier := range 2 {
		for i := range 10 {
			exits = append(exits, MustParseExit(fmt.Sprintf("10.0.%d.%d:3128", tier, i+1)).WithTier(tier))
		}
	}
	p, err := New(WithExits(exits...), WithClock(clk), WithSeed(5), WithInlineSweep())
	if err != nil {
		t.Fatal(err)
	}
	const origin = "spill.example"
	ctx := context.Background()
	// share returns the part of n picks, spread over a second, that went to tier 1.
	share := func(n int) float64 {
		t.Helper()
		clk.Advance(spillRefresh) // a fresh count
		upper := 0
		for range n {
			l, err := p.Pick(ctx, Request{Origin: origin})
			if err != nil {
				t.Fatalf("pick at %v: %v", clk.Now().Sub(t0), err)
			}
			if l.Exit().Tier() == 1 {
				upper++
			}
			l.Report(Verdict{Outcome: Success})
		}
		return float64(upper) / float64(n)
	}
	ban := func(from, to int, d time.Duration) {
		t.Helper()
		for _, e := range exits[from:to] {
			if err := p.Ban(e.Label(), origin, d, "test"); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(step string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 0.04 {
			t.Errorf("%s: tier 1 took %.3f of the picks, want %.2f", step, got, want)
		}
	}
	check("every exit healthy", share(4000), 0)
	ban(0, 2, time.Hour) // tier 0 at 80 %: 1.4 × 0.8 > 1, it keeps everything
	check("tier 0 at 80 %", share(4000), 0)
	ban(2, 5, time.Hour) // tier 0 at 50 %: it keeps 70 %
	check("tier 0 at 50 %", share(4000), 0.3)
	ban(5, 8, time.Hour) // tier 0 at 20 %: it keeps 28 %
	check("tier 0 at 20 %", share(4000), 0.72)
	ban(8, 10, time.Hour) // tier 0 empty
	check("tier 0 empty", share(1000), 1)

	// Tier 0 back at once (an operator releases every pair): it ramps over spillRamp.
	for _, e := range exits[:10] {
		if err := p.Release(e.Label(), origin); err != nil {
			t.Fatal(err)
		}
	}
	check("tier 0 back, first second", share(4000), 1-spillFactor*spillRampFloor)
	clk.Advance(spillRamp/2 - 2*spillRefresh) // half way through the ramp at the next count
	// The count is taken a refresh later (share's own advance): 14 s of the 30 s ramp.
	check("tier 0 back, half way", share(4000), 1-spillFactor*float64(spillRamp/2-spillRefresh)/float64(spillRamp))
	clk.Advance(spillRamp / 2)
	check("tier 0 back, ramp over", share(4000), 0)
}

// TestSpillOrder checks the order of the tiers a pick tries from each start.
func TestSpillOrder(t *testing.T) {
	for start, want := range [][]int{{0, 1, 2, 3}, {1, 0, 2, 3}, {2, 0, 1, 3}, {3, 0, 1, 2}} {
		for k, w := range want {
			if got := spillOrder(k, start); got != w {
				t.Errorf("spillOrder(%d, %d) = %d, want %d", k, start, got, w)
			}
		}
	}
}

// TestSpillPickAllocatesNothing: with tiers, a pick between two counts allocates nothing.
func TestSpillPickAllocatesNothing(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	var exits []*Exit
	for i := range 20 {
		exits = append(exits, MustParseExit(fmt.Sprintf("10.0.1.%d:3128", i+1)).WithTier(i%2))
	}
	p, err := New(WithExits(exits...), WithClock(clk), WithSeed(5), WithInlineSweep())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range exits[:8] {
		if e.Tier() == 0 {
			if err := p.Ban(e.Label(), "a.example", time.Hour, "test"); err != nil {
				t.Fatal(err)
			}
		}
	}
	ctx, now := context.Background(), clk.Now()
	pick := func() {
		l, err := p.PickAt(ctx, now, Request{Origin: "a.example"})
		if err != nil {
			t.Fatal(err)
		}
		l.ReleaseAt(now)
	}
	pick() // the first count
	if got := testing.AllocsPerRun(1000, pick); got != 0 {
		t.Errorf("a pick in a pool with tiers allocates %v times, want 0", got)
	}
}
