package ratelimit

import (
	"testing"
	"time"
)

// TestBlockOutlastsThePeriod: a site that allows 30 a minute and blocks for ten minutes once the
// count is reached. The pair's resets are a block and its served span apart (630 s, read as ten
// minutes before): it is held to 30 per minute, the shortest period its 30 successes (29 s) allow,
// not 30 per ten minutes.
func TestBlockOutlastsThePeriod(t *testing.T) {
	p := newLearner(t)
	p.Limited(sec(103.3), 600*time.Second, Window{}) // the block: reset at 703.3 s
	for i := range 30 {
		p.Served(sec(703.5 + float64(i))) // 30 successes over 29 s
	}
	p.Limited(sec(733.1), 600*time.Second, Window{}) // the 31st: blocked again, reset 1333.1 s
	n, w := p.win.allowance()
	if n != 30 || time.Duration(w) != time.Minute {
		t.Fatalf("held to %d per %v, want 30 per 1m0s (the period, not the block)", n, time.Duration(w))
	}
	if g, upper := p.Guessing(); !g || upper != 10*time.Minute {
		t.Errorf("Guessing() = %v, %v; want true, 10m0s (the span between the resets)", g, upper)
	}
	if got := takes(p, every(sec(1334), time.Second, 60)...); got != 30 {
		t.Errorf("the minute after the block: %d takes given, want 30", got)
	}
	if got := takes(p, every(sec(1394), time.Second, 60)...); got != 30 {
		t.Errorf("the minute after: %d takes given, want 30 (not 30 per ten minutes)", got)
	}
}

// TestGuessedPeriodLengthens: a pair served its 20 in 3 s guesses a period of 10 s; each 429
// while it is held to a guess lengthens it to the next natural length, keeping the 20, until the
// guess reaches the span its resets said (then it is that window, as before).
func TestGuessedPeriodLengthens(t *testing.T) {
	p := newLearner(t)
	p.Limited(sec(3.3), 300*time.Second, Window{})
	for i := range 20 {
		p.Served(sec(303.4 + float64(i)*0.15))
	}
	p.Limited(sec(306.7), 300*time.Second, Window{})
	for i, want := range []time.Duration{10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute} {
		n, w := p.win.allowance()
		if n != 20 || time.Duration(w) != want {
			t.Fatalf("step %d: held to %d per %v, want 20 per %v", i, n, time.Duration(w), want)
		}
		p.Limited(sec(1000+float64(i)*700), 300*time.Second, Window{})
	}
	if g, _ := p.Guessing(); g {
		t.Errorf("Guessing() after the guess reached the span = true, want false")
	}
}

// TestClockWindowIsNoGuess: resets on the clock's boundaries are a fixed window's, and the span
// between them is its length: no guess, however fast the pair was served.
func TestClockWindowIsNoGuess(t *testing.T) {
	p := newLearner(t)
	p.Limited(sec(40), 20*time.Second, Window{})
	for i := range 12 {
		p.Served(sec(60 + float64(i)*0.1))
	}
	p.Limited(sec(62), 58*time.Second, Window{})
	if n, w := p.win.allowance(); n != 12 || time.Duration(w) != time.Minute {
		t.Errorf("held to %d per %v, want 12 per 1m0s", n, time.Duration(w))
	}
	if g, _ := p.Guessing(); g {
		t.Error("Guessing() = true for a clock-aligned window, want false")
	}
}

// TestUnannouncedBlock: without Retry-After, a block shows as a run of 429s longer than any
// window learned so: a pair whose runs are a 5-minute block and 20 successes in 8 s apart is held
// to 20 per 10 s (the shortest period that holds them), where before it learned nothing.
func TestUnannouncedBlock(t *testing.T) {
	p := newLearner(t)
	for s := 0.0; s < 300; s += 20 {
		p.Unannounced(sec(s), Window{}) // one run: the rests end inside the block
	}
	for i := range 20 {
		p.Served(sec(301 + float64(i)*0.4))
	}
	p.Unannounced(sec(308.8), Window{})
	if p.win == nil {
		t.Fatal("after a block's run and 20 successes: not held, want held to a guessed period")
	}
	if n, w := p.win.allowance(); n != 20 || time.Duration(w) != 10*time.Second {
		t.Errorf("held to %d per %v, want 20 per 10s", n, time.Duration(w))
	}
	if g, _ := p.Guessing(); !g {
		t.Error("Guessing() = false, want true")
	}
}

// TestRaiseAfterLongRests: a pair whose rests outlast its window (a block) is raised after
// RaiseAfter rests, not RaiseAfter windows: each raise past the limit costs one rest.
func TestRaiseAfterLongRests(t *testing.T) {
	p := newLearner(t)
	p.Limited(sec(103.3), 600*time.Second, Window{})
	for i := range 30 {
		p.Served(sec(703.5 + float64(i)))
	}
	p.Limited(sec(733.1), 600*time.Second, Window{})
	start := 1334.0
	for s := start; s < start+float64(RaiseAfter)*60+120; s += 2 {
		p.Served(sec(s))
	}
	if n, _ := p.win.allowance(); n != 30 {
		t.Errorf("after %d windows of a minute: %d per window, want 30 (a raise waits RaiseAfter blocks)", RaiseAfter, n)
	}
}
