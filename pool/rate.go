package pool

import (
	"time"

	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// takeTokens takes the tokens t's attempt needs — its exit's, its pair's and its origin's — all or
// none. Breaker permits are already held: a pair the breakers refuse never takes a token.
func (p *Pool) takeTokens(now time.Time, t *ticket) bool {
	if t.origin.limits.over(&t.origin.load, t.id) {
		return false // others passed the same peek at its concurrency limit first (limit.go)
	}
	var pairBucket *ratelimit.Bucket
	if t.origin.limited.get(t.id) { // a pair without the bit has no bucket
		pairBucket = t.origin.pacer(t.id).Bucket()
	}
	var exitBucket *ratelimit.Bucket
	if p.set.Load().anyBucket { // most pools limit no exit: then the exit is not even loaded
		exitBucket = t.exit.bucket
	}
	return ratelimit.Take(now, exitBucket, pairBucket, t.origin.bucket)
}

// unacquire gives back the exit's and the pair's permits of a ticket whose tokens could not be
// taken (the origin guard's permit is kept for the next round).
func (p *Pool) unacquire(now time.Time, t *ticket) {
	p.endAttempt(t)
	t.pairPm.Release(now)
	if t.pairPm.Probe() {
		t.pair.probeBack(now)
	}
	t.exitPm.Release(now)
}

// adapt feeds a verdict to the pair's pace: a 429 teaches it the origin's window (or cuts it), a
// challenge page slows a paced pair, a success counts towards its window.
func (p *Pool) adapt(now time.Time, t *ticket, v Verdict) {
	switch {
	case v.Class == ClassRateLimited:
		pr := t.pair
		if pr == nil {
			var alive bool
			if pr, alive = p.pairFor(t.origin, t.exit); !alive {
				return
			}
		}
		pc := pr.pacer()
		if pc == nil {
			if pc = p.gate.NewPair(t.exit.exit.label); pc == nil {
				return // nothing limits or adapts pairs
			}
			pc = t.origin.setPace(t.id, pc)
		}
		var own ratelimit.Window
		if v.RetryAfter <= 0 && !p.limits {
			// Without configured limits nothing cuts a pair's rate: a 429 without Retry-After
			// teaches it the window its runs of 429s are spaced by (ratelimit/unannounced.go).
			own = pc.Unannounced(now, t.origin.pace.prior())
		} else {
			own = pc.Limited(now, v.RetryAfter, t.origin.pace.prior())
		}
		if !own.IsZero() {
			t.origin.pace.learn(own)
		}
		t.origin.limited.set(t.id, pc.Bucket() != nil)
		t.origin.learning.set(t.id, true)
	case v.Class == ClassBlocked:
		if t.pair != nil {
			t.origin.pacer(t.id).Challenged(now)
		}
	case v.Outcome == Success:
		// A pair that has met a 429 keeps counting its window, whether or not the attempt looked
		// at its breaker; the bit table spares the others a lookup.
		if !t.origin.learning.get(t.id) {
			return
		}
		pc := t.origin.pacer(t.id)
		pc.Served(now)
		if pc.Bucket() == nil && t.origin.limited.get(t.id) {
			t.origin.limited.set(t.id, false)
		}
	}
}
