package pool

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
)

// TestDueCacheNeverHoldsBackAProbe checks the origin's due cache (due.go) against its promise:
// picks that draw a cooling pair skip it without a lookup while the cache holds, and yet a pair
// becomes probeable exactly when its own breaker says — whether its cooldown is the one the cache
// was computed from, or a shorter one that began after.
func TestDueCacheNeverHoldsBackAProbe(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	exits := make([]*Exit, 20)
	for i := range exits {
		exits[i] = MustParseExit(fmt.Sprintf("10.0.0.%d:3128", i+1))
	}
	p, err := New(WithExits(exits...), WithClock(clk), WithInlineSweep())
	if err != nil {
		t.Fatal(err)
	}
	const origin = "due.example"
	ctx := context.Background()
	trip := func(label string, v Verdict) {
		t.Helper()
		l, err := p.Pick(ctx, Request{Origin: origin, Exit: label})
		if err != nil {
			t.Fatalf("pick %s: %v", label, err)
		}
		l.Report(v)
	}
	// Every pair but the last is parked (15 min and more); the first, once unparked, cools 1 min.
	for _, e := range exits[:19] {
		trip(e.Label(), Verdict{Outcome: Permanent, Class: ClassProxyDenied})
	}
	o := p.origin(origin)
	// Picks at a later instant draw parked pairs: the first refreshes the cache, the next trust it.
	clk.Advance(2 * time.Second)
	for range 50 {
		l, err := p.Pick(ctx, Request{Origin: origin})
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Exit().Label(); got != exits[19].Label() {
			t.Fatalf("picked %s, the only pair CLOSED is %s", got, exits[19].Label())
		}
		l.Report(Verdict{Outcome: Success})
	}
	until, ok := o.due.notBefore(clk.Now())
	if !ok || until.Sub(t0) < 15*time.Minute {
		t.Fatalf("due bound = %v, %v; want it known, at least 15 min after the parks", until.Sub(t0), ok)
	}

	// A shorter cooldown that begins later: a 429 with Retry-After 30 s on the last pair. The
	// bound must come down to its end at once, so that the probe comes when the pair says.
	trip(exits[19].Label(), Verdict{Outcome: Transient, Class: ClassRateLimited, RetryAfter: 30 * time.Second})
	pr := o.lookupPair(p.set.Load().byLabel[exits[19].Label()].id)
	_, own := pr.b.Ready(clk.Now())
	if until, ok = o.due.notBefore(clk.Now()); !ok || !until.Equal(own) {
		t.Fatalf("due bound after the 429 = %v, %v; want the 429's end %v", until, ok, own)
	}
	clk.Advance(10 * time.Second)
	if _, err := p.Pick(ctx, Request{Origin: origin}); err == nil {
		t.Fatal("a pick was admitted while every pair cools down")
	}
	clk.Set(own)
	probe := func() Lease {
		t.Helper()
		l, err := p.Pick(ctx, Request{Origin: origin})
		if err != nil {
			t.Fatalf("pick at %v: %v", clk.Now().Sub(t0), err)
		}
		if got := l.Info(); got.Exit.Label() != exits[19].Label() || !got.Probe || got.PairState != breaker.HalfOpen {
			t.Fatalf("pick = %+v; want a probe of %s", got, exits[19].Label())
		}
		return l
	}
	// The probe holds the pair's only slot: the bound says so (the lease's end) ...
	l := probe()
	if until, ok = o.due.notBefore(clk.Now()); !ok || !until.After(clk.Now()) {
		t.Fatalf("due bound with the probe out = %v, %v; want a later instant", until, ok)
	}
	// ... and once it comes back unused the slot is free, with no transition: the next pick
	// probes again at once.
	l.Release()
	l = probe()
	l.Report(Verdict{Outcome: Success})
	if got := pr.b.State(clk.Now()); got != breaker.Closed {
		t.Fatalf("pair after a good probe is %v, want closed", got)
	}
}

