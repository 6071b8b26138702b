package ratelimit

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
)

var lt0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func newLearner(t *testing.T) *Pair {
	t.Helper()
	g, err := New(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	return g.NewPair("x")
}

func perMinute(r rate.Limit) float64 { return float64(r) * 60 }

// TestLimitedLearnsTheWindow: a pair that meets a clock-minute cap of 12 learns it from its second
// 429 (the first only tells it when the window resets), paced 12 a minute; a 429 while paced slows
// it by PacedDecrease; RaiseAfter quiet windows raise it by RaiseStep.
func TestLimitedLearnsTheWindow(t *testing.T) {
	p := newLearner(t)
	at := func(s float64) time.Time { return lt0.Add(time.Duration(s * float64(time.Second))) }
	// 12 successes in 0…33 s, the 13th meets 429 until the minute's end: nothing counted yet.
	if r, own := p.Limited(at(40), 20*time.Second, 0); r != rate.Inf || own {
		t.Fatalf("first Limited = %v, %v; want unpaced, not learned", r, own)
	}
	for i := range 12 {
		p.Served(at(60 + float64(i)*3)) // the next minute: 12 successes from 60 s
	}
	r, own := p.Limited(at(96), 24*time.Second, 0)
	if !own || perMinute(r) < 11.9 || perMinute(r) > 12.1 {
		t.Fatalf("second Limited = %.2f/min, own %v; want 12/min learned", perMinute(r), own)
	}
	if b := p.Bucket(); b == nil || b.lim.Burst() != 1 {
		t.Fatalf("bucket %+v, want one of burst 1", b)
	}
	r, _ = p.Limited(at(150), 30*time.Second, 0)
	if want := 12 * PacedDecrease; perMinute(r) < want-0.1 || perMinute(r) > want+0.1 {
		t.Errorf("a 429 while paced: %.2f/min, want %.2f", perMinute(r), want)
	}
	// Quiet for RaiseAfter windows (the longest Retry-After seen: 30 s).
	p.Served(at(150 + 30*RaiseAfter + 1))
	if got, want := perMinute(p.Bucket().Limit()), 12*PacedDecrease*(1+RaiseStep); got < want-0.1 || got > want+0.1 {
		t.Errorf("after %d quiet windows: %.2f/min, want %.2f", RaiseAfter, got, want)
	}
}

// TestLimitedTakesThePrior: a pair with nothing counted is paced at the origin's prior; without a
// Retry-After an unpaced pair starts from the prior too.
func TestLimitedTakesThePrior(t *testing.T) {
	p := newLearner(t)
	if r, own := p.Limited(lt0, 30*time.Second, rate.Every(5*time.Second)); own || perMinute(r) != 12 {
		t.Errorf("Limited with prior 12/min = %.2f/min, own %v; want 12/min, not own", perMinute(r), own)
	}
	q := newLearner(t)
	if r, _ := q.Limited(lt0, 0, rate.Every(10*time.Second)); perMinute(r) != 6 {
		t.Errorf("Limited without Retry-After, prior 6/min = %.2f/min, want 6", perMinute(r))
	}
}

// TestChallengedSlowsOnlyPacedPairs: a challenge page slows a paced pair and leaves an unpaced one
// unpaced.
func TestChallengedSlowsOnlyPacedPairs(t *testing.T) {
	p := newLearner(t)
	if r := p.Challenged(lt0); r != rate.Inf || p.Bucket() != nil {
		t.Errorf("Challenged on an unpaced pair = %v, want unpaced", r)
	}
	p.Limited(lt0, 30*time.Second, rate.Every(5*time.Second))
	if r := p.Challenged(lt0); perMinute(r) < 12*PacedDecrease-0.01 || perMinute(r) > 12*PacedDecrease+0.01 {
		t.Errorf("Challenged on a paced pair = %.2f/min, want %.2f", perMinute(r), 12*PacedDecrease)
	}
}

// TestLearningDisabled: with Adaptive.Disabled nothing is learned.
func TestLearningDisabled(t *testing.T) {
	g, _ := New(Limits{Adaptive: Adaptive{Disabled: true}})
	p := g.NewPair("x")
	p.Served(lt0)
	if r, own := p.Limited(lt0.Add(time.Second), 30*time.Second, rate.Every(time.Second)); r != rate.Inf || own || p.Bucket() != nil {
		t.Errorf("Limited, disabled = %v, %v; want unpaced", r, own)
	}
}

// TestNilPair: a gate that neither limits nor adapts pairs makes none, and a nil *Pair paces nothing.
func TestNilPair(t *testing.T) {
	g, _ := New(Limits{Adaptive: Adaptive{Disabled: true}})
	p := g.NewPair("x")
	if p != nil {
		t.Fatalf("NewPair = %p, want nil", p)
	}
	p.Served(lt0)
	p.Challenged(lt0)
	p.Cut(lt0)
	p.Grow(lt0)
	if r, own := p.Limited(lt0, time.Minute, rate.Every(time.Second)); r != rate.Inf || own || p.Bucket() != nil || p.Throttled() {
		t.Errorf("nil pair: Limited = %v, %v; want unpaced", r, own)
	}
}
