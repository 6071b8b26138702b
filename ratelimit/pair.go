package ratelimit

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// Pair is the pace of one (exit, origin) pair: its configured per-pair bucket, if any, and the
// adaptation of that pace to the origin's 429s and challenge pages (AIMD). A pair with neither a
// configured limit nor a recent cut has no bucket (Bucket returns nil) and costs nothing. Safe for
// concurrent use.
type Pair struct {
	cfg     *Adaptive
	ceiling rate.Limit // the rate the pair recovers to
	static  bool       // a configured per-pair limit: the bucket stays at the ceiling

	mu     sync.Mutex // serialises Cut, Grow and the learning below
	bucket atomic.Pointer[Bucket]

	// What the pair learns of the origin's window (learn.go), under mu; Unix nanoseconds.
	since   int64         // the last reset a Retry-After announced; 0: none yet
	sent    int64         // successes since then
	longest int64         // the longest Retry-After seen
	learned int64         // when the window was last learned or raised
	struck  int64         // the last 429 while held to a window
	win     *windowBudget // the window the pair is held to; nil: none
	first   int64         // the first of the sent successes
	guess   int64         // the window is a guess of the origin's period, at most this long (period.go); 0: none

	// What the pair learns of a window the origin does not announce (unannounced.go), under mu.
	tracked int64   // when the pair began noting its successes (its first 429, or a distrust); 0: not yet
	sure    bool    // the window it is held to is one it learned for sure: recent is no longer kept
	inRun   bool    // the last verdict noted was a 429 without Retry-After
	runAt   int64   // when the current run of 429s began; 0: none yet
	runSent int64   // successes since then
	runLast int64   // the latest 429 of the current run
	runHigh int64   // the longest run of 429s seen (runLast - runAt): a block's length (period.go)
	runOne  int64   // the first success since the current run began
	recent  []int64 // the instants of its latest successes, oldest first (at most recentCap)
}

// Bucket returns the pair's bucket now: nil while the pair runs unthrottled.
func (p *Pair) Bucket() *Bucket {
	if p == nil {
		return nil
	}
	return p.bucket.Load()
}

// Cut applies a 429 or a challenge at now: the pair's rate is multiplied by Decrease, down to
// Floor. A pair that had no bucket gets one, starting at Decrease × its ceiling, burst 1. It
// returns the new rate. With adaptation disabled it does nothing and returns the current rate.
func (p *Pair) Cut(now time.Time) rate.Limit {
	if p == nil || p.cfg.Disabled {
		return p.Bucket().Limit()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cutLocked(now)
}

func (p *Pair) cutLocked(now time.Time) rate.Limit {
	b := p.bucket.Load()
	if b != nil && b.src != nil {
		return b.Limit() // held to a window: Limited adjusts it
	}
	if b == nil {
		r := max(p.ceiling*rate.Limit(p.cfg.Decrease), p.cfg.Floor)
		p.bucket.Store(&Bucket{lim: rate.NewLimiter(r, 1)})
		return r
	}
	r := max(b.lim.Limit()*rate.Limit(p.cfg.Decrease), p.cfg.Floor)
	b.setLimit(now, r)
	return r
}

// Grow applies a success at now: the pair's rate rises by Step × its ceiling, up to the ceiling.
// A pair back at its ceiling without a configured limit drops its bucket and runs unthrottled
// again (its exit's bucket, if any, still paces it). It returns the new rate (rate.Inf when
// unthrottled).
func (p *Pair) Grow(now time.Time) rate.Limit {
	b := p.Bucket()
	if b == nil || p.cfg.Disabled {
		return b.Limit()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.growLocked(now)
}

func (p *Pair) growLocked(now time.Time) rate.Limit {
	b := p.bucket.Load()
	if b == nil {
		return rate.Inf
	}
	if b.src != nil {
		return b.Limit()
	}
	r := b.lim.Limit() + p.ceiling*rate.Limit(p.cfg.Step)
	if r < p.ceiling {
		b.setLimit(now, r)
		return r
	}
	if !p.static {
		p.bucket.Store(nil)
		return rate.Inf
	}
	b.setLimit(now, p.ceiling)
	return p.ceiling
}

// Throttled reports whether the pair has a bucket that runs below its ceiling (a cut not yet
// grown back).
func (p *Pair) Throttled() bool {
	b := p.Bucket()
	return b != nil && b.Limit() < p.ceiling
}
