package pool_test

import (
	"context"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

var leaseT0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

var (
	okVerdict      = pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}
	timeoutVerdict = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout}
	exitDown       = pool.Verdict{Outcome: pool.Transient, Scope: pool.ScopeExit, Class: pool.ClassConnection}
)

// newLeasePool is a one-exit pool on a fake clock whose pair and exit breakers trip on one failure
// and wait exactly 10 s.
func newLeasePool(t *testing.T) (*pool.Pool, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(leaseT0)
	s := breaker.Settings{FailureThreshold: 1, BaseCooldown: 10 * time.Second, Jitter: -1}
	p, err := pool.New(
		pool.WithExits(pool.MustParseExit("10.0.0.1:3128").WithLabel("x")),
		pool.WithClock(clk), pool.WithSeed(7),
		pool.WithPairSettings(s), pool.WithExitSettings(s),
		pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}),
	)
	if err != nil {
		t.Fatal(err)
	}
	return p, clk
}

func mustPick(t *testing.T, p *pool.Pool, origin string) pool.Lease {
	t.Helper()
	l, err := p.Pick(context.Background(), pool.Request{Origin: origin})
	if err != nil {
		t.Fatalf("Pick(%s) = %v", origin, err)
	}
	return l
}

func pairOf(t *testing.T, p *pool.Pool, origin string) (pool.PairStatus, bool) {
	t.Helper()
	for _, ps := range p.Snapshot().Pairs {
		if ps.Origin == origin {
			return ps, true
		}
	}
	return pool.PairStatus{}, false
}

// TestStaleFailureCannotRetripReclosedPair: a lease admitted while the pair was CLOSED — without
// its breaker being looked at, since it had none — whose failure arrives after the pair tripped and
// closed again is dropped as stale. The same holds for a pair that had a breaker and was CLOSED
// after an earlier recovery, and a lease admitted after the re-close still counts.
func TestStaleFailureCannotRetripReclosedPair(t *testing.T) {
	p, clk := newLeasePool(t)
	for round := range 2 { // round 0: the pair has no breaker yet; round 1: a re-closed one
		slow := mustPick(t, p, "shop")
		fast := mustPick(t, p, "shop")
		if st := fast.Report(timeoutVerdict).PairState; st != breaker.Open {
			t.Fatalf("round %d: Report(timeout) = pair %v, want open", round, st)
		}
		ps, _ := pairOf(t, p, "shop")
		clk.Set(ps.Breaker.NextProbe) // the cooldown climbs a level each round
		probe := mustPick(t, p, "shop")
		if !probe.Info().Probe {
			t.Fatalf("round %d: the pick after the cooldown is not a probe: %+v", round, probe.Info())
		}
		if st := probe.Report(okVerdict).PairState; st != breaker.Closed {
			t.Fatalf("round %d: probe success = pair %v, want closed", round, st)
		}
		if st := slow.Report(timeoutVerdict).PairState; st != breaker.Closed {
			t.Errorf("round %d: a stale failure re-tripped the re-closed pair: %v", round, st)
		}
		if ps, _ := pairOf(t, p, "shop"); ps.Breaker.FailuresInWindow != 0 || ps.Breaker.Trips != uint32(round+1) {
			t.Errorf("round %d: pair after the stale failure = %d failures, %d trips; want 0, %d",
				round, ps.Breaker.FailuresInWindow, ps.Breaker.Trips, round+1)
		}
		clk.Advance(time.Second)
	}
	fresh := mustPick(t, p, "shop")
	if st := fresh.Report(timeoutVerdict).PairState; st != breaker.Open {
		t.Errorf("a failure admitted after the re-close = pair %v, want open: the stale check must not drop live verdicts", st)
	}
}

