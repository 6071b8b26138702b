package ratelimit

import "time"

// The period and the block.
//
// Many sites' limiters count requests over a period (10 s to an hour) and, once the count is
// reached, block the client for a separate duration (Cloudflare's mitigation timeout, up to a
// day) whatever its rate meanwhile: the Retry-After a client sees is what is left of the block,
// not of the period. Two resets of such a limiter are a block plus the time the pair took to be
// served again apart, and a pair held to "N per the span between them" was held to N per block:
// a tenth of what a site of 30 a minute allows when it blocks for ten minutes (issue 35).
//
// What the pair knows for sure is how fast it was served: its N successes between the reset and
// the 429 came within served (the first of them to the 429), and the origin counted them all in
// one period, so the period is at least served long. A pair whose resets are not the clock's
// (a clock-aligned window's resets are: onBoundary, and then the span is the window) is held to N
// per the shortest natural length that holds served (its guess, never longer than the span), and
// a 429 while it is held to a guess lengthens the guess to the next natural length instead of
// cutting N: the count was right, the period too short. Against a window of the span's length the
// guess costs a 429 per step and no capacity (the pair had sent its window's allowance when the
// 429 came, and rests to the reset as before); against a block it finds the period, and with it
// the site's capacity, within a few blocks. Once the guess reaches the span it is the window the
// span says, as before.
//
// Without Retry-After (unannounced.go) a block shows as a run of 429s that lasts longer than any
// window learned without Retry-After: the pair's rests end inside the block, again and again. Its
// runs are then the block plus the served span apart, too far for a window, and the pair is held
// to the same guess, capped at the span between the runs.

// guessPeriod returns the shortest natural length of fitLengths that holds served,
// and whether it is shorter than upper (the span the window would otherwise be read off): if not,
// there is nothing to guess.
func guessPeriod(served, upper time.Duration) (time.Duration, bool) {
	for _, l := range fitLengths {
		if l >= served+fitSlack {
			return l, l < upper
		}
	}
	return 0, false
}

// nextPeriod returns the natural length after l, at most upper, and whether it is still a guess
// (shorter than upper).
func nextPeriod(l, upper time.Duration) (time.Duration, bool) {
	for _, n := range fitLengths {
		if n > l {
			if n >= upper {
				return upper, false
			}
			return n, true
		}
	}
	return upper, false
}

// lengthen moves, under p.mu, a pair held to a guessed period (p.guess set) on to the next one
// from start (a 429 while held to it: the period is longer), keeping its allowance, and returns
// the window it is now held to, for the origin's prior.
func (p *Pair) lengthen(start int64) Window {
	n, w := p.win.allowance()
	next, still := nextPeriod(time.Duration(w), time.Duration(p.guess))
	p.win.reset(n, int64(next), start)
	own := Window{N: n, Length: next}
	if still {
		own.Upper = time.Duration(p.guess)
	} else {
		p.guess = 0
	}
	return own
}

// Guessing reports whether the window the pair is held to is a guess of a period (the shortest
// it may be, lengthened at each 429), and if so the window's upper bound: the span between the
// resets the guess was made from. A guess is the pool's "I do not know yet" for Capacity.
func (p *Pair) Guessing() (bool, time.Duration) {
	if p == nil {
		return false, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.guess != 0, time.Duration(p.guess)
}

// Held returns the window the pair is held to now, with its Upper when its length is a guess;
// zero when it is held to none.
func (p *Pair) Held() Window {
	if p == nil {
		return Window{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.win == nil {
		return Window{}
	}
	n, w := p.win.allowance()
	h := Window{N: n, Length: time.Duration(w)}
	if p.guess != 0 {
		h.Upper = time.Duration(p.guess)
	}
	return h
}
