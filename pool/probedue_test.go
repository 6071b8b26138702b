package pool

import (
	"context"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
)

// TestDueProbeWinsTheLeastLoadedComparison: a pair whose cooldown has ended, on an exit busier
// than the other, is probed whenever sampling draws it, instead of losing the least-loaded
// comparison every time its exit is drawn beside the idle one.
func TestDueProbeWinsTheLeastLoadedComparison(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	a, b := MustParseExit("10.0.0.1:3128"), MustParseExit("10.0.0.2:3128")
	p, err := New(WithExits(a, b), WithClock(clk), WithSeed(7), WithInlineSweep())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const origin = "recovering.example"
	l, err := p.Pick(ctx, Request{Origin: origin, Exit: a.Label()})
	if err != nil {
		t.Fatal(err)
	}
	l.Report(Verdict{Outcome: Transient, Class: ClassRateLimited, RetryAfter: time.Second})
	for range 3 { // a's exit is busy with another origin's requests
		if _, err := p.Pick(ctx, Request{Origin: "other.example", Exit: a.Label()}); err != nil {
			t.Fatal(err)
		}
	}
	// a's pair may be probed once its cooldown ends (within the idle TTL: the sweep would forget it).
	_, at := p.origin(origin).lookupPair(p.set.Load().byLabel[a.Label()].id).b.Ready(clk.Now())
	clk.Set(at)
	probes := 0
	const picks = 200
	for range picks {
		l, err := p.Pick(ctx, Request{Origin: origin})
		if err != nil {
			t.Fatal(err)
		}
		if l.Info().Probe {
			probes++
		}
		l.Release()
	}
	// Drawing two of two exits, a is among them three times in four; without the rule a busy a
	// would win only when drawn twice (one in four).
	if probes < picks/2 {
		t.Fatalf("%d probes of the recovering pair in %d picks; want it probed whenever drawn", probes, picks)
	}
}