// TestDueHeapStaysSmall checks that a pair that moves often cannot grow its origin's heap without
// bound: stale entries are compacted away, and the bound follows the pair's latest key.
func TestDueHeapStaysSmall(t *testing.T) {
	o := &originState{}
	o.due.min.Store(math.MaxInt64)
	prs := make([]*pair, 10)
	for i := range prs {
		prs[i] = &pair{origin: o}
	}
	for k := int64(1); k <= 10_000; k++ {
		pr := prs[k%int64(len(prs))]
		o.due.set(pr, 1_000_000-k) // ever earlier keys: none of them reaches the top to be dropped
	}
	if n := len(o.due.entries); n > 2*max(len(prs), 32) {
		t.Fatalf("heap holds %d entries for %d pairs", n, len(prs))
	}
	if got := o.due.min.Load(); got != 1_000_000-10_000 {
		t.Fatalf("bound = %d, want the latest key %d", got, 1_000_000-10_000)
	}
	for _, pr := range prs {
		o.due.set(pr, 0) // all CLOSED
	}
	o.due.mu.Lock()
	o.due.dropStaleLocked()
	o.due.mu.Unlock()
	if got := o.due.min.Load(); got != math.MaxInt64 {
		t.Fatalf("bound with every pair CLOSED = %d, want none", got)
	}
}

// dueProbeWaits trips banned pairs of one origin among exits exits, then sends picks at
// picksPerSecond on a fake clock, each answered at once with a success, and returns for each
// banned pair the simulated time from the instant its breaker would admit a probe (HALF_OPEN due)
// to the pick that sent it; a pair never probed within limit counts limit.
func dueProbeWaits(t testing.TB, exits, banned, picksPerSecond int, limit time.Duration) []time.Duration {
	t.Helper()
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	es := make([]*Exit, exits)
	for i := range es {
		es[i] = MustParseExit(fmt.Sprintf("10.%d.%d.%d:3128", i>>16&255, i>>8&255, i&255))
	}
	p, err := New(WithExits(es...), WithClock(clk), WithSeed(7), WithInlineSweep())
	if err != nil {
		t.Fatal(err)
	}
	const origin = "due.example"
	ctx := context.Background()
	o := p.origin(origin)
	due := map[string]time.Time{}
	// The banned pairs cool down for 30 s, their cooldowns a few seconds apart.
	for k := range banned {
		label := es[k*exits/banned].Label()
		l, err := p.Pick(ctx, Request{Origin: origin, Exit: label})
		if err != nil {
			t.Fatal(err)
		}
		l.Report(Verdict{Outcome: Transient, Class: ClassRateLimited, RetryAfter: 30 * time.Second})
		_, at := o.lookupPair(p.set.Load().byLabel[label].id).b.Ready(clk.Now())
		due[label] = at
		clk.Advance(time.Second)
	}
	waits := make([]time.Duration, 0, banned)
	step := time.Second / time.Duration(picksPerSecond)
	end := clk.Now().Add(30*time.Second + limit)
	for clk.Now().Before(end) && len(due) > 0 {
		clk.Advance(step)
		l, err := p.Pick(ctx, Request{Origin: origin})
		if err != nil {
			t.Fatal(err)
		}
		if info := l.Info(); info.Probe {
			if at, ok := due[info.Exit.Label()]; ok {
				waits = append(waits, clk.Now().Sub(at))
				delete(due, info.Exit.Label())
			}
		}
		l.Report(Verdict{Outcome: Success})
	}
	for range due {
		waits = append(waits, limit)
	}
	slices.Sort(waits)
	return waits
}

// TestDueProbeWaitFlatInExits measures, on a fake clock, how long a banned pair waits past the end
// of its cooldown for its probe when nothing but live traffic (100 picks a second) can send it,
// at 10, 1,000 and 10,000 exits: the wait must not grow with the pool. Before the due probe came
// first (due.go) it did: medians 0.09 s, 4.1 s and 26 s, two of five pairs at 10,000 exits still
// unprobed after 2 min; now every probe goes out on the first pick after it falls due.
func TestDueProbeWaitFlatInExits(t *testing.T) {
	const limit = 120 * time.Second
	for _, exits := range []int{10, 1000, 10000} {
		waits := dueProbeWaits(t, exits, 5, 100, limit)
		t.Logf("exits=%d: probe waits after due: median %v, max %v (%v)", exits, waits[len(waits)/2], waits[len(waits)-1], waits)
		// The first pick after a probe falls due sends it: at most one pick interval (10 ms).
		if got := waits[len(waits)-1]; got > 10*time.Millisecond {
			t.Errorf("exits=%d: longest wait from due to probe = %v, want at most one pick interval (10ms); waits %v", exits, got, waits)
		}
	}
}
