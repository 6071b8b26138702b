package pool_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"golang.org/x/time/rate"
)

var (
	blockedVerdict = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked}
	// flakyVerdict is a flaky exit's timeout: connection-level, the exit's trouble as much as the pair's.
	flakyVerdict = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
)

// newRecoveryPool is a pool of exits (nil: one, labelled x) on clk, seeded, sweeping inline, with
// its origin guard off, and opts on top.
func newRecoveryPool(t *testing.T, clk *clock.Fake, exits []*pool.Exit, opts ...pool.Option) *pool.Pool {
	t.Helper()
	if exits == nil {
		exits = []*pool.Exit{pool.MustParseExit("10.0.0.1:3128").WithLabel("x")}
	}
	all := []pool.Option{
		pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(3), pool.WithInlineSweep(),
		pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}),
	}
	p, err := pool.New(append(all, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBanProbesLearnTheOriginsBans: a pair banned by an origin is probed on the ladder but never
// less often than every DefaultRecoveryWindow while the origin's bans are unmeasured, or an eighth
// of the ban's age once that is longer (at most MaxBanProbeGap); once one ban has been seen to last
// L, the probes of the next one are at most L/10 apart (while it is young).
func TestBanProbesLearnTheOriginsBans(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p := newRecoveryPool(t, clk, nil, pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, Jitter: -1}))
	// ban keeps the pair banned until end, probing whenever the pool lets it, checks that no wait
	// between probes is longer than the larger of limit and an eighth of the ban's age, and
	// returns the longest wait while the ban was younger than young.
	ban := func(end time.Time, limit, young time.Duration) time.Duration {
		t.Helper()
		var longest time.Duration
		start := clk.Now()
		l := mustPick(t, p, "shop")
		l.Report(blockedVerdict)
		for {
			ps, _ := pairOf(t, p, "shop")
			wait := ps.Breaker.NextProbe.Sub(clk.Now())
			age := clk.Now().Sub(start)
			if bound := max(limit, min(age/8, pool.MaxBanProbeGap)) + time.Second; wait > bound {
				t.Errorf("at %v into the ban: next probe in %v, want at most %v", age, wait, bound)
			}
			if age < young {
				longest = max(longest, wait)
			}
			clk.Advance(wait)
			l := mustPick(t, p, "shop") // the probe
			if !clk.Now().Before(end) {
				l.Report(okVerdict)
				return longest
			}
			l.Report(blockedVerdict)
		}
	}
	start := clk.Now()
	if got := ban(start.Add(25*time.Minute), pool.DefaultRecoveryWindow, 16*time.Minute); got != pool.DefaultRecoveryWindow {
		t.Errorf("first ban: longest wait between probes %v, want DefaultRecoveryWindow %v", got, pool.DefaultRecoveryWindow)
	}
	first := clk.Now().Sub(start)
	clk.Advance(time.Minute) // within the idle TTL: an origin idle for longer is forgotten, stats and all
	// The origin's typical ban is kept to the second.
	if got, want := ban(clk.Now().Add(20*time.Minute), first/10, 20*time.Minute), first/10; got < want-time.Second/10 || got > want+time.Second/10 {
		t.Errorf("second ban, after one of %v: longest wait %v, want %v", first, got, want)
	}
}

// TestBanProbesAtMostMaxBanProbeGap: however long a ban has lasted, and however long the origin's
// earlier bans lasted, a banned pair is probed at least every MaxBanProbeGap — and a probe that
// met the exit's trouble, not the ban (a connection-level timeout), is followed within BanProbeRetry.
func TestBanProbesAtMostMaxBanProbeGap(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p := newRecoveryPool(t, clk, nil, pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, Jitter: -1}))
	nextProbe := func() time.Duration {
		t.Helper()
		ps, _ := pairOf(t, p, "shop")
		return ps.Breaker.NextProbe.Sub(clk.Now())
	}
	// probe waits for the pair's next probe, sends it and reports v.
	probe := func(v pool.Verdict) {
		t.Helper()
		clk.Advance(nextProbe())
		l := mustPick(t, p, "shop")
		l.Report(v)
	}
	// A ban of three hours: the probes are never more than MaxBanProbeGap apart, where an eighth of
	// its age would reach the breaker's 15 min.
	start := clk.Now()
	l := mustPick(t, p, "shop")
	l.Report(blockedVerdict)
	longest := time.Duration(0)
	for clk.Now().Sub(start) < 3*time.Hour {
		longest = max(longest, nextProbe())
		probe(blockedVerdict)
	}
	if longest != pool.MaxBanProbeGap {
		t.Errorf("a three-hour ban: longest wait between probes %v, want MaxBanProbeGap %v", longest, pool.MaxBanProbeGap)
	}
	// The probe meets the exit's own trouble: it says nothing of the ban, and the next comes
	// within BanProbeRetry; the one after that meets the ban again, and the cadence is the ban's.
	probe(flakyVerdict)
	if wait := nextProbe(); wait > pool.BanProbeRetry {
		t.Errorf("a banned pair's probe timed out at the connection: next probe in %v, want at most BanProbeRetry %v", wait, pool.BanProbeRetry)
	}
	probe(blockedVerdict)
	if wait := nextProbe(); wait != pool.MaxBanProbeGap {
		t.Errorf("the next probe met the ban: next probe in %v, want MaxBanProbeGap %v", wait, pool.MaxBanProbeGap)
	}
	probe(okVerdict) // the ban of over three hours ends: the origin's typical ban is that long
	// The origin's next ban is young, but its bans last hours: still at most MaxBanProbeGap.
	l = mustPick(t, p, "shop")
	l.Report(blockedVerdict)
	for range 12 {
		if wait := nextProbe(); wait > pool.MaxBanProbeGap {
			t.Fatalf("a young ban of an origin whose bans last hours: next probe in %v, want at most MaxBanProbeGap %v", wait, pool.MaxBanProbeGap)
		}
		probe(blockedVerdict)
	}
}

