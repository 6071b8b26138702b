package pool_test

import (
	"context"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

var outage = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx}

// TestGuardProbeGoesThroughASoundExit: once an origin's guard is HALF_OPEN, its probe goes
// through an exit whose own and pair breakers are CLOSED — not through a pair whose own probe is
// due first, whose answer (a flaky exit's timeout, a ban going on) would say nothing of the
// origin and re-trip the guard. A probe served through a sound exit closes the guard.
func TestGuardProbeGoesThroughASoundExit(t *testing.T) {
	p, clk := newSuspectPool(t, 6)
	ctx := context.Background()
	send := func(exit string, v pool.Verdict) pool.Reported {
		t.Helper()
		l, err := p.Pick(ctx, pool.Request{Origin: "shop.example", Exit: exit})
		if err != nil {
			t.Fatalf("Pick via %s: %v", exit, err)
		}
		return l.Report(v)
	}
	send("e0", challenge) // e0's pair trips: its probe is due 10 s on, before the guard's
	for _, e := range []string{"e1", "e2", "e3"} {
		send(e, outage) // three exits fail with a 503: the origin is down
	}
	if _, err := p.Pick(ctx, pool.Request{Origin: "shop.example"}); err == nil {
		t.Fatal("Pick while the guard is OPEN succeeded")
	}
	clk.Advance(5 * time.Minute) // the guard and every pair are due for a probe
	l, err := p.Pick(ctx, pool.Request{Origin: "shop.example"})
	if err != nil {
		t.Fatalf("Pick of the guard's probe: %v", err)
	}
	if got := l.Exit().Label(); got != "e4" && got != "e5" {
		t.Fatalf("the guard's probe went through %s, want a sound exit (e4 or e5)", got)
	}
	l.Report(pageVerdict)
	l, err = p.Pick(ctx, pool.Request{Origin: "shop.example", Exit: "e0"})
	if err != nil {
		t.Fatalf("Pick via e0 after the guard's probe was served: %v (the guard stayed out of CLOSED)", err)
	}
	if got := l.Report(pageVerdict); got.PairState != breaker.Closed {
		t.Errorf("e0's probe served: pair %v, want closed", got.PairState)
	}
}

// TestGuardProbeWithoutSoundExit: when no exit is sound, the guard's probe takes what an ordinary
// pick would (a pair's due probe) rather than refuse.
func TestGuardProbeWithoutSoundExit(t *testing.T) {
	p, clk := newSuspectPool(t, 3)
	ctx := context.Background()
	for _, e := range []string{"e0", "e1", "e2"} {
		l, err := p.Pick(ctx, pool.Request{Origin: "shop.example", Exit: e})
		if err != nil {
			t.Fatalf("Pick via %s: %v", e, err)
		}
		l.Report(outage)
	}
	clk.Advance(5 * time.Minute)
	l, err := p.Pick(ctx, pool.Request{Origin: "shop.example"})
	if err != nil {
		t.Fatalf("Pick of the guard's probe with every pair out of CLOSED: %v", err)
	}
	l.Report(pageVerdict)
}
