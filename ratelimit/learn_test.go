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

// sec is lt0 plus s seconds.
func sec(s float64) time.Time { return lt0.Add(time.Duration(s * float64(time.Second))) }

// takes takes from the pair's bucket at each instant and returns how many it was given.
func takes(p *Pair, at ...time.Time) int {
	n := 0
	for _, t := range at {
		if Take(t, nil, p.Bucket(), nil) {
			n++
		}
	}
	return n
}

// every returns n instants from start, step apart.
func every(start time.Time, step time.Duration, n int) []time.Time {
	out := make([]time.Time, n)
	for i := range out {
		out[i] = start.Add(time.Duration(i) * step)
	}
	return out
}

// TestLimitedLearnsTheWindow: a pair that meets a cap of 12 a minute learns it from its second
// 429 — the first only says when the window resets — and is then held to 12 in any minute, none
// before the reset, as fast as it likes.
func TestLimitedLearnsTheWindow(t *testing.T) {
	p := newLearner(t)
	if own := p.Limited(sec(40), 20*time.Second, Window{}); !own.IsZero() || p.Bucket() != nil {
		t.Fatalf("first Limited = %+v, bucket %v; want nothing learned, unpaced", own, p.Bucket())
	}
	for i := range 12 {
		p.Served(sec(60 + float64(i)*2)) // the next minute: 12 successes from 60 s
	}
	own := p.Limited(sec(85), 35*time.Second, Window{})
	if want := (Window{N: 12, Length: time.Minute}); own != want {
		t.Fatalf("second Limited learned %+v, want %+v", own, want)
	}
	if got := takes(p, every(sec(100), 0, 3)...); got != 0 {
		t.Errorf("during the rest the 429 asked for: %d takes given, want 0", got)
	}
	if got := takes(p, every(sec(120), 100*time.Millisecond, 20)...); got != 12 {
		t.Errorf("the next window, 20 takes in 2 s: %d given, want 12", got)
	}
	if got := takes(p, sec(180)); got != 1 {
		t.Errorf("the window after: %d given, want 1", got)
	}
}

// TestLimitedWhileHeld: a held pair that meets a 429 is re-aligned on the announced reset; it is
// allowed one less only when the window before ended in a 429 too. RaiseAfter windows without one
// allow one more.
func TestLimitedWhileHeld(t *testing.T) {
	p := newLearner(t)
	p.Limited(sec(0), time.Minute, Window{N: 10, Length: time.Minute}) // the origin's prior
	if n, _ := p.win.allowance(); n != 10 {
		t.Fatalf("held to %d per window, want the prior's 10", n)
	}
	p.Limited(sec(90), 30*time.Second, Window{})
	if n, _ := p.win.allowance(); n != 10 {
		t.Errorf("after one 429 while held: %d per window, want 10 (re-aligned only)", n)
	}
	p.Limited(sec(150), 30*time.Second, Window{})
	if n, _ := p.win.allowance(); n != 9 {
		t.Errorf("after a second 429 a window later: %d per window, want 9", n)
	}
	p.Served(sec(150 + 60*RaiseAfter))
	if n, _ := p.win.allowance(); n != 10 {
		t.Errorf("after %d windows without a 429: %d per window, want 10", RaiseAfter, n)
	}
}

// TestNatural: window lengths measured from Retry-Afters rounded to whole seconds snap to the
// lengths sites count over.
func TestNatural(t *testing.T) {
	for _, tc := range []struct {
		in, want time.Duration
		sure     bool
	}{
		{61 * time.Second, time.Minute, true}, {59 * time.Second, time.Minute, true}, {3601 * time.Second, time.Hour, true},
		{10 * time.Second, 10 * time.Second, true}, {42*time.Second + 300*time.Millisecond, 42 * time.Second, false},
		{200 * time.Millisecond, time.Second, false},
	} {
		if got, sure := natural(tc.in); got != tc.want || sure != tc.sure {
			t.Errorf("natural(%v) = %v, %v; want %v, %v", tc.in, got, sure, tc.want, tc.sure)
		}
	}
}

