package pool_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// slowPool is newLatencyPool with exits e0…e(slow-1) answering origin in 1.5 s and the others in
// 10 ms, 20 times each (the fast ones first).
func slowPool(t *testing.T, n, slow int, origin string) (*pool.Pool, *clock.Fake) {
	t.Helper()
	p, clk := newLatencyPool(t, n)
	for round := range 40 {
		for i := range n {
			switch {
			case i >= slow:
				answer(t, p, clk, origin, fmt.Sprintf("e%d", i), 10*time.Millisecond)
			case round >= 20: // once the origin's typical latency is the fast exits'
				answer(t, p, clk, origin, fmt.Sprintf("e%d", i), 1500*time.Millisecond)
			}
		}
	}
	return p, clk
}

// leaveAlone advances the clock by d, a minute at a time, with an answer of exit through origin
// in 10 ms each minute: the origin stays in use (the idle sweep would forget it), and the other
// exits are left alone.
func leaveAlone(t *testing.T, p *pool.Pool, clk *clock.Fake, origin, exit string, d time.Duration) {
	t.Helper()
	for ; d > 0; d -= time.Minute {
		clk.Advance(time.Minute - 10*time.Millisecond)
		answer(t, p, clk, origin, exit, 10*time.Millisecond)
	}
}

// TestTwoSlowCandidatesArePassedOver: with six of eight exits slow, a pick's two candidates are
// often both slow; the better of them is still slow, and the pick draws again rather than take
// it while a fast exit is ready. (Taking the better of two slow ones sent a third of the slow
// pairs' attempts in the bench's round-3 world.)
func TestTwoSlowCandidatesArePassedOver(t *testing.T) {
	p, _ := slowPool(t, 8, 6, "shop.test")
	got := shares(t, p, "shop.test", 400)
	if slow := 400 - got["e6"] - got["e7"]; slow != 0 {
		t.Errorf("picks with e0…e5 slow and e6, e7 fast and idle: %v, want none on a slow exit (%d)", got, slow)
	}
}

// TestSlowPairTrickleIsOneAttempt: a slow pair whose estimate has decayed gets one attempt, its
// trickle; while that is in flight the pair is passed over again, so that the requests of the
// moment do not all follow it before its answer says whether it got faster.
func TestSlowPairTrickleIsOneAttempt(t *testing.T) {
	p, clk := slowPool(t, 4, 1, "shop.test")
	leaveAlone(t, p, clk, "shop.test", "e1", 20*time.Minute) // e0's estimate decays to the typical
	var held []pool.Lease
	defer func() {
		for _, l := range held {
			l.Release()
		}
	}()
	onE0 := 0
	for range 60 {
		l := mustPick(t, p, "shop.test")
		held = append(held, l)
		if l.Exit().Label() == "e0" {
			onE0++
		}
	}
	if onE0 != 1 {
		t.Errorf("leases on e0 of 60 held, e0's slow estimate decayed: %d, want 1 (its trickle)", onE0)
	}
}

// park reports a block on the pair (exit, origin): its breaker is parked.
func park(t *testing.T, p *pool.Pool, origin, exit string) {
	t.Helper()
	l, err := p.Pick(context.Background(), pool.Request{Origin: origin, Exit: exit})
	if err != nil {
		t.Fatal(err)
	}
	l.Report(pool.Verdict{Outcome: pool.Permanent, Class: pool.ClassBlocked})
}

// pickSlow makes a fail-fast pick for origin, where only the slow exit e0 is ready, and checks
// that it takes e0 (want) or is refused with the time to the soonest probe.
func pickSlow(t *testing.T, p *pool.Pool, origin, step string, want bool) {
	t.Helper()
	l, err := p.Pick(context.Background(), pool.Request{Origin: origin, FailFast: true})
	var nh *pool.NoHealthyExitError
	switch {
	case want && err != nil:
		t.Errorf("%s: Pick(%s) = %v, want e0 (slow, the only one ready)", step, origin, err)
	case want:
		if got := l.Exit().Label(); got != "e0" {
			t.Errorf("%s: Pick(%s) = %s, want e0", step, origin, got)
		}
		l.Release()
	case err == nil:
		t.Errorf("%s: Pick(%s) = %s, want a refusal", step, origin, l.Exit().Label())
		l.Release()
	case !errors.As(err, &nh) || nh.RetryIn <= 0:
		t.Errorf("%s: Pick(%s) = %v, want a NoHealthyExitError with the time to the soonest probe", step, origin, err)
	}
}

// TestFailFastRefusesSlowWhenOtherOriginsServed: when only a slow pair is ready, a pick that
// fails fast takes it while the pool serves that origin alone (a refused worker would have
// nothing else to do), and is refused once another origin is being served (the worker serves
// that one instead); a minute after the other origin's last success it takes the slow pair again.
func TestFailFastRefusesSlowWhenOtherOriginsServed(t *testing.T) {
	p, clk := slowPool(t, 2, 1, "shop.test")
	park(t, p, "shop.test", "e1")
	pickSlow(t, p, "shop.test", "one origin served", true)
	for i := range 3 {
		clk.Advance(time.Second)
		answer(t, p, clk, "other.test", fmt.Sprintf("e%d", i%2), 200*time.Millisecond)
		answer(t, p, clk, "shop.test", "e0", 1500*time.Millisecond) // served in turn with other.test
	}
	pickSlow(t, p, "shop.test", "two origins served in turn", false)
	clk.Advance(time.Minute)
	pickSlow(t, p, "shop.test", "a minute after", true)
}

