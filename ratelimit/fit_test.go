package ratelimit

import (
	"math/rand/v2"
	"testing"
	"time"
)

// slidingOrigin is an origin that accepts at most n requests in any span of w from one client (a
// sliding log of the requests it accepted) and answers the others 429 with a Retry-After, in whole
// seconds rounded up, until the oldest accepted leaves the window.
type slidingOrigin struct {
	n        int
	w        time.Duration
	accepted []time.Time
}

func (o *slidingOrigin) request(at time.Time) (ok bool, retryAfter time.Duration) {
	i := 0
	for i < len(o.accepted) && !o.accepted[i].After(at.Add(-o.w)) {
		i++
	}
	o.accepted = o.accepted[i:]
	if len(o.accepted) < o.n {
		o.accepted = append(o.accepted, at)
		return true, 0
	}
	wait := o.accepted[0].Add(o.w).Sub(at)
	return false, (wait + time.Second - 1).Truncate(time.Second)
}

// sendUntilLearned sends through p to o at random, a request every 0–4 s when p's bucket lets it,
// each answered 200–1000 ms later, until a 429 teaches p a window of its own (prior is what the
// origin's other pairs learned) or for at most d from lt0. It returns that window, the instant it
// stopped, and how many 429s it met.
func sendUntilLearned(rng *rand.Rand, o *slidingOrigin, p *Pair, prior Window, d time.Duration) (learned Window, now time.Time, limited int) {
	now = lt0
	for learned.IsZero() && now.Before(lt0.Add(d)) {
		now = now.Add(time.Duration(rng.IntN(4000)) * time.Millisecond)
		if !Take(now, nil, p.Bucket(), nil) {
			continue
		}
		ok, ra := o.request(now)
		done := now.Add(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		if ok {
			p.Served(done)
			continue
		}
		limited++
		learned = p.Limited(done, ra, prior)
	}
	return learned, now, limited
}

// TestLimitedFitsASlidingWindow: a pair sending at random through an origin with a sliding
// window of 10 a minute learns exactly that from the first 429 after it has watched its successes
// for a minute — its resets, a sliding window's, are not a window apart, and the learning from two
// of them would read a wrong length — and, held to it, meets no 429 for the next half hour but
// those of its raises (one more a window after RaiseAfter quiet windows), each of which takes it
// back to 10.
func TestLimitedFitsASlidingWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	o := &slidingOrigin{n: 10, w: time.Minute}
	p := newLearner(t)
	latency := func() time.Duration { return time.Duration(200+rng.IntN(800)) * time.Millisecond }
	learned, now, _ := sendUntilLearned(rng, o, p, Window{}, 10*time.Minute)
	if want := (Window{N: 10, Length: time.Minute}); learned != want {
		t.Fatalf("learned %+v by %v, want %+v", learned, now.Sub(lt0), want)
	}
	end, served, raised := now.Add(30*time.Minute), 0, 0
	for now.Before(end) {
		now = now.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		if !Take(now, nil, p.Bucket(), nil) {
			continue
		}
		ok, ra := o.request(now)
		done := now.Add(latency())
		if !ok {
			p.mu.Lock()
			n, _ := p.win.allowance()
			p.mu.Unlock()
			if n <= 10 {
				t.Fatalf("held to %d a minute, a 429 at %v (Retry-After %v)", n, now.Sub(lt0), ra)
			}
			raised++
			p.Limited(done, ra, Window{})
			continue
		}
		p.Served(done)
		served++
	}
	if raised > 30/RaiseAfter+1 {
		t.Errorf("%d 429s after raises in 30 min, want at most %d", raised, 30/RaiseAfter+1)
	}
	// Held to 10 a minute, give or take the raise after RaiseAfter quiet windows.
	if served < 290 || served > 300+30/RaiseAfter {
		t.Errorf("served %d in 30 min held to 10 a minute, want about 300", served)
	}
}

