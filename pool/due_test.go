package pool

import (
	"context"
	"fmt"
	"math"
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
