package pool_test

import (
	"context"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestSlowPairsLone403IsABan: a plain 403 through a pair tracked as slow, while other exits are
// served, is judged a ban at once, as a banned pair's probe's is: a slow pair is sent one attempt
// minutes apart, and its 403s never come two in a row. The same 403 through a pair that is not
// slow is the site's answer (the first in a row). A slow pair tripped so is probed after its
// cooldown, not at its next trickle, and its probe's page closes it.
func TestSlowPairsLone403IsABan(t *testing.T) {
	p, clk := newSuspectPool(t, 5)
	for range 20 {
		for _, e := range []string{"e2", "e3", "e4"} {
			answer(t, p, clk, "shop.example", e, 100*time.Millisecond)
		}
	}
	answer(t, p, clk, "shop.example", "e1", 2*time.Second) // slow: 20× the typical
	send := func(exit string, v pool.Verdict) breaker.State {
		t.Helper()
		l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Exit: exit})
		if err != nil {
			t.Fatalf("Pick through %s: %v", exit, err)
		}
		clk.Advance(100 * time.Millisecond)
		return l.Report(v).PairState
	}
	if got := send("e0", plain403Verdict); got != breaker.Closed {
		t.Errorf("a lone plain 403 through e0 (not slow): pair %v, want closed (the site's answer)", got)
	}
	if got := send("e1", plain403Verdict); got != breaker.Open {
		t.Fatalf("a lone plain 403 through e1 (slow): pair %v, want open (a ban)", got)
	}
	clk.Advance(10 * time.Second) // the pairs' BaseCooldown
	if got := send("e1", pageVerdict); got != breaker.Closed {
		t.Errorf("e1's probe served: pair %v, want closed", got)
	}
}