// TestSlidingFitNeedsAWholeWindow: a fit needs the pair to have noted its successes for at least
// the window's length: before that, successes it never noted count in the origin's window too.
func TestSlidingFitNeedsAWholeWindow(t *testing.T) {
	p := newLearner(t)
	p.Limited(sec(0), 5*time.Second, Window{}) // tracking starts here
	for i := range 10 {
		p.Served(sec(float64(5 + 4*i))) // 5 … 41 s
	}
	p.mu.Lock()
	_, early := p.slidingFit(int64(sec(50).UnixNano()), 15*time.Second) // 5 + 60 - 50: would fit a minute
	late, _ := p.slidingFit(int64(sec(61).UnixNano()), 5*time.Second)   // 5 + 60 - 61 = 4: up to 5
	p.mu.Unlock()
	if early {
		t.Errorf("a fit after 50 s of watching, want none")
	}
	if want := (Window{N: 10, Length: time.Minute}); late != want {
		t.Errorf("fit after 61 s of watching = %+v, want %+v", late, want)
	}
}

// TestNoFitOnTheClocksBoundaries: a 429 whose reset falls on a whole ten seconds of the clock may
// be a fixed window's, and fits nothing, even when the pair's successes would: a pair that met a
// clock minute's cap late in the minute has a success just inside any short window. Off the
// boundary the same successes fit.
func TestNoFitOnTheClocksBoundaries(t *testing.T) {
	p := newLearner(t)
	p.Limited(sec(0), 5*time.Second, Window{})
	for i := range 12 {
		p.Served(sec(float64(60 + 3*i))) // 60 … 93 s: 12 in the minute from 60 s
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// At 100 s, 12 successes in the last minute, the oldest at 60 s: a minute's window frees a
	// slot at 120 s, a whole minute of the clock.
	if w, ok := p.slidingFit(int64(sec(100).UnixNano()), 20*time.Second); ok {
		t.Errorf("fit with the reset on the minute = %+v, want none", w)
	}
	// The same successes 4.5 s later, an oldest at 64.5 s: the reset falls at 124.5 s.
	p.recent = p.recent[:0]
	for i := range 12 {
		p.recent = append(p.recent, int64(sec(64.5+3*float64(i)).UnixNano()))
	}
	if w, ok := p.slidingFit(int64(sec(104.5).UnixNano()), 20*time.Second); !ok || w != (Window{N: 12, Length: time.Minute}) {
		t.Errorf("fit off the boundary = %+v, %v; want 12 a minute", w, ok)
	}
	for _, tc := range []struct {
		at   float64
		want bool
	}{{120, true}, {121.5, true}, {122.4, true}, {123, false}, {125, false}, {129.4, false}, {129.6, true}} {
		if got := onBoundary(int64(sec(tc.at).UnixNano())); got != tc.want {
			t.Errorf("onBoundary(%v s) = %v, want %v", tc.at, got, tc.want)
		}
	}
}

// TestLimitedDistrustsAWrongPrior: a pair that takes a wrong prior at its first 429 (8 per 10 s:
// the origin's other pairs misread its sliding window of 10 a minute) is held to it as a sure
// window and meets 429s a minute or so apart; the second, with no raise between, makes it
// distrust the window, and a later 429 fits the origin's true one, which it then reports for the
// origin's other pairs.
func TestLimitedDistrustsAWrongPrior(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	o := &slidingOrigin{n: 10, w: time.Minute}
	p := newLearner(t)
	learned, now, limited := sendUntilLearned(rng, o, p, Window{N: 8, Length: 10 * time.Second}, 30*time.Minute)
	if want := (Window{N: 10, Length: time.Minute}); learned != want {
		t.Fatalf("after %d 429s in %v: learned %+v, want %+v", limited, now.Sub(lt0), learned, want)
	}
	if limited < 3 {
		t.Errorf("learned the window at the %d. 429, want at least the third: the prior's, the distrust's, the fit's", limited)
	}
}