// TestFailFastTakesSlowWhenWorkersWait: a pool most of whose picks are refused (a finite crawl
// whose unbound sites are done or nearly) takes a slow pair that alone is ready for a fail-fast
// pick, though another origin is still served unbound: its refused workers mostly wait anyway, and
// the slow pair's share of the binding site is what is left to gain.
func TestFailFastTakesSlowWhenWorkersWait(t *testing.T) {
	p, clk := slowPool(t, 2, 1, "shop.test")
	park(t, p, "shop.test", "e1")
	for i := range 3 {
		clk.Advance(time.Second)
		answer(t, p, clk, "other.test", fmt.Sprintf("e%d", i%2), 200*time.Millisecond)
		answer(t, p, clk, "shop.test", "e0", 1500*time.Millisecond)
	}
	pickSlow(t, p, "shop.test", "two origins served in turn", false)
	workersWait(t, p, clk)
	pickSlow(t, p, "shop.test", "300 picks refused against about 70 pages served", true)
}

// TestIdleWorkersPassOverFlaky: a slow pair that timed out since it was tracked (a flaky exit,
// whose timeouts fail the exit for every origin) is not taken because the workers mostly wait;
// the goodput rule alone judges it, and another origin is served unbound.
func TestIdleWorkersPassOverFlaky(t *testing.T) {
	p, clk := slowPool(t, 2, 1, "shop.test")
	park(t, p, "shop.test", "e1")
	l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.test", Exit: "e0"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(1500 * time.Millisecond)
	l.Report(timeoutVerdict)
	for i := range 3 {
		clk.Advance(time.Second)
		answer(t, p, clk, "other.test", fmt.Sprintf("e%d", i%2), 200*time.Millisecond)
		answer(t, p, clk, "shop.test", "e0", 1500*time.Millisecond)
	}
	workersWait(t, p, clk)
	pickSlow(t, p, "shop.test", "workers waiting, e0 timed out once", false)
}

// workersWait makes the pool's workers mostly wait: 300 fail-fast picks refused for closed.test
// (every exit parked for it), then one page of other.test, still served unbound.
func workersWait(t *testing.T, p *pool.Pool, clk *clock.Fake) {
	t.Helper()
	park(t, p, "closed.test", "e0")
	park(t, p, "closed.test", "e1")
	refused := 0
	for range 300 {
		l, err := p.Pick(context.Background(), pool.Request{Origin: "closed.test", FailFast: true})
		if err != nil {
			refused++
			continue
		}
		l.Release()
	}
	if refused != 300 {
		t.Fatalf("picks refused for closed.test, every exit parked: %d of 300, want all", refused)
	}
	answer(t, p, clk, "other.test", "e1", 200*time.Millisecond)
}

// TestFailFastTakesSlowWhenEveryOriginBinds: an origin served while its picks find no fast exit
// ready (bound: every site caps each exit, as in the bench's round-1 world) is no other work for a
// refused worker — whatever it does next, each origin's fast capacity is used — so a fail-fast
// pick for another origin where only a slow pair is ready takes it, once the bound origin's
// successes from before it bound are more than half a minute old.
func TestFailFastTakesSlowWhenEveryOriginBinds(t *testing.T) {
	p, clk := slowPool(t, 3, 1, "shop.test")
	park(t, p, "shop.test", "e1")
	park(t, p, "shop.test", "e2")
	// other.test: e0 and e1 fast, then e2 slow for it, then e0 and e1 parked for it.
	for range 20 {
		answer(t, p, clk, "other.test", "e0", 10*time.Millisecond)
		answer(t, p, clk, "other.test", "e1", 10*time.Millisecond)
	}
	answer(t, p, clk, "other.test", "e2", 1500*time.Millisecond)
	pickSlow(t, p, "shop.test", "other.test served with fast exits ready", false)
	park(t, p, "other.test", "e0")
	park(t, p, "other.test", "e1")
	for range 40 { // other.test is served by e2 alone, and its picks find no fast exit ready
		clk.Advance(time.Second)
		if l, err := p.Pick(context.Background(), pool.Request{Origin: "other.test", FailFast: true}); err == nil {
			l.Release()
		}
		answer(t, p, clk, "other.test", "e2", 1500*time.Millisecond)
	}
	pickSlow(t, p, "shop.test", "every origin served binds", true)
}

// TestOnlySlowReadyTakesTheCheapest: when every exit is tracked as slow (three by a single answer
// of 400 ms where the typical is 10 ms, one at 1.5 s), a pool serving one origin takes the slow
// exit that holds a worker the least, not one at random: drawn at random, the 1.5 s exit held
// most of the workers of the transport's TestIntegSlowExitCarriesLess.
func TestOnlySlowReadyTakesTheCheapest(t *testing.T) {
	p, clk := slowPool(t, 4, 1, "shop.test")
	for i := 1; i < 4; i++ {
		answer(t, p, clk, "shop.test", fmt.Sprintf("e%d", i), 400*time.Millisecond)
	}
	if got := shares(t, p, "shop.test", 400); got["e0"] != 0 {
		t.Errorf("picks with every exit slow, e0 at 1.5 s and the others at 400 ms: %v, want none on e0", got)
	}
}