// TestRequestFailFast: a pick that finds only exits waiting for a token fails at once with a
// *ThrottledError when the request says FailFast (the pool's limits do not).
func TestRequestFailFast(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p, err := pool.New(
		pool.WithExits(pool.MustParseExit("10.0.0.1:3128").WithLabel("x")),
		pool.WithClock(clk), pool.WithSeed(3),
		pool.WithRateLimits(ratelimit.Limits{PerPair: ratelimit.Limit{Rate: rate.Every(time.Minute), Burst: 1}}),
	)
	if err != nil {
		t.Fatal(err)
	}
	l := mustPick(t, p, "shop")
	l.Report(okVerdict)
	_, err = p.Pick(context.Background(), pool.Request{Origin: "shop", FailFast: true})
	var te *pool.ThrottledError
	if !errors.As(err, &te) || te.RetryIn <= 0 || te.RetryIn > time.Minute {
		t.Fatalf("Pick(FailFast) without a token = %v, want a *ThrottledError within a minute", err)
	}
	if clk.Timers() != 0 {
		t.Errorf("Pick(FailFast) left %d timers on the clock, want none: it must not wait", clk.Timers())
	}
}

// TestPaceLearnedAndShared: by default a pair that meets two 429s in consecutive windows is held to
// what the origin allowed it per window, and another pair of the origin takes that window at its
// first 429; pairs that showed no limit are not paced.
func TestPaceLearnedAndShared(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p, err := pool.New(
		pool.WithExits(pool.MustParseExit("10.0.0.1:3128").WithLabel("a"), pool.MustParseExit("10.0.0.2:3128").WithLabel("b")),
		pool.WithClock(clk), pool.WithSeed(3), pool.WithPairSettings(breaker.Settings{Jitter: -1}),
		pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}),
	)
	if err != nil {
		t.Fatal(err)
	}
	limited := func(at time.Duration) pool.Verdict {
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: time.Minute - at%time.Minute}
	}
	report := func(exit string, v pool.Verdict) {
		t.Helper()
		l, err := p.Pick(context.Background(), pool.Request{Origin: "shop", Exit: exit, FailFast: true})
		if err != nil {
			t.Fatalf("Pick(%s) at %v = %v", exit, clk.Now().Sub(leaseT0), err)
		}
		l.Report(v)
	}
	// Exit a: 429 at 0:30 (resets at 1:00), then 5 successes in the next minute and a 429.
	clk.Set(leaseT0.Add(30 * time.Second))
	report("a", limited(30*time.Second))
	clk.Set(leaseT0.Add(time.Minute))
	for range 5 {
		report("a", okVerdict)
		clk.Advance(time.Second)
	}
	report("a", limited(65*time.Second))
	rate := func(exit string) float64 {
		for _, ps := range p.Snapshot().Pairs {
			if ps.Exit == exit && ps.Origin == "shop" {
				return ps.Rate
			}
		}
		return 0
	}
	if got := rate("a"); got < 5.0/60-1e-9 || got > 5.0/60+1e-9 {
		t.Errorf("pair a after learning: %v/s, want 5 a minute", got)
	}
	if got := rate("b"); got != 0 {
		t.Errorf("pair b before any 429: %v/s, want unpaced", got)
	}
	report("b", okVerdict)
	report("b", limited(66*time.Second))
	if got := rate("b"); got < 5.0/60-1e-9 || got > 5.0/60+1e-9 {
		t.Errorf("pair b after its first 429: %v/s, want the origin's 5 a minute", got)
	}
	// Held to 5 a minute: the sixth pick in the window through a is refused (it would wait).
	clk.Set(leaseT0.Add(2 * time.Minute))
	for range 5 {
		report("a", okVerdict)
	}
	_, err = p.Pick(context.Background(), pool.Request{Origin: "shop", Exit: "a", FailFast: true})
	var te *pool.ThrottledError
	if !errors.As(err, &te) || te.RetryIn != time.Minute {
		t.Errorf("sixth pick through a in the window = %v, want a *ThrottledError for the minute", err)
	}
}