// TestStaleFailureCannotRetripReclosedExit: the same for the exit's own breaker, whose CLOSED
// permits are also taken without its lock.
func TestStaleFailureCannotRetripReclosedExit(t *testing.T) {
	p, clk := newLeasePool(t)
	slow := mustPick(t, p, "shop")
	fast := mustPick(t, p, "news")
	if st := fast.Report(exitDown).ExitState; st != breaker.Open {
		t.Fatalf("Report(exit-scoped failure) = exit %v, want open", st)
	}
	clk.Advance(10 * time.Second)
	probe := mustPick(t, p, "news")
	if st := probe.Report(okVerdict).ExitState; st != breaker.Closed {
		t.Fatalf("probe success = exit %v, want closed", st)
	}
	if st := slow.Report(exitDown).ExitState; st != breaker.Closed {
		t.Errorf("a stale exit failure re-tripped the re-closed exit: %v", st)
	}
	live := mustPick(t, p, "shop")
	if st := live.Report(exitDown).ExitState; st != breaker.Open {
		t.Errorf("a failure admitted after the re-close = exit %v, want open", st)
	}
}

// TestLeaseReportsOnce: only the first Report or Release of a lease counts.
func TestLeaseReportsOnce(t *testing.T) {
	p, _ := newLeasePool(t)
	l := mustPick(t, p, "shop")
	l.Report(okVerdict)
	if st := l.Report(timeoutVerdict); st != (pool.Reported{}) {
		t.Errorf("second Report = %+v, want the zero Reported", st)
	}
	l.Release()
	if ps, ok := pairOf(t, p, "shop"); ok && ps.Breaker.FailuresInWindow != 0 {
		t.Errorf("a second Report counted: %d failures", ps.Breaker.FailuresInWindow)
	}
	if n := p.Snapshot().Exits[0].InFlight; n != 0 {
		t.Errorf("InFlight = %d after a report and a release, want 0", n)
	}
	var zero pool.Lease
	zero.Report(timeoutVerdict)
	zero.Release()
	if zero.Exit() != nil {
		t.Errorf("zero Lease Exit() = %v, want nil", zero.Exit())
	}
}

// TestJudgeAtStandsForTheReport: JudgeAt tells a caller before the report how the pool counts a
// plain 403 (a block of a pair whose exit is refused while others are served), and the report
// counts the verdict JudgeAt gave, not a second judgement on evidence that moved meanwhile: e2's
// first 403, judged the site's answer, stays a success though another lease's 403 through e2 was
// reported before it (which would make it a second in a row).
func TestJudgeAtStandsForTheReport(t *testing.T) {
	p, _ := newSuspectPool(t, 4)
	for _, e := range []string{"e0", "e1"} {
		l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Exit: e})
		if err != nil {
			t.Fatalf("Pick(via %s) = %v", e, err)
		}
		l.Report(pageVerdict)
	}
	pick := func(step int) pool.Lease {
		t.Helper()
		l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Exit: "e2"})
		if err != nil {
			t.Fatalf("step %d: Pick(via e2) = %v", step, err)
		}
		return l
	}
	first, second := pick(0), pick(1)
	if got := first.JudgeAt(syncT0, plain403Verdict); got != plain403Verdict {
		t.Errorf("step 0: JudgeAt(first 403 via e2) = %+v, want %+v (the site's answer)", got, plain403Verdict)
	}
	if got := second.Report(plain403Verdict); got.Verdict != plain403Verdict {
		t.Errorf("step 1: Report(another first 403 via e2) = %+v, want %+v", got.Verdict, plain403Verdict)
	}
	if got := first.Report(plain403Verdict); got.Verdict != plain403Verdict || got.PairState != breaker.Closed {
		t.Errorf("step 2: Report(the judged 403) = %+v, pair %v; want %+v, pair closed: JudgeAt's judgement stands",
			got.Verdict, got.PairState, plain403Verdict)
	}
	third := pick(3)
	got := third.JudgeAt(syncT0, plain403Verdict)
	if got != judgedBlock {
		t.Fatalf("step 3: JudgeAt(403 via e2 after two) = %+v, want %+v", got, judgedBlock)
	}
	if r := third.Report(got); r.Verdict != judgedBlock || r.PairState != breaker.Open {
		t.Errorf("step 3: Report(judged block) = %+v, pair %v; want %+v, pair open", r.Verdict, r.PairState, judgedBlock)
	}
	if got := third.JudgeAt(syncT0, plain403Verdict); got != plain403Verdict {
		t.Errorf("JudgeAt after the report = %+v, want the verdict as given", got)
	}
	var zero pool.Lease
	if got := zero.JudgeAt(syncT0, plain403Verdict); got != plain403Verdict {
		t.Errorf("zero Lease JudgeAt = %+v, want the verdict as given", got)
	}
}

