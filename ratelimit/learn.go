package ratelimit

import (
	"time"

	"golang.org/x/time/rate"
)

// Learning a pair's pace.
//
// A 429 with a Retry-After says two things: the pair has used up what the origin allows it, and
// when the origin's window resets. An unpaced pair's successes since its count began (the
// previous reset, or its first success after it), spread over the span from that success to the
// coming reset, are what the origin allows per window: Limited paces the pair at that rate, burst
// 1, so that no window sees more than the origin allows. Such an estimate errs high, not low (a
// count that began late makes the span short), and costs at most another 429.
//
// A paced pair that still meets a 429 runs just above the origin's limit: it slows by
// PacedDecrease. A paced pair that meets none for RaiseAfter windows (a window being the longest
// Retry-After it has seen, at least a second) speeds up by RaiseStep, so that a site that allows
// more is found out. The pace settles just under the origin's limit, with about one 429 every
// RaiseAfter windows — against one every window for a pair that is only rested.
const (
	// PacedDecrease is the factor a 429 multiplies a paced pair's rate by.
	PacedDecrease = 0.9
	// RaiseAfter is how many windows a paced pair goes without a 429 before its rate rises.
	RaiseAfter = 10
	// RaiseStep is the share of its rate a quiet paced pair gains.
	RaiseStep = 0.1
	// recount: an unpaced pair's count that spans more than this many windows starts again, so
	// that an estimate spans about one window of traffic, not the quiet hours before it.
	recount = 2
)

// Limited applies a 429 at now. With a Retry-After (the origin's window resets then) it learns the
// pair's pace as described above, or, for a pair with nothing counted yet, takes prior (the pace the
// origin's other pairs learned; 0 for none). Without one it cuts the pace as Cut does, starting from
// prior when the pair was not paced. It returns the pair's rate afterwards (rate.Inf while unpaced)
// and whether the pair learned it from its own count, so that the caller can keep the origin's
// prior.
func (p *Pair) Limited(now time.Time, retryAfter time.Duration, prior rate.Limit) (rate.Limit, bool) {
	if p == nil || p.cfg.Disabled {
		return p.Bucket().Limit(), false
	}
	if retryAfter <= 0 {
		if p.Bucket() == nil && prior > 0 {
			return p.set(now, prior), false
		}
		return p.Cut(now), false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	t := now.UnixNano()
	reset := t + int64(retryAfter)
	p.window = max(p.window, int64(retryAfter), int64(time.Second))
	var est rate.Limit
	own := false
	switch b := p.bucket.Load(); {
	case b != nil:
		est = b.lim.Limit() * PacedDecrease
	case p.sent > 0 && p.first != 0 && reset > p.first:
		est = rate.Limit(float64(p.sent) / time.Duration(reset-p.first).Seconds())
		own = true
	default:
		est = prior
	}
	p.since, p.first, p.sent, p.learned = reset, 0, 0, t
	if est <= 0 {
		return p.Bucket().Limit(), false // nothing known yet: the breaker rests the pair for the Retry-After
	}
	return p.setLocked(now, est), own
}

// Served counts a success at now towards an unpaced pair's window, and raises the rate of a pair
// paced for RaiseAfter windows without a 429. A pair paced only by cuts (429s without a
// Retry-After) grows back as Grow does.
func (p *Pair) Served(now time.Time) {
	if p == nil || p.cfg.Disabled {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.window == 0 && p.bucket.Load() != nil {
		p.growLocked(now) // paced by cuts alone (429s without Retry-After, no window learned): AIMD
		return
	}
	t := now.UnixNano()
	if t < p.since {
		return // an attempt the origin answered before its window reset
	}
	if p.first == 0 || (p.window > 0 && t-p.first > recount*p.window) {
		p.first, p.sent = t, 0
	}
	p.sent++
	b := p.bucket.Load()
	if b == nil || p.window == 0 || t-p.learned < RaiseAfter*p.window {
		return
	}
	p.learned = t
	r := b.lim.Limit() * (1 + RaiseStep)
	if r >= p.ceiling && !p.static {
		p.bucket.Store(nil) // above anything an adaptive pair runs at: unpaced again
		return
	}
	b.lim.SetLimitAt(now, min(r, p.ceiling))
}

// Challenged applies a challenge page at now: a paced pair slows by PacedDecrease (a site that
// challenges an IP may be reacting to its pace); an unpaced one is left alone — the breaker rests
// it, and a ban says nothing of the rate the site allows.
func (p *Pair) Challenged(now time.Time) rate.Limit {
	if p == nil || p.cfg.Disabled {
		return p.Bucket().Limit()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	b := p.bucket.Load()
	if b == nil || p.static {
		return b.Limit()
	}
	r := max(b.lim.Limit()*PacedDecrease, p.cfg.Floor)
	b.lim.SetLimitAt(now, r)
	return r
}

// set paces the pair at r from now.
func (p *Pair) set(now time.Time, r rate.Limit) rate.Limit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.setLocked(now, r)
}

func (p *Pair) setLocked(now time.Time, r rate.Limit) rate.Limit {
	r = min(max(r, p.cfg.Floor), p.ceiling)
	if b := p.bucket.Load(); b != nil {
		b.lim.SetLimitAt(now, r)
		return r
	}
	p.bucket.Store(&Bucket{lim: rate.NewLimiter(r, 1)})
	return r
}
