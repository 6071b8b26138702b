package pool_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// The verdicts transport.DefaultClassifier gives for what a site answers.
var (
	pageVerdict     = pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}
	notFoundVerdict = pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx}
	plain403Verdict = pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx, Suspect: true}
	challenge       = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: "cloudflare"}
	judgedBlock     = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: pool.SuspectDetector, Suspect: true}
)

// newSuspectPool is a pool of n exits e0…e(n-1) on a fake clock, whose pairs trip on one failure
// and wait exactly 10 s, with the default origin guard (30 s window) unless opts change it.
func newSuspectPool(t *testing.T, n int, opts ...pool.Option) (*pool.Pool, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(syncT0)
	exits := make([]*pool.Exit, n)
	for i := range exits {
		exits[i] = pool.MustParseExit(fmt.Sprintf("10.0.1.%d:3128", i+1)).WithLabel(fmt.Sprintf("e%d", i))
	}
	all := []pool.Option{
		pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(5), pool.WithInlineSweep(),
		pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, BaseCooldown: 10 * time.Second, Jitter: -1}),
	}
	p, err := pool.New(append(all, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p, clk
}

// suspectStep is one attempt: through exit, at t0 + at, answered v; the verdict the pool counted
// and the pair's state afterwards.
type suspectStep struct {
	at     time.Duration
	exit   string
	origin string // "shop.example" when empty
	path   string // the request's path (Lease.SetPath), unknown when empty
	v      pool.Verdict
	want   pool.Verdict
	pair   breaker.State
}

func runSuspect(t *testing.T, p *pool.Pool, clk *clock.Fake, steps []suspectStep) {
	t.Helper()
	for i, s := range steps {
		if s.origin == "" {
			s.origin = "shop.example"
		}
		clk.Set(syncT0.Add(s.at))
		l, err := p.Pick(context.Background(), pool.Request{Origin: s.origin, Exit: s.exit})
		if err != nil {
			t.Fatalf("step %d: Pick(%s via %s) = %v", i, s.origin, s.exit, err)
		}
		if s.path != "" {
			l.SetPath(s.path)
		}
		got := l.Report(s.v)
		if got.Verdict != s.want || got.PairState != s.pair {
			t.Errorf("step %d: Report(%s%s via %s, %+v) = %+v, pair %v; want %+v, pair %v",
				i, s.origin, s.path, s.exit, s.v, got.Verdict, got.PairState, s.want, s.pair)
		}
	}
}

// TestSuspectEvidence: a plain 403 one exit gets while two others are served is the site's answer
// the first time (a page it forbids everyone, as likely as a ban) and a block of that pair the
// second time in a row; once half of the exits that tried the origin get 403s, they are the site's.
func TestSuspectEvidence(t *testing.T) {
	p, clk := newSuspectPool(t, 6)
	runSuspect(t, p, clk, []suspectStep{
		{at: 0, exit: "e0", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		// One other exit served: not yet a pattern.
		{at: 1 * time.Second, exit: "e1", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		{at: 2 * time.Second, exit: "e2", v: notFoundVerdict, want: notFoundVerdict, pair: breaker.Closed},
		// e0 and e2 served, e1's 403 and this one are 2 of 4 tried: half, the site's answer.
		{at: 3 * time.Second, exit: "e3", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		// e1 and e3 served again, past the guard's window after their 403s (within it, a 403
		// between two pages is a lone one: TestSuspectForbidsPaths), and e0 and e2 again.
		{at: 34 * time.Second, exit: "e1", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		{at: 35 * time.Second, exit: "e3", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		{at: 35 * time.Second, exit: "e0", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		{at: 35 * time.Second, exit: "e2", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		// e0…e3 served: e4's first 403 is 1 of 5 tried, but one 403 may be a forbidden page.
		{at: 36 * time.Second, exit: "e4", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		// Its second in a row, still 1 of 5: a block.
		{at: 37 * time.Second, exit: "e4", v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
		// e5's two 403s: with e4's, 2 of 6, still fewer than half.
		{at: 38 * time.Second, exit: "e5", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		{at: 39 * time.Second, exit: "e5", v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
		// The same exits on another origin that has served nobody: the site's answer there.
		{at: 40 * time.Second, exit: "e0", origin: "other.example", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		{at: 41 * time.Second, exit: "e0", origin: "other.example", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
	})
	// 403s are the origin answering, as they always were: the guard is not tripped by them.
	for _, o := range p.Snapshot().Origins {
		if o.Breaker.State != breaker.Closed {
			t.Errorf("origin guard of %s = %v after 403s, want closed", o.Origin, o.Breaker.State)
		}
	}
}

// TestSuspectBannedExitsInTheMajority: when the exits still in use are mostly banned ones, their
// 403s fill the guard's record and the half rule takes them for the site's; the third in a row
// through one exit, while others are served, is a block all the same (SuspectProof). A probe of a
// pair out for a ban, once the record of its 403s is out of the window, meets the ban going on.
func TestSuspectBannedExitsInTheMajority(t *testing.T) {
	p, clk := newSuspectPool(t, 5)
	steps := []suspectStep{
		{at: 0, exit: "e0", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		{at: 0, exit: "e1", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
	}
	for round := range 2 {
		for _, e := range []string{"e2", "e3", "e4"} {
			steps = append(steps, suspectStep{at: time.Duration(1+round) * time.Second, exit: e, v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed})
		}
	}
	steps = append(steps,
		suspectStep{at: 3 * time.Second, exit: "e2", v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
		// 40 s on, the others are served again; e2's 403s are out of the window. Its probe.
		suspectStep{at: 40 * time.Second, exit: "e0", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		suspectStep{at: 40 * time.Second, exit: "e1", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		suspectStep{at: 41 * time.Second, exit: "e2", v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
		// e3's 403s are out of the window too, and its pair never opened: a first 403 again.
		suspectStep{at: 41 * time.Second, exit: "e3", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
	)
	runSuspect(t, p, clk, steps)
}

// TestSuspectSiteWide403TripsNothing: a page every exit gets 403 for is the site's answer.
func TestSuspectSiteWide403TripsNothing(t *testing.T) {
	p, clk := newSuspectPool(t, 5)
	var steps []suspectStep
	for round := range 3 {
		for i := range 5 {
			steps = append(steps, suspectStep{
				at: time.Duration(round*5+i) * time.Second, exit: fmt.Sprintf("e%d", i),
				v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed,
			})
		}
	}
	runSuspect(t, p, clk, steps)
	if s := p.Snapshot(); len(s.Pairs) != 0 || s.Origins[0].Breaker.State != breaker.Closed {
		t.Errorf("after site-wide 403s: pairs %+v, guard %v; want no pair breaker, guard closed", s.Pairs, s.Origins[0].Breaker.State)
	}
}

// TestSuspectEvidenceWindow: what the other exits got counts within the origin guard's window
// only (30 s by default; a pattern's Guard.Window sets it per origin).
func TestSuspectEvidenceWindow(t *testing.T) {
	p, clk := newSuspectPool(t, 4, pool.WithOriginSettings("slow.example", pool.OriginSettings{Guard: pool.OriginGuardSettings{Window: 5 * time.Minute}}))
	runSuspect(t, p, clk, []suspectStep{
		{at: 0, exit: "e0", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		{at: 0, exit: "e1", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		{at: 0, exit: "e0", origin: "slow.example", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		{at: 0, exit: "e1", origin: "slow.example", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		{at: 30 * time.Second, exit: "e2", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		{at: 30 * time.Second, exit: "e2", origin: "slow.example", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		// The second in a row: a block where the others' answers are in the window.
		{at: 31 * time.Second, exit: "e2", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		{at: 31 * time.Second, exit: "e2", origin: "slow.example", v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
	})
}

// TestSuspectPolicies: per origin, SuspectOff takes every 403 for the site's answer and
// SuspectBan every one for a block; patterns layer ("*" then the more specific).
func TestSuspectPolicies(t *testing.T) {
	p, clk := newSuspectPool(t, 4,
		pool.WithOriginSettings("*", pool.OriginSettings{Suspect: pool.SuspectOff}),
		pool.WithOriginSettings("*.strict.example", pool.OriginSettings{Suspect: pool.SuspectBan}),
		pool.WithOriginSettings("api.strict.example", pool.OriginSettings{Pair: breaker.Settings{BaseCooldown: time.Minute}}),
		pool.WithOriginSettings("judged.example", pool.OriginSettings{Suspect: pool.SuspectEvidence}),
	)
	var steps []suspectStep
	for _, o := range []string{"news.example", "judged.example"} {
		steps = append(steps,
			suspectStep{exit: "e0", origin: o, v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
			suspectStep{exit: "e1", origin: o, v: pageVerdict, want: pageVerdict, pair: breaker.Closed})
	}
	steps = append(steps,
		suspectStep{exit: "e2", origin: "news.example", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		suspectStep{exit: "e2", origin: "news.example", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		suspectStep{exit: "e2", origin: "judged.example", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		suspectStep{exit: "e2", origin: "judged.example", v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
		// No evidence needed: the first 403 of the origin is a block.
		suspectStep{exit: "e3", origin: "www.strict.example", v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
		suspectStep{exit: "e3", origin: "api.strict.example", v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
		// Only a Success is judged: a challenge stays what it is, and a 404 is never suspect.
		suspectStep{exit: "e2", origin: "www.strict.example", v: challenge, want: challenge, pair: breaker.Open},
		suspectStep{exit: "e1", origin: "www.strict.example", v: notFoundVerdict, want: notFoundVerdict, pair: breaker.Closed},
	)
	runSuspect(t, p, clk, steps)
	ps, _ := pairStatus(p, "e3", "api.strict.example")
	if got := ps.Breaker.NextProbe.Sub(syncT0); got != time.Minute || ps.Breaker.LastFailure != string(pool.ClassBlocked) {
		t.Errorf("pair (e3, api.strict.example) = OPEN for %v, last failure %q; want the pattern's 1m, blocked", got, ps.Breaker.LastFailure)
	}
}

// TestSuspectEvidenceWithoutGuard: a disabled origin guard trips nothing but still keeps the
// record the evidence is read from.
func TestSuspectEvidenceWithoutGuard(t *testing.T) {
	p, clk := newSuspectPool(t, 3, pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}))
	runSuspect(t, p, clk, []suspectStep{
		{exit: "e0", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		{exit: "e1", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		{exit: "e2", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		{exit: "e2", v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
	})
}

// TestSuspectBlockMovesRetriesOn: a 403 judged a block is a failure of the logical request, so its
// retry avoids the exit, as for any failure.
func TestSuspectBlockMovesRetriesOn(t *testing.T) {
	p, _ := newSuspectPool(t, 3, pool.WithOriginSettings("*", pool.OriginSettings{Suspect: pool.SuspectBan}))
	r := pool.NewRetries()
	l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Exit: "e1", Retries: r})
	if err != nil {
		t.Fatal(err)
	}
	l.Report(plain403Verdict)
	if !r.Avoids(p.Exit("e1")) {
		t.Errorf("after a 403 judged a block, Retries does not avoid e1")
	}
	l, err = p.Pick(context.Background(), pool.Request{Origin: "shop.example", Exit: "e2", Retries: r})
	if err != nil {
		t.Fatal(err)
	}
	l.Report(notFoundVerdict)
	if r.Avoids(p.Exit("e2")) {
		t.Errorf("after a 404, Retries avoids e2")
	}
}

// TestCrawlThroughClassifierVerdicts: a crawl of one site, each answer given the verdict
// transport.DefaultClassifier gives it. The site bans e0 (plain 403s to it alone), serves the
// others, and answers 403 to everyone for /admin. e0's pair opens on its second 403, and its probe
// after the cooldown opens it again one level up; the /admin 403s of the others open nothing once
// they are the pattern; a challenge page through e3 opens e3's pair, as it always did.
func TestCrawlThroughClassifierVerdicts(t *testing.T) {
	p, clk := newSuspectPool(t, 4)
	runSuspect(t, p, clk, []suspectStep{
		{at: 0, exit: "e1", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		{at: 1 * time.Second, exit: "e2", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		// Banned: the first 403 may be a page the site forbids, the second in a row is a block.
		{at: 2 * time.Second, exit: "e0", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		{at: 3 * time.Second, exit: "e0", v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
		{at: 3 * time.Second, exit: "e3", v: notFoundVerdict, want: notFoundVerdict, pair: breaker.Closed},
		// /admin: e1's 403 is 2 of 4 suspect (e0's, its own): the site's answer.
		{at: 4 * time.Second, exit: "e1", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		{at: 5 * time.Second, exit: "e2", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		{at: 6 * time.Second, exit: "e3", v: challenge, want: challenge, pair: breaker.Open},
		{at: 8 * time.Second, exit: "e1", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		{at: 9 * time.Second, exit: "e2", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
		// e0's probe, 10 s after it opened: still 403 while e1 and e2 are served.
		{at: 13 * time.Second, exit: "e0", v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
	})
	ps, _ := pairStatus(p, "e0", "shop.example")
	if ps.Breaker.Trips != 2 || ps.Breaker.NextProbe.Sub(syncT0.Add(13*time.Second)) != 20*time.Second {
		t.Errorf("pair (e0, shop) = %d trips, next probe %v; want 2 trips, 20 s after its probe", ps.Breaker.Trips, ps.Breaker.NextProbe)
	}
	for _, e := range []string{"e1", "e2"} {
		if ps, ok := pairStatus(p, e, "shop.example"); ok && ps.Breaker.State != breaker.Closed {
			t.Errorf("pair (%s, shop) = %v, want closed: its 403s were the site's", e, ps.Breaker.State)
		}
	}
}

// TestOriginGuardSettingsPerOrigin: a pattern's Guard settings govern the guard of its origins —
// here, when it trips and how long it stays OPEN — and leave the others' alone.
func TestOriginGuardSettingsPerOrigin(t *testing.T) {
	p, clk := newSuspectPool(t, 4, pool.WithOriginSettings("fragile.example", pool.OriginSettings{
		Guard: pool.OriginGuardSettings{MinExits: 2, BaseCooldown: time.Minute},
	}))
	down := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx}
	for _, o := range []string{"fragile.example", "sturdy.example"} {
		for _, e := range []string{"e0", "e1"} {
			l, err := p.Pick(context.Background(), pool.Request{Origin: o, Exit: e})
			if err != nil {
				t.Fatalf("Pick(%s via %s) = %v", o, e, err)
			}
			l.Report(down)
		}
	}
	guards := map[string]breaker.Snapshot{}
	for _, o := range p.Snapshot().Origins {
		guards[o.Origin] = o.Breaker
	}
	g := guards["fragile.example"]
	if open := g.NextProbe.Sub(clk.Now()); g.State != breaker.Open || open < time.Minute || open >= time.Minute*5/4 {
		t.Errorf("guard of fragile.example after 2 failing exits = %v for %v, want open for 1 min (+ jitter)", g.State, open)
	}
	if g := guards["sturdy.example"]; g.State != breaker.Closed {
		t.Errorf("guard of sturdy.example after 2 failing exits = %v, want closed (3 exits by default)", g.State)
	}
}

// TestSuspectForbidsPaths: an origin that twice answered an exit a lone 403 — one between two
// pages it served that exit — forbids some paths to everyone: there two 403s in a row through
// one exit are still the site's, and a block takes SuspectProof in a row, for forbidsMemory
// (10 min) after the second lone 403. Then the rule of two is back. A single lone 403 (a ban
// that ended just after its first answer looks the same) leaves the rule of two in force.
func TestSuspectForbidsPaths(t *testing.T) {
	s, m := time.Second, time.Minute
	twice := slices.Concat(served(0, "e0", "e1", "e2"), lone403(3*s, "e3"), lone403(5*s, "e4"),
		inRow(7*s, "e5", 3, judgedBlock),                                // the third in a row is the block
		served(11*m, "e0", "e1"), inRow(11*m+2*s, "e2", 2, judgedBlock)) // no lone 403 for 11 min
	p, clk := newSuspectPool(t, 6)
	runSuspect(t, p, clk, twice)
	once := slices.Concat(served(0, "e0", "e1"), lone403(2*s, "e3"), inRow(4*s, "e5", 2, judgedBlock))
	p, clk = newSuspectPool(t, 6)
	runSuspect(t, p, clk, once)
}

// served is a page through each of exits, a second apart from at.
func served(at time.Duration, exits ...string) []suspectStep {
	var steps []suspectStep
	for i, e := range exits {
		steps = append(steps, suspectStep{at: at + time.Duration(i)*time.Second, exit: e, v: pageVerdict, want: pageVerdict, pair: breaker.Closed})
	}
	return steps
}

// lone403 is a lone 403 through exit at at: a plain 403, the site's, then a page a second on.
func lone403(at time.Duration, exit string) []suspectStep {
	return []suspectStep{
		{at: at, exit: exit, v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
		{at: at + time.Second, exit: exit, v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
	}
}

// inRow is n plain 403s through exit a second apart from at: the site's but the last, judged last.
func inRow(at time.Duration, exit string, n int, last pool.Verdict) []suspectStep {
	var steps []suspectStep
	for i := range n {
		st := suspectStep{at: at + time.Duration(i)*time.Second, exit: exit, v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed}
		if i == n-1 {
			st.want, st.pair = last, breaker.Open
		}
		steps = append(steps, st)
	}
	return steps
}
