package pool_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// newLatencyPool is a LeastLoaded pool of n exits labelled e0…e(n-1) on a fake clock.
func newLatencyPool(t *testing.T, n int) (*pool.Pool, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(leaseT0)
	var exits []*pool.Exit
	for i := range n {
		exits = append(exits, pool.MustParseExit(fmt.Sprintf("10.0.0.%d:3128", i+1)).WithLabel(fmt.Sprintf("e%d", i)))
	}
	p, err := pool.New(pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(3), pool.WithInlineSweep(),
		pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}))
	if err != nil {
		t.Fatal(err)
	}
	return p, clk
}

// answer sends one request for origin through the exit labelled exit (or any, if ""), answered
// a success after d on the fake clock.
func answer(t *testing.T, p *pool.Pool, clk *clock.Fake, origin, exit string, d time.Duration) {
	t.Helper()
	l, err := p.Pick(context.Background(), pool.Request{Origin: origin, Exit: exit})
	if err != nil {
		t.Fatalf("Pick(%s, %q) = %v", origin, exit, err)
	}
	clk.Advance(d)
	l.Report(okVerdict)
}

// shares picks n times for origin, releasing each lease at once, and counts the picks per exit.
func shares(t *testing.T, p *pool.Pool, origin string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		l := mustPick(t, p, origin)
		got[l.Exit().Label()]++
		l.Release()
	}
	return got
}

// TestPickCandidatesAreDistinct: of two exits, one holding six leases, every pick goes to the
// other. Two independent draws were the same exit one pick in four, and a lone candidate wins
// whatever its load.
func TestPickCandidatesAreDistinct(t *testing.T) {
	p, _ := newLatencyPool(t, 2)
	for range 6 {
		l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.test", Exit: "e0"})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
	}
	if got := shares(t, p, "shop.test", 400); got["e0"] != 0 {
		t.Errorf("picks with e0 holding 6 leases and e1 none: %v, want every one on e1", got)
	}
}

