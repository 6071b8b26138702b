package ratelimit

import "time"

// Learning a window the origin does not announce.
//
// A 429 without Retry-After says the pair has used up what the origin allows, not when it may
// come back. A pair that keeps meeting the limit meets it once a window: the first 429 after a
// success starts a run of 429s, and from one run's start to the next the pair was allowed what the
// window allows (the successes in between) over one window's length or a few (the pair resumes
// when its breaker lets it, not at the origin's reset, and may sit out windows: it still sends one
// window's allowance before the next run). Two runs whose starts are from ¾ to 2½ natural window
// lengths apart teach the pair the longest such window up to a minute (looseNatural); others teach
// nothing. Longer windows are not learned without Retry-After: runs a quarter of an hour apart are
// as likely a pair that met the limit twice by chance, and holding it to a couple of requests per
// quarter hour would starve it. From then on the pair is held to it as to a window learned from
// Retry-Afters (learn.go), its recent successes counted in it; a pair held to a window that still
// starts a run of 429s in the window after the last one is allowed one less. A pair that learned
// nothing yet takes its origin's prior at its first 429.

// recentCap bounds the success instants a pair keeps for seeding the window it is held to.
const recentCap = maxLog

// Unannounced applies a 429 without Retry-After at now, for a pool that paces only what pairs
// learn: it never cuts the pair's rate (see Limited for pairs under configured limits). It learns
// the pair's window from the spacing of its runs of 429s, or, for a pair that has learned none,
// takes prior. It returns the window the pair learned from its own traffic, zero when it learned
// none, so that the caller can keep the origin's prior.
func (p *Pair) Unannounced(now time.Time, prior Window) Window {
	if p == nil || p.cfg.Disabled {
		return Window{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := now.UnixNano()
	p.track(t)
	if p.inRun {
		p.runLast = t
		p.runHigh = max(p.runHigh, t-p.runAt)
		return Window{} // the same run: the breaker rests the pair
	}
	p.inRun = true
	var own Window
	switch {
	case p.win != nil && p.guess != 0:
		// Held to a guessed period (period.go): the period is longer, the count was right.
		own = p.lengthen(t)
	case p.win != nil:
		n, w := p.win.allowance()
		if p.runAt != 0 && t-p.runAt <= consecutive*w {
			n-- // a run in the window after the last one: the origin allows less
		}
		p.win.reset(n, w, t)
	case p.runAt != 0 && p.runSent > 0:
		d := time.Duration(t - p.runAt)
		if w, ok := looseNatural(d); ok {
			// The runs are at least a window apart, more when a rest outlasted the window: the
			// pair is held to the shortest period its successes allow, up to w (period.go).
			own = Window{N: int(p.runSent), Length: w}
			if g, guess := guessPeriod(time.Duration(t-p.runOne), w); guess {
				own.Length, own.Upper = g, w
			}
			p.hold(own, t, true, true)
		} else if p.runLast-p.runAt > int64(maxUnannounced) && p.runSent > 1 {
			// The last run outlasted any window learned without Retry-After: a block (period.go).
			if g, ok := guessPeriod(time.Duration(t-p.runOne), d); ok {
				own = Window{N: int(p.runSent), Length: g, Upper: d}
				p.hold(own, t, true, true)
			}
		}
	case !prior.IsZero():
		p.hold(prior, t, true, true) // no Retry-After to fit a window to: nothing to keep successes for
	}
	p.runAt, p.runLast, p.runSent, p.learned = t, t, 0, t
	return own
}

// maxUnannounced is the longest window learned without Retry-After.
const maxUnannounced = time.Minute

// looseNatural returns the longest natural window length w, up to maxUnannounced, with
// ¾ w ≤ d ≤ 2½ w, if any.
func looseNatural(d time.Duration) (time.Duration, bool) {
	for i := len(naturalWindows) - 1; i >= 0; i-- {
		if w := naturalWindows[i]; w <= maxUnannounced && d >= w*3/4 && d <= w*5/2 {
			return w, true
		}
	}
	return 0, false
}

// noteSuccess keeps, under p.mu, what the learning of unannounced windows needs of a success at t:
// it ends a run of 429s, counts towards the next, and, until the pair holds a sure window, its
// instant is kept for seeding a window and for fitting one (fit.go).
func (p *Pair) noteSuccess(t int64) {
	if p.tracked == 0 {
		return // a pair held to a window tracks: hold follows track
	}
	p.inRun = false
	if p.runSent == 0 {
		p.runOne = t
	}
	p.runSent++
	if !p.sure {
		p.keepRecent(t)
	}
}

// track starts, under p.mu, the noting of the pair's successes at t, if it has not started.
func (p *Pair) track(t int64) {
	if p.tracked == 0 {
		p.tracked = max(t, 1)
	}
}

// keepRecent keeps, under p.mu, the instant of a success for seeding a window and for fitting one
// (fit.go), at most recentCap of them.
func (p *Pair) keepRecent(t int64) {
	if len(p.recent) >= recentCap {
		p.recent = append(p.recent[:0], p.recent[len(p.recent)-recentCap+1:]...)
	}
	p.recent = append(p.recent, t)
}