// TestRetriesAvoidFailedExits: a failure reported on a lease picked with Retries makes the next
// pick of that logical request go elsewhere while another exit is ready.
func TestRetriesAvoidFailedExits(t *testing.T) {
	p, err := pool.New(pool.WithExits(
		pool.MustParseExit("10.0.0.1:1").WithLabel("a"),
		pool.MustParseExit("10.0.0.2:1").WithLabel("b"),
	), pool.WithSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	r := pool.NewRetries()
	ctx := context.Background()
	first, err := p.Pick(ctx, pool.Request{Origin: "shop", Retries: r})
	if err != nil {
		t.Fatal(err)
	}
	first.Report(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassConnection, Soft: true})
	if !r.Avoids(first.Exit()) {
		t.Fatalf("Retries does not avoid %s after it failed the request", first.Exit())
	}
	for i := range 20 { // picks are random: every one must avoid the failed exit
		next, err := p.Pick(ctx, pool.Request{Origin: "shop", Retries: r})
		if err != nil {
			t.Fatal(err)
		}
		if next.Exit() == first.Exit() {
			t.Fatalf("retry %d went through %s again, which failed it", i, first.Exit())
		}
		next.Release()
	}
}

// TestSweepKeepsPairsBehindAnOpenExit: a pair that is OPEN while its exit is out of CLOSED cannot
// be probed, so the sweep does not take its long cooldown for idleness and forget it.
func TestSweepKeepsPairsBehindAnOpenExit(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p, err := pool.New(
		pool.WithExits(pool.MustParseExit("10.0.0.1:3128").WithLabel("x")),
		pool.WithClock(clk), pool.WithSeed(7), pool.WithIdleTTL(time.Minute),
		pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, BaseCooldown: 10 * time.Second, Jitter: -1}),
		pool.WithExitSettings(breaker.Settings{FailureThreshold: 1, BaseCooldown: time.Hour, Jitter: -1}),
		pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}),
	)
	if err != nil {
		t.Fatal(err)
	}
	pairFail, exitFail := mustPick(t, p, "shop"), mustPick(t, p, "news")
	pairFail.Report(timeoutVerdict)
	exitFail.Report(exitDown)
	clk.Advance(30 * time.Minute) // the pair's cooldown is long over; the exit's is not
	p.Sweep(clk.Now())
	if ps, ok := pairOf(t, p, "shop"); !ok || ps.Breaker.Trips != 1 {
		t.Errorf("after the sweep: pair kept = %v (%+v), want kept with its trip", ok, ps.Breaker)
	}
}

// bindRecorder is a Binder that notes what it saw of the pool when bound and when unbound.
type bindRecorder struct {
	pool.NopObserver
	exitsAtBind int
	unbound     bool
}

func (b *bindRecorder) Bind(p *pool.Pool) (func(), error) {
	b.exitsAtBind = len(p.Exits())
	return func() { b.unbound = true }, nil
}

// TestWithObserverBindsAfterExits: an observer given to pool.New that is a Binder is bound once
// the pool has its exits (a store restoring saved state needs them), and Observe's remove func
// unbinds it.
func TestWithObserverBindsAfterExits(t *testing.T) {
	rec := &bindRecorder{}
	p, err := pool.New(pool.WithObserver(rec), pool.WithExits(
		pool.MustParseExit("10.0.0.1:1"), pool.MustParseExit("10.0.0.2:1")))
	if err != nil {
		t.Fatal(err)
	}
	if rec.exitsAtBind != 2 {
		t.Errorf("Bind saw %d exits, want 2", rec.exitsAtBind)
	}
	late := &bindRecorder{}
	remove, err := p.Observe(late)
	if err != nil || late.exitsAtBind != 2 {
		t.Fatalf("Observe = %v, saw %d exits; want nil, 2", err, late.exitsAtBind)
	}
	remove()
	remove()
	if !late.unbound {
		t.Errorf("remove() did not unbind")
	}
}