// TestUnannouncedRateLimitIsNoBan: a 429 without Retry-After trips its pair at once (a default
// FailureThreshold of 3 notwithstanding) and rests it at most UnannouncedRest between tries, however
// long the origin keeps refusing; and its rest, two minutes here, teaches nothing of the origin's bans:
// a ban afterwards is still probed every DefaultRecoveryWindow at most, not every UnannouncedRest.
func TestUnannouncedRateLimitIsNoBan(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p := newRecoveryPool(t, clk, nil, pool.WithPairSettings(breaker.Settings{Jitter: -1}))
	limited := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited}
	// rest fails the pair with v, then its probes with v until end, and returns the longest wait.
	rest := func(v pool.Verdict, end time.Time) time.Duration {
		var longest time.Duration
		first := mustPick(t, p, "shop")
		if st := first.Report(v).PairState; st != breaker.Open {
			t.Fatalf("after one %s: pair %v, want open at once", v.Class, st)
		}
		for {
			ps, _ := pairOf(t, p, "shop")
			wait := ps.Breaker.NextProbe.Sub(clk.Now())
			longest = max(longest, wait)
			clk.Advance(wait)
			l := mustPick(t, p, "shop")
			if !clk.Now().Before(end) {
				l.Report(okVerdict)
				return longest
			}
			l.Report(v)
		}
	}
	if got := rest(limited, clk.Now().Add(2*time.Minute)); got != pool.UnannouncedRest {
		t.Errorf("429 without Retry-After: longest wait between tries %v, want UnannouncedRest %v", got, pool.UnannouncedRest)
	}
	if got := rest(blockedVerdict, clk.Now().Add(12*time.Minute)); got != pool.DefaultRecoveryWindow {
		t.Errorf("a ban after rate-limit rests: longest wait between probes %v, want DefaultRecoveryWindow %v", got, pool.DefaultRecoveryWindow)
	}
}

// TestBanProbePassesAnExitsRest: a banned pair's probe goes out through its exit while the exit's
// own breaker rests on timeouts (a flaky exit), and the exit hears nothing of it; other requests
// still wait for the exit. A parked exit (its proxy refused the connection) passes nothing. A pair
// resting on timeouts whose probe meets a block is then probed as a banned pair: on the ban's
// cadence whatever its probes meet.
func TestBanProbePassesAnExitsRest(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p := newRecoveryPool(t, clk, nil,
		pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, Jitter: -1}),
		pool.WithExitSettings(breaker.Settings{FailureThreshold: 1, BaseCooldown: 10 * time.Minute, Jitter: -1}))
	l := mustPick(t, p, "shop")
	l.Report(blockedVerdict) // the ban: the pair opens, the exit does not
	l = mustPick(t, p, "news")
	l.Report(flakyVerdict) // the exit's own trouble: it rests 10 min
	if s := exitStatus(t, p, "x").Breaker.State; s != breaker.Open {
		t.Fatalf("exit after a connection-level timeout = %v, want open", s)
	}
	ps, _ := pairOf(t, p, "shop")
	clk.Set(ps.Breaker.NextProbe)
	l = mustPick(t, p, "shop") // the pair's probe, through the resting exit
	if rep := l.Report(okVerdict); rep.PairState != breaker.Closed || rep.ExitState != breaker.Open {
		t.Errorf("ban probe through a resting exit: pair %v, exit %v; want closed, open (the exit heard nothing)", rep.PairState, rep.ExitState)
	}
	if _, err := p.Pick(context.Background(), pool.Request{Origin: "news"}); err == nil {
		t.Errorf("a request for another origin went through the resting exit")
	}

	// A pair resting on timeouts meets a block at its probe: from then on it is banned.
	clk.Advance(11 * time.Minute) // the exit's rest is over
	for range 6 {                 // the pair climbs its ladder on timeouts: 20 s, 40 s, … 10m40s
		l := mustPick(t, p, "shop")
		l.Report(timeoutVerdict)
		ps, _ := pairOf(t, p, "shop")
		clk.Set(ps.Breaker.NextProbe)
	}
	l = mustPick(t, p, "shop")
	l.Report(blockedVerdict)
	ps, _ = pairOf(t, p, "shop")
	if wait := ps.Breaker.NextProbe.Sub(clk.Now()); wait > pool.DefaultRecoveryWindow {
		t.Errorf("a probe of a pair resting on timeouts met a block: next probe in %v, want at most DefaultRecoveryWindow %v", wait, pool.DefaultRecoveryWindow)
	}
	clk.Set(ps.Breaker.NextProbe)
	l = mustPick(t, p, "shop")
	l.Report(timeoutVerdict) // the banned pair's probe times out
	ps, _ = pairOf(t, p, "shop")
	if wait := ps.Breaker.NextProbe.Sub(clk.Now()); wait > pool.DefaultRecoveryWindow {
		t.Errorf("a banned pair's probe timed out: next probe in %v, want the ban's cadence, at most %v", wait, pool.DefaultRecoveryWindow)
	}

	// A parked exit passes nothing.
	q := newRecoveryPool(t, clk, []*pool.Exit{pool.MustParseExit("10.0.0.2:3128").WithLabel("y")}, pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, Jitter: -1}))
	l = mustPick(t, q, "shop")
	l.Report(blockedVerdict)
	l = mustPick(t, q, "news")
	l.Report(pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyRefused})
	ps, _ = pairOf(t, q, "shop")
	clk.Set(ps.Breaker.NextProbe)
	if _, err := q.Pick(context.Background(), pool.Request{Origin: "shop"}); err == nil {
		t.Errorf("a ban probe went through a parked exit")
	}
}