// TestLimitedWithoutRetryAfter: a 429 without Retry-After cuts an unpaced pair as Cut does, and a
// held pair is allowed one less.
func TestLimitedWithoutRetryAfter(t *testing.T) {
	p := newLearner(t)
	p.Limited(lt0, 0, Window{})
	if got := p.Bucket().Limit(); got != DefaultCeiling*DefaultDecrease {
		t.Errorf("unpaced pair after a 429 without Retry-After: %v, want %v", got, DefaultCeiling*DefaultDecrease)
	}
	q := newLearner(t)
	q.Limited(lt0, time.Minute, Window{N: 5, Length: time.Minute})
	q.Limited(sec(70), 0, Window{})
	if n, _ := q.win.allowance(); n != 4 {
		t.Errorf("held pair after a 429 without Retry-After: %d per window, want 4", n)
	}
}

// TestChallengedSlowsOnlyCutPairs: a challenge page slows a pair paced by cuts, and leaves alone an
// unpaced pair and one held to the origin's window.
func TestChallengedSlowsOnlyCutPairs(t *testing.T) {
	p := newLearner(t)
	if r := p.Challenged(lt0); r != rate.Inf || p.Bucket() != nil {
		t.Errorf("Challenged on an unpaced pair = %v, want unpaced", r)
	}
	p.Limited(lt0, 0, Window{}) // cut to 5/s
	if r := p.Challenged(lt0); r != 4.5 {
		t.Errorf("Challenged on a cut pair = %v, want 4.5", r)
	}
	q := newLearner(t)
	q.Limited(lt0, time.Minute, Window{N: 5, Length: time.Minute})
	q.Challenged(lt0)
	if n, _ := q.win.allowance(); n != 5 {
		t.Errorf("Challenged on a held pair: %d per window, want 5", n)
	}
}