// TestSlowPairIsPickedLess: with one of four exits answering in 1.5 s and the others in 10 ms,
// the slow one is left out of picks; left alone, its estimate decays and it gets a trickle again.
func TestSlowPairIsPickedLess(t *testing.T) {
	p, clk := newLatencyPool(t, 4)
	for range 20 {
		for i := 1; i < 4; i++ {
			answer(t, p, clk, "shop.test", fmt.Sprintf("e%d", i), 10*time.Millisecond)
		}
	}
	answer(t, p, clk, "shop.test", "e0", 1500*time.Millisecond)
	if got := shares(t, p, "shop.test", 400); got["e0"] != 0 {
		t.Errorf("picks right after e0 answered in 1.5 s (others 10 ms): %v, want none on e0", got)
	}
	// Hold one lease on each fast exit: the slow one costs 1.5 s × 1, each fast one 10 ms × 2.
	var held []pool.Lease
	for i := 1; i < 4; i++ {
		l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.test", Exit: fmt.Sprintf("e%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	if got := shares(t, p, "shop.test", 400); got["e0"] != 0 {
		t.Errorf("picks with each fast exit holding a lease, e0 just slow: %v, want none on e0", got)
	}
	leaveAlone(t, p, clk, "shop.test", "e1", 20*time.Minute) // e0's estimate decays towards the typical (trickleDecay)
	if got := shares(t, p, "shop.test", 400); got["e0"] == 0 {
		t.Errorf("picks 20 min after e0's slow answer, fast exits loaded: %v, want some on e0 (a trickle)", got)
	}
	for _, l := range held {
		l.Release()
	}
	// A fast answer from e0 a minute after the last halves its estimate at least (latencyMemory):
	// from 150× the typical, ten bring it back to its full share.
	for range 10 {
		leaveAlone(t, p, clk, "shop.test", "e1", time.Minute)
		answer(t, p, clk, "shop.test", "e0", 10*time.Millisecond)
	}
	if got := shares(t, p, "shop.test", 400); got["e0"] < 60 {
		t.Errorf("picks after e0 answered in 10 ms 10 times a minute apart: %v, want e0 near a fair 100 of 400", got)
	}
}

// TestSlowForOneOriginOnly: an exit slow for one site is judged slow there only: another site,
// for which it is as fast as the others, keeps sending it its share.
func TestSlowForOneOriginOnly(t *testing.T) {
	p, clk := newLatencyPool(t, 4)
	for range 20 {
		for i := range 4 {
			d := 10 * time.Millisecond
			if i == 0 {
				d = 1500 * time.Millisecond
			}
			answer(t, p, clk, "a.test", fmt.Sprintf("e%d", i), d)
			answer(t, p, clk, "b.test", fmt.Sprintf("e%d", i), 10*time.Millisecond)
		}
	}
	if got := shares(t, p, "a.test", 400); got["e0"] != 0 {
		t.Errorf("a.test, for which e0 is slow: %v, want none on e0", got)
	}
	if got := shares(t, p, "b.test", 400); got["e0"] < 60 {
		t.Errorf("b.test, for which e0 is fast: %v, want e0 near a fair 100 of 400", got)
	}
}

// TestRecoveredPairRamps: a pair whose probe closed it after a ban takes its share back over
// rampWindow (slow start), not in one step: a quarter of it at first, most of it half-way, all of
// it once the window has passed.
func TestRecoveredPairRamps(t *testing.T) {
	p, clk := newLatencyPool(t, 4)
	blocked := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked}
	l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.test", Exit: "e0"})
	if err != nil {
		t.Fatal(err)
	}
	l.Report(blocked)
	if ps, _ := pairOf(t, p, "shop.test"); ps.Breaker.State.String() != "open" {
		t.Fatalf("e0 × shop.test after a block: %v, want open", ps.Breaker.State)
	}
	ps, _ := pairOf(t, p, "shop.test")
	clk.Advance(ps.Breaker.NextProbe.Sub(clk.Now())) // its probe is due
	answer(t, p, clk, "shop.test", "e0", 0)          // the probe: the ban is over
	if ps, _ := pairOf(t, p, "shop.test"); ps.Breaker.State.String() != "closed" {
		t.Fatalf("e0 × shop.test after its probe succeeded: %v, want closed", ps.Breaker.State)
	}
	closed := clk.Now()
	var got []int
	for _, at := range []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second} {
		clk.Advance(at - clk.Now().Sub(closed))
		got = append(got, shares(t, p, "shop.test", 2000)["e0"])
	}
	t.Logf("e0's picks of 2000 at 0, 10, 20 and 40 s after it closed: %v (a full share is 500)", got)
	if !(got[0] < got[1] && got[1] < got[2] && got[2] < got[3]) {
		t.Errorf("e0's share after it closed: %v, want it to grow step by step", got)
	}
	if got[0] > 150 || got[3] < 400 {
		t.Errorf("e0's share after it closed: %v of 2000, want at most 150 at first and at least 400 once ramped", got)
	}
}

// TestTimedOutPairTricklesSooner: a pair tracked after a timeout comes back for its trickle
// sooner (timeoutDecay) than one tracked after a slow answer as long: the timeout never reached
// the site, and a flaky exit's next attempt is likelier served than not. (Tried every 11 min
// after each timeout, a flaky exit's pair whose ban had ended went unserved to the end of the
// bench's round-2 runs, every trickle timing out.)
func TestTimedOutPairTricklesSooner(t *testing.T) {
	p, clk := newLatencyPool(t, 4)
	for range 20 {
		answer(t, p, clk, "shop.test", "e2", 100*time.Millisecond)
		answer(t, p, clk, "shop.test", "e3", 100*time.Millisecond)
	}
	answer(t, p, clk, "shop.test", "e1", 2*time.Second) // slow: 20× the typical
	l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.test", Exit: "e0"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	l.Report(timeoutVerdict) // as long, but a timeout
	if got := shares(t, p, "shop.test", 400); got["e0"]+got["e1"] != 0 {
		t.Errorf("picks right after e0 timed out and e1 answered in 2 s (others 100 ms): %v, want none on either", got)
	}
	leaveAlone(t, p, clk, "shop.test", "e2", 5*time.Minute)
	got := shares(t, p, "shop.test", 400)
	if got["e0"] == 0 {
		t.Errorf("picks 5 min after e0's timeout: %v, want some on e0 (its trickle)", got)
	}
	if got["e1"] != 0 {
		t.Errorf("picks 5 min after e1's 2 s answer: %v, want none on e1 (its trickle comes after 11 min)", got)
	}
}
