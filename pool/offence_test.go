package pool_test

import (
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// banFor bans the only pair of p for origin "shop" at the clock's now until d has passed, probing
// whenever the pool lets it and serving the probe that comes after the ban's end; it returns how
// long the pair's first OPEN window was and how many probes met the ban.
func banFor(t *testing.T, p *pool.Pool, clk *clock.Fake, d time.Duration) (first time.Duration, probes int) {
	t.Helper()
	end := clk.Now().Add(d)
	l := mustPick(t, p, "shop")
	l.Report(blockedVerdict)
	for {
		ps, _ := pairOf(t, p, "shop")
		wait := ps.Breaker.NextProbe.Sub(clk.Now())
		if first == 0 {
			first = wait
		}
		clk.Advance(wait)
		l := mustPick(t, p, "shop")
		if !clk.Now().Before(end) {
			if st := l.Report(okVerdict).PairState; st != breaker.Closed {
				t.Fatalf("the probe after the ban: pair %v, want closed", st)
			}
			return first, probes
		}
		l.Report(blockedVerdict)
		probes++
	}
}

// banAfter lets clean pass with the pair idle (the idle sweep runs), then bans it for d (banFor).
func banAfter(t *testing.T, p *pool.Pool, clk *clock.Fake, clean, d time.Duration) (first time.Duration, probes int) {
	t.Helper()
	clk.Advance(clean)
	p.Sweep(clk.Now())
	return banFor(t, p, clk, d)
}

// TestRepeatOffenderIsProbedOnALongerLadder: on an origin whose repeat offenders have been seen
// banned longer than its first ones, a pair banned again within OffenceDecay of its last ban's
// end waits 2ⁿ times as long for its first probe (n: the bans it remembers, at most MaxOffences)
// and takes fewer probes into a ban as long, while a first ban is probed on the normal ladder;
// each full OffenceDecay clean forgets one ban, and a long clean period all of them. Until the
// origin has shown it hardens, a repeat offender gets the normal ladder. The memory outlives the
// idle sweep of the pair's breaker, whose own backoff level has decayed meanwhile.
func TestRepeatOffenderIsProbedOnALongerLadder(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p := newRecoveryPool(t, clk, nil, pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, Jitter: -1}))
	// A gap of 40 min lets the breaker's level (7 after a long ban, one less per 5 min CLOSED)
	// fall back to 0, and the idle sweep (10 min) find the pair idle: only the offence memory is left.
	var probes []int
	for i, c := range []struct {
		clean time.Duration // since the last ban ended
		ban   time.Duration // how long the ban lasts
		want  time.Duration // the first OPEN window
	}{
		{0, 5 * time.Minute, 20 * time.Second},                                     // a first ban: the normal ladder
		{40 * time.Minute, 40 * time.Minute, 20 * time.Second},                     // repeats, 8× as long, while the origin
		{40 * time.Minute, 40 * time.Minute, 20 * time.Second},                     // is not yet seen to harden
		{40 * time.Minute, 40 * time.Minute, 20 * time.Second},                     //
		{40 * time.Minute, 40 * time.Minute, 20 * time.Second},                     //
		{40 * time.Minute, 40 * time.Minute, 20 * time.Second},                     //
		{40 * time.Minute, 40 * time.Minute, 20 * time.Second},                     //
		{40 * time.Minute, 40 * time.Minute, 20 * time.Second},                     //
		{40 * time.Minute, 40 * time.Minute, 20 * time.Second},                     // the eighth: now it is
		{40 * time.Minute, 40 * time.Minute, 160 * time.Second},                    // three bans remembered: 2³
		{pool.OffenceDecay + 40*time.Minute, 40 * time.Minute, 80 * time.Second},   // one forgotten
		{2*pool.OffenceDecay + 40*time.Minute, 40 * time.Minute, 40 * time.Second}, // two forgotten
	} {
		clk.Advance(c.clean)
		p.Sweep(clk.Now())
		start := clk.Now()
		first, n := banFor(t, p, clk, c.ban)
		if first != c.want {
			t.Errorf("ban %d, %v after the last: first probe after %v, want %v", i, c.clean, first, c.want)
		}
		if late := clk.Now().Sub(start) - c.ban; late > breaker.DefaultMaxCooldown {
			t.Errorf("ban %d: seen back %v after its end, want at most %v", i, late, breaker.DefaultMaxCooldown)
		}
		probes = append(probes, n)
	}
	t.Logf("probes into each ban: %v", probes)
	if probes[9] >= probes[8] || probes[10] >= probes[8] {
		t.Errorf("probes into 40-min bans: %v; want fewer for a stretched one (9, 10) than for one that is not (8)", probes)
	}
	clk.Advance(3*pool.OffenceDecay + time.Minute) // all forgotten
	p.Sweep(clk.Now())
	if first, _ := banFor(t, p, clk, 40*time.Minute); first != 20*time.Second {
		t.Errorf("after %v clean: first probe after %v, want 20s", 3*pool.OffenceDecay+time.Minute, first)
	}
}

// TestRepeatOffenderOfAnOriginThatDoesNotHarden: an origin whose repeat offenders are banned no
// longer than its first ones probes them on the normal ladder, however often they are banned.
func TestRepeatOffenderOfAnOriginThatDoesNotHarden(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p := newRecoveryPool(t, clk, nil, pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, Jitter: -1}))
	for i := range 10 {
		if first, _ := banAfter(t, p, clk, 40*time.Minute, 20*time.Minute); first != 20*time.Second {
			t.Errorf("ban %d, 40 min after the last, as long: first probe after %v, want 20s", i, first)
		}
	}
}

// TestBanNoProbeMetIsNotCounted: a trip whose first probe is served — a "ban" that lasted less
// than one rung, and perhaps none (two 403s in a row to a path the site forbids everyone are
// judged a block) — is neither remembered nor counted among the origin's bans. Counted, each of
// the pair's real bans would follow one such trip as a repeat offence, and 20 s "first bans"
// against real ones of 40 min would show an origin that hardens, whose real bans would then be
// probed 2ⁿ times later: here, the third after 160 s instead of 20.
func TestBanNoProbeMetIsNotCounted(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p := newRecoveryPool(t, clk, nil, pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, Jitter: -1}))
	for i := range 8 {
		if first, probes := banAfter(t, p, clk, 40*time.Minute, time.Second); first != 20*time.Second || probes != 0 {
			t.Fatalf("trip %d: first probe after %v, %d probes into the ban; want 20s, 0", i, first, probes)
		}
		if first, _ := banAfter(t, p, clk, 40*time.Minute, 40*time.Minute); first != 20*time.Second {
			t.Errorf("ban %d of 40 min, after a trip its first probe ended: first probe after %v, want 20s", i, first)
		}
	}
}