// TestLearningDisabled: with Adaptive.Disabled nothing is learned.
func TestLearningDisabled(t *testing.T) {
	g, _ := New(Limits{Adaptive: Adaptive{Disabled: true}, PerPair: PerSecond(1, 1)})
	p := g.NewPair("x")
	p.Served(lt0)
	if own := p.Limited(sec(1), 30*time.Second, Window{N: 3, Length: time.Minute}); !own.IsZero() || p.win != nil {
		t.Errorf("Limited, disabled = %+v, held %v; want nothing", own, p.win != nil)
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
	if own := p.Limited(lt0, time.Minute, Window{N: 3, Length: time.Minute}); !own.IsZero() || p.Bucket() != nil || p.Throttled() {
		t.Errorf("nil pair: Limited = %+v; want nothing", own)
	}
}

// TestWindowBudgetSlides: a pair held to a window gets its slots back one at a time, as its own
// takes leave the window — where an origin's sliding log frees them — not all at one reset.
func TestWindowBudgetSlides(t *testing.T) {
	p := newLearner(t)
	p.Limited(sec(0), time.Second, Window{N: 3, Length: time.Minute}) // the origin's prior; rest 1 s
	steps := []struct {
		at      float64
		ok      bool
		readyAt float64 // when not ok
	}{
		{0.5, false, 1}, {1, true, 0}, {10, true, 0}, {20, true, 0}, {30, false, 61},
		{61, true, 0}, {62, false, 70}, {70, true, 0}, {80.5, true, 0}, {81, false, 121},
	}
	for i, s := range steps {
		ok, at := p.Bucket().Ready(sec(s.at))
		if ok != s.ok || (!ok && !at.Equal(sec(s.readyAt))) {
			t.Fatalf("step %d: Ready(%v s) = %v, %v; want %v, %v s", i, s.at, ok, at.Sub(lt0), s.ok, s.readyAt)
		}
		if ok && takes(p, sec(s.at)) != 1 {
			t.Fatalf("step %d: Take(%v s) refused after Ready", i, s.at)
		}
	}
}

// TestWindowBudgetLarge: a budget of more than maxLog per window counts over fixed windows from
// the announced reset, holding no instants.
func TestWindowBudgetLarge(t *testing.T) {
	p := newLearner(t)
	p.Limited(sec(0), time.Second, Window{N: maxLog + 1, Length: time.Minute})
	if got := takes(p, every(sec(1), time.Millisecond, maxLog+5)...); got != maxLog+1 {
		t.Errorf("first window: %d takes given, want %d", got, maxLog+1)
	}
	if got := takes(p, sec(61)); got != 1 {
		t.Errorf("the next window: %d given, want 1", got)
	}
	if n := len(p.win.log); n != 0 {
		t.Errorf("log holds %d instants, want none", n)
	}
}

// TestUnannouncedLearnsTheWindow: a pair that meets a cap of 4 a clock minute without Retry-After
// learns it from the spacing of its runs of 429s — 4 successes from one run's start to the next,
// about a minute or two apart — cuts nothing meanwhile, and is then held to 4 in any minute, its
// successes before the run counted.
func TestUnannouncedLearnsTheWindow(t *testing.T) {
	p := newLearner(t)
	if own := p.Unannounced(sec(10), Window{}); !own.IsZero() || p.Bucket() != nil {
		t.Fatalf("first run: Unannounced = %+v, bucket %v; want nothing learned, unpaced", own, p.Bucket())
	}
	p.Unannounced(sec(11), Window{}) // the same run
	for i := range 4 {
		p.Served(sec(80 + float64(i))) // 80…83 s
	}
	if p.Bucket() != nil {
		t.Fatalf("after successes: paced, want unpaced (nothing is cut)")
	}
	// Runs 85 s apart say a window of a minute at most; the 4 successes came within 15 s, so the
	// pair is held to 4 per 30 s, a guess (period.go) of at most a minute.
	if own, want := p.Unannounced(sec(95), Window{}), (Window{N: 4, Length: 30 * time.Second, Upper: time.Minute}); own != want {
		t.Fatalf("second run learned %+v, want %+v", own, want)
	}
	if n, w := p.win.allowance(); n != 4 || time.Duration(w) != 30*time.Second {
		t.Fatalf("held to %d per %v, want 4 per 30s", n, time.Duration(w))
	}
	if g, upper := p.Guessing(); !g || upper != time.Minute {
		t.Errorf("Guessing() = %v, %v; want true, 1m0s", g, upper)
	}
	if got := takes(p, every(sec(100), time.Second, 10)...); got != 0 {
		t.Errorf("100…109 s: %d takes given, want 0 (its 4 successes of 80…83 s still count)", got)
	}
	if got := takes(p, every(sec(114), time.Second, 5)...); got != 4 {
		t.Errorf("114…118 s: %d takes given, want 4", got)
	}
	// A run while held to the guess: the period is longer, the count was right.
	p.Served(sec(150))
	p.Unannounced(sec(160), Window{})
	if n, w := p.win.allowance(); n != 4 || time.Duration(w) != time.Minute {
		t.Errorf("after a run while held to the guess: %d per %v, want 4 per 1m0s", n, time.Duration(w))
	}
	// A run in the window after the last one, held to a window that is no guess: one less.
	p.Served(sec(200))
	p.Unannounced(sec(210), Window{})
	if n, _ := p.win.allowance(); n != 3 {
		t.Errorf("after a run a window later: %d per window, want 3", n)
	}
}

// TestUnannouncedRunsTooFarApart: runs of 429s further apart than 2½ windows teach nothing; a pair
// of an origin whose other pairs learned a window takes it at its first 429.
func TestUnannouncedRunsTooFarApart(t *testing.T) {
	p := newLearner(t)
	p.Unannounced(sec(0), Window{})
	p.Served(sec(500))
	if own := p.Unannounced(sec(1000), Window{}); !own.IsZero() || p.Bucket() != nil {
		t.Errorf("runs 1000 s apart: learned %+v, bucket %v; want nothing", own, p.Bucket())
	}
	q := newLearner(t)
	q.Unannounced(sec(0), Window{N: 6, Length: time.Minute})
	if q.win == nil {
		t.Fatal("first 429 with the origin's prior: not held")
	}
	if n, _ := q.win.allowance(); n != 6 {
		t.Errorf("held to %d per window, want the prior's 6", n)
	}
}

func TestLooseNatural(t *testing.T) {
	for _, tc := range []struct {
		in   time.Duration
		want time.Duration
		ok   bool
	}{
		{45 * time.Second, time.Minute, true}, {100 * time.Second, time.Minute, true},
		{150 * time.Second, time.Minute, true}, {200 * time.Second, 0, false}, {20 * time.Second, 15 * time.Second, true},
		{4 * time.Minute, 0, false}, {500 * time.Millisecond, 0, false},
	} {
		if got, ok := looseNatural(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("looseNatural(%v) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
