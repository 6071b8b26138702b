package pool

import (
	"time"

	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// takeTokens takes the tokens t's attempt needs — its exit's, its pair's and its origin's — all or
// none. Breaker permits are already held: a pair the breakers refuse never takes a token.
func (p *Pool) takeTokens(now time.Time, t *ticket) bool {
	if p.gate == nil {
		return true
	}
	var pairBucket *ratelimit.Bucket
	if t.pair != nil {
		pairBucket = t.pair.pace.Bucket()
	} else if t.origin.limited.get(t.exit.id) {
		if pr := t.origin.lookupPair(t.exit.id); pr != nil {
			pairBucket = pr.pace.Bucket()
		}
	}
	return ratelimit.Take(now, t.exit.bucket, pairBucket, t.origin.bucket)
}

// unacquire gives back the exit's and the pair's permits of a ticket whose tokens could not be
// taken (the origin guard's permit is kept for the next round).
func (p *Pool) unacquire(now time.Time, t *ticket) {
	p.inflight.add(t.exit.id, -1)
	t.pairPm.Release(now)
	t.exitPm.Release(now)
}

// adapt feeds a verdict to the pair's pace: a 429 or a challenge page cuts it, a success lets it
// grow back.
func (p *Pool) adapt(now time.Time, t *ticket, v Verdict) {
	if p.gate == nil {
		return
	}
	switch {
	case v.Class == ClassRateLimited || v.Class == ClassBlocked:
		pr := t.pair
		if pr == nil {
			var alive bool
			if pr, alive = p.pairFor(t.origin, t.exit); !alive {
				return
			}
		}
		pr.pace.Cut(now)
		t.origin.limited.set(t.exit.id, true)
	case v.Outcome == Success && t.pair != nil && t.pair.pace.Throttled():
		t.pair.pace.Grow(now)
		if t.pair.pace.Bucket() == nil {
			t.origin.limited.set(t.exit.id, false)
		}
	}
}
