package pool

import (
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// TestCapacityReadsTheLearnedWindow: the per-exit rate is the window the origin's pairs learned
// (12 a minute: 0.2/s), the rate that times the usable exits, and ExitsFor the exits a rate needs.
func TestCapacityReadsTheLearnedWindow(t *testing.T) {
	p, err := New(WithExits(MustParseExit("10.0.0.1:80"), MustParseExit("10.0.0.2:80"), MustParseExit("10.0.0.3:80")))
	if err != nil {
		t.Fatal(err)
	}
	p.origin("shop.test").pace.learn(ratelimit.Window{N: 12, Length: time.Minute})
	c := p.Capacity("shop.test")
	if c.Usable != 3 || c.PerExit != 0.2 || c.Rate < 0.6-1e-9 || c.Rate > 0.6+1e-9 || c.ExitsFor(2) != 10 {
		t.Errorf("Capacity = %+v (ExitsFor(2/s) = %d), want 3 usable at 0.2/s each, 0.6/s, 10 exits for 2/s", c, c.ExitsFor(2))
	}
}

// TestCapacitySaysAGuess: a window whose length is a guess of the origin's period (30 per minute,
// the period at most the ten minutes between two resets of a block) is a range: PerExit the most
// it may allow, PerExitMin the least, and Guess set.
func TestCapacitySaysAGuess(t *testing.T) {
	p, err := New(WithExits(MustParseExit("10.0.0.1:80")))
	if err != nil {
		t.Fatal(err)
	}
	p.origin("shop.test").pace.learn(ratelimit.Window{N: 30, Length: time.Minute, Upper: 10 * time.Minute})
	c := p.Capacity("shop.test")
	if !c.Guess || c.PerExit != 0.5 || c.PerExitMin != 0.05 {
		t.Errorf("Capacity = %+v, want a guess of 0.05-0.5/s per exit", c)
	}
	p.origin("sure.test").pace.learn(ratelimit.Window{N: 30, Length: time.Minute})
	if c := p.Capacity("sure.test"); c.Guess || c.PerExitMin != c.PerExit {
		t.Errorf("Capacity of a sure window = %+v, want no guess, PerExitMin = PerExit", c)
	}
}
