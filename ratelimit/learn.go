package ratelimit

import (
	"time"

	"golang.org/x/time/rate"
)

// Learning a pair's pace.
//
// A 429 with a Retry-After says two things: the pair has used up what the origin allows it, and
// when the origin's window resets. Two such 429s in windows that follow each other say how long the
// window is (from one reset to the next) and how much it allows (the successes in between): from
// then on the pair is held to that allowance in any span of the window's length, none before the
// reset the origin announced (windowBudget, a sliding log of the pair's own takes) — it sends what
// the origin allows, as fast as it likes, and stops before the 429; each slot comes back when the
// take that used it leaves the window, which is when a sliding window frees it. A pair held to a window that still meets a 429 (the origin allows less, or counts
// a sliding window) is allowed one less per window, from the reset that 429 announced; one that
// meets none for RaiseAfter windows is allowed one more, so that a site that allows more is found
// out at the cost of one 429. A sure window that meets a second 429 within RaiseAfter windows,
// with no raise between, is no longer trusted: the pair notes its successes again, and a later
// 429 fits the window anew (distrust).
//
// A pair that has learned nothing yet takes its origin's window (what its other pairs learned) at
// its first 429: the origin's limit is usually the same for every IP.
const (
	// RaiseAfter is how many windows a paced pair goes without a 429 before its allowance rises.
	// Each raise of a pair already at the origin's limit costs one 429: with 10, a pair of a
	// one-minute window met one every ten minutes, about half of the 429s in the bench's round-3
	// world (seed 2: 5,093 in 3 h with 10, 2,253 with 30; docs/decisions.md). A site that raised
	// its limit is found out within half an hour of one-minute windows.
	RaiseAfter = 30
	// consecutive: two resets at most this many longest-seen Retry-Afters apart are taken for
	// consecutive windows; further apart, the pair skipped windows and the count says nothing.
	consecutive = 2
)

// Window is what an origin allows a pair: N requests in any span of Length. The zero Window is
// nothing learned. Upper, when longer than Length, says that Length is a guess of the origin's
// period, the shortest it may be (period.go): a 429 while held to it lengthens it, up to Upper.
type Window struct {
	N      int
	Length time.Duration
	Upper  time.Duration
}

// Guess reports whether w's Length is a guess of the origin's period (Upper is longer).
func (w Window) Guess() bool { return w.Upper > w.Length }

// IsZero reports whether w is nothing learned.
func (w Window) IsZero() bool { return w.N <= 0 || w.Length <= 0 }

