package pool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestNextSlot: two exits whose pairs met 429s with Retry-After 30 s and 10 s. The origin has room
// next when the sooner rest ends (10 s, lengthened by the breaker's jitter: 11.25 s with a draw of
// one half): NextSlotAt says so, a refused pick's error carries it (RoomIn), and Capacity too; an
// origin no pair of which is out has room now; a pool with no exits has none ever.
func TestNextSlot(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	a, b := pool.MustParseExit("10.0.0.1:3128"), pool.MustParseExit("10.0.0.2:3128")
	p, err := pool.New(pool.WithExits(a, b), pool.WithClock(clk),
		pool.WithPairSettings(breaker.Settings{Rand: func() float64 { return 0.5 }}))
	if err != nil {
		t.Fatal(err)
	}
	const site = "shop.test"
	ctx := context.Background()
	for _, c := range []struct {
		exit *pool.Exit
		ra   time.Duration
	}{{a, 30 * time.Second}, {b, 10 * time.Second}} {
		l, err := p.Pick(ctx, pool.Request{Origin: site, Exit: c.exit.Label()})
		if err != nil {
			t.Fatal(err)
		}
		l.Report(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: c.ra})
	}
	want := t0.Add(11250 * time.Millisecond)
	if got := p.NextSlotAt(t0, site); !got.Equal(want) {
		t.Errorf("NextSlotAt(t0) = %v, want %v", got.Sub(t0), want.Sub(t0))
	}
	_, err = p.Pick(ctx, pool.Request{Origin: site})
	var nh *pool.NoHealthyExitError
	if !errors.As(err, &nh) || nh.RoomIn != want.Sub(t0) {
		t.Errorf("Pick = %v, want a *NoHealthyExitError with RoomIn %v", err, want.Sub(t0))
	}
	if c := p.CapacityAt(t0, site); !c.NextSlot.Equal(want) {
		t.Errorf("Capacity.NextSlot = %v, want %v", c.NextSlot.Sub(t0), want.Sub(t0))
	}
	if got := p.NextSlotAt(t0, "other.test"); !got.Equal(t0) {
		t.Errorf("NextSlotAt(t0, an origin with every pair closed) = %v, want t0", got)
	}
	if got := p.NextSlotAt(want, site); !got.Equal(want) {
		t.Errorf("NextSlotAt(the rest's end) = %v, want that instant", got)
	}
	empty, err := pool.New(pool.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	if got := empty.NextSlotAt(t0, site); !got.IsZero() {
		t.Errorf("NextSlotAt on a pool with no exits = %v, want the zero time", got)
	}
}