// TestExitRestsAtMostExitRest: an exit tripped again and again by connection-level failures rests
// at most ExitRest each time, however high its level climbs; a park (a 407) keeps its ParkFor.
func TestExitRestsAtMostExitRest(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p := newRecoveryPool(t, clk, []*pool.Exit{pool.MustParseExit("10.0.0.1:3128").WithLabel("x"), pool.MustParseExit("10.0.0.2:3128").WithLabel("y")})
	pick := func(exit, origin string) pool.Lease {
		t.Helper()
		l, err := p.Pick(context.Background(), pool.Request{Origin: origin, Exit: exit})
		if err != nil {
			t.Fatalf("Pick(%s via %s): %v", origin, exit, err)
		}
		return l
	}
	for i := range 5 { // five failures on five origins: the exit trips, no pair does
		l := pick("x", fmt.Sprintf("o%d.example", i))
		l.Report(flakyVerdict)
	}
	for trip := range 6 {
		if trip > 0 { // its probe fails: it trips one level up
			l := pick("x", "probe.example")
			l.Report(flakyVerdict)
		}
		s := exitStatus(t, p, "x").Breaker
		if s.State != breaker.Open {
			t.Fatalf("trip %d: exit %v, want open", trip, s.State)
		}
		if wait := s.NextProbe.Sub(clk.Now()); wait > pool.ExitRest*5/4 {
			t.Errorf("trip %d (level %d): exit rests %v, want at most ExitRest %v and jitter", trip, s.Level, wait, pool.ExitRest)
		}
		clk.Set(s.NextProbe)
	}
	l := pick("y", "shop.example")
	l.Report(pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth})
	if s := exitStatus(t, p, "y").Breaker; !s.Parked || s.NextProbe.Sub(clk.Now()) < 10*time.Minute {
		t.Errorf("exit after a 407: parked %v, next probe in %v; want parked for its ParkFor (15 min)", s.Parked, s.NextProbe.Sub(clk.Now()))
	}
}

// TestExitRestLeavesAnExitLadderOfYourOwn: WithExitSettings with a MaxCooldown of its own keeps the
// exit breaker's ladder as set: a fourth trip rests 160 s, past ExitRest.
func TestExitRestLeavesAnExitLadderOfYourOwn(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p := newRecoveryPool(t, clk, nil, pool.WithExitSettings(breaker.Settings{FailureThreshold: 1, MaxCooldown: time.Hour, Jitter: -1}))
	var wait time.Duration
	for i := range 4 {
		l, err := p.Pick(context.Background(), pool.Request{Origin: fmt.Sprintf("o%d.example", i)})
		if err != nil {
			t.Fatal(err)
		}
		l.Report(flakyVerdict)
		s := exitStatus(t, p, "x").Breaker
		wait = s.NextProbe.Sub(clk.Now())
		clk.Set(s.NextProbe)
	}
	if wait != 160*time.Second {
		t.Errorf("fourth trip with MaxCooldown 1h: rest %v, want 160s (the ladder, not ExitRest)", wait)
	}
}