// Limited applies a 429 at now. With a Retry-After (the origin's window resets then) it learns the
// pair's window as described above, or, for a pair that has learned none, takes prior (the window
// the origin's other pairs learned; zero for none). Without one it cuts the pace as Cut does (a
// pair held to a window is allowed one less). It returns the window the pair learned from its own
// traffic, zero when it learned none, so that the caller can keep the origin's prior.
func (p *Pair) Limited(now time.Time, retryAfter time.Duration, prior Window) Window {
	if p == nil || p.cfg.Disabled {
		return Window{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := now.UnixNano()
	if retryAfter <= 0 {
		if p.win != nil {
			n, w := p.win.allowance()
			p.win.reset(n-1, w, t)
		} else if b := p.bucket.Load(); b == nil || b.src == nil {
			p.cutLocked(now)
		}
		return Window{}
	}
	p.track(t)
	reset := t + int64(retryAfter)
	p.longest = max(p.longest, int64(retryAfter))
	var own Window
	fit, fits := Window{}, false
	if !p.sure {
		fit, fits = p.slidingFit(t, retryAfter)
	}
	switch {
	case fits:
		// One 429 said it all (fit.go): the pair is held to it, its successes of the window
		// before the reset counted in it.
		own = fit
		p.hold(own, reset, true, true)
	case p.win != nil && p.guess != 0:
		// Held to a guessed period (period.go): the period is longer, the count was right.
		own = p.lengthen(reset)
		p.struck = t
	case p.win != nil:
		// Re-aligned on the reset the origin announced; allowed one less only when the window
		// before also ended in a 429 (one 429 may be a window the pair saw out of line).
		n, w := p.win.allowance()
		if t-p.struck <= consecutive*w {
			n--
		}
		if p.sure && p.struck != 0 && p.learned == p.struck && t-p.struck < RaiseAfter*w {
			p.distrust(t)
		}
		p.struck = t
		p.win.reset(n, w, reset)
	case p.since != 0 && p.sent > 0 && reset-p.since <= consecutive*p.longest:
		l, sure := natural(time.Duration(reset - p.since))
		w := Window{N: int(p.sent), Length: l}
		if !onBoundary(p.since) || !onBoundary(reset) {
			// Not a clock-aligned window's resets: a block may have outlasted the period
			// (period.go); the pair is held to the shortest period its successes allow.
			if g, guess := guessPeriod(time.Duration(t-p.first), l); guess {
				w.Length, w.Upper = g, l
			}
		}
		p.hold(w, reset, false, sure)
		if sure {
			own = w // an unsure window is not the origin's prior: its other pairs would take it
		}
	case !prior.IsZero():
		p.hold(prior, reset, false, true) // a prior is a sure window another pair learned
	}
	p.since, p.sent, p.learned = reset, 0, t
	return own
}

// distrust makes the window the pair is held to unsure again at t, under p.mu: a second 429
// within RaiseAfter windows, with no raise since the first, says the window is wrong, for a right
// one meets a 429 only at a raise. A sure window can be wrong when it was the origin's prior,
// learned by a pair that read two resets of a sliding window as a natural length (10 s apart, say,
// for a window of a minute). The pair notes its successes again from t, so that a later 429 fits
// the window (fit.go); until one does, it keeps up to recentCap instants.
func (p *Pair) distrust(t int64) {
	p.sure, p.tracked, p.recent = false, max(t, 1), p.recent[:0]
}

// naturalWindows are the window lengths rate limits are counted over, in practice.
var naturalWindows = [...]time.Duration{
	time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute,
	10 * time.Minute, 15 * time.Minute, 30 * time.Minute, time.Hour, 24 * time.Hour,
}

// natural snaps d, a window length measured between two announced resets (each rounded up to a
// whole second by Retry-After), to the natural window length within 5 % of it (sure), or to whole
// seconds. A window learned a second long would drift off the origin's and meet 429s its
// allowance does not deserve. A length that is no natural one is most likely two resets of a
// sliding window, which are not a window apart: the pair keeps noting its successes, so that a
// later 429 can fit the window (fit.go).
func natural(d time.Duration) (l time.Duration, sure bool) {
	for _, w := range naturalWindows {
		if diff := d - w; diff >= -w/20 && diff <= w/20 {
			return w, true
		}
	}
	return max(d.Round(time.Second), time.Second), false
}

// hold holds the pair to w from start, under p.mu; with seed, its successes of the window before
// start count in it (the origin still counts them, if its window slides; a Retry-After's reset
// at a window's boundary needs none: the origin said when it has room again). A sure window (one
// fitted, a natural length, an origin's prior) ends the keeping of success instants; an unsure one
// (a length that is no natural one) keeps it, for a fit to correct it.
func (p *Pair) hold(w Window, start int64, seed, sure bool) {
	p.win, p.guess = &windowBudget{}, 0
	if w.Guess() {
		p.guess = int64(w.Upper)
	}
	p.win.reset(w.N, int64(w.Length), start)
	if seed {
		p.win.seed(p.recent, start)
	}
	p.sure = sure
	if sure {
		p.recent = nil
	}
	p.bucket.Store(SourceBucket(p.win))
}

// Served counts a success at now towards the pair's window, and allows a pair held to a window
// one more per window after RaiseAfter windows without a 429 — or RaiseAfter of its longest rests,
// when the origin's rests outlast its window (a block longer than the period: period.go), for
// each raise past the origin's limit costs one rest. A pair paced only by cuts (429s
// without a Retry-After) grows back as Grow does.
func (p *Pair) Served(now time.Time) {
	if p == nil || p.cfg.Disabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := now.UnixNano()
	p.noteSuccess(t)
	if p.win == nil && p.bucket.Load() != nil {
		p.growLocked(now)
		return
	}
	if t < p.since {
		return // an attempt the origin answered before its window reset
	}
	if p.sent == 0 {
		p.first = t
	}
	p.sent++
	if p.win == nil {
		return
	}
	n, w := p.win.allowance()
	if t-p.learned >= RaiseAfter*max(w, p.longest, p.runHigh) {
		p.learned = t
		p.win.raise(n + 1)
	}
}

// Challenged applies a challenge page at now: a pair paced by cuts slows by a tenth (a site that
// challenges an IP may be reacting to its pace); an unpaced one, or one held to the window the
// origin announced, is left alone — the breaker rests it, and a ban says nothing of the window.
func (p *Pair) Challenged(now time.Time) rate.Limit {
	if p == nil || p.cfg.Disabled {
		return p.Bucket().Limit()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.bucket.Load()
	if b == nil || b.src != nil || p.static {
		return b.Limit() // a window the origin announced is not the challenge's doing
	}
	r := max(b.lim.Limit()*0.9, p.cfg.Floor)
	b.setLimit(now, r)
	return r
}
