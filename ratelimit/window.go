package ratelimit

import (
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// windowBudget allows at most n takes in any span of length w, and none before start (the rest a
// 429 asked for): the origin's window as a pair learned it from its Retry-Afters (learn.go), kept
// as a sliding log of the pair's own takes. A take is given back to the budget w after it was
// made, so that the pair's next slot opens when its oldest take leaves the window — where the
// origin's own log (a sliding window) frees it — and the pairs of an origin come free one after
// another instead of all at one reset. Against an origin that counts over fixed windows (the clock
// minute) the log is as safe: n in any span of w is never more than n in one fixed window, and its
// rate is the same n per w.
//
// Budgets of more than maxLog takes per window count over fixed windows from start instead (start,
// start+w, …), so that a pair holds at most maxLog instants. It is a Source, so that the pool peeks
// at it and takes from it as from any bucket. Safe for concurrent use.
type windowBudget struct {
	mu    sync.Mutex
	n     int     // takes allowed per window
	w     int64   // window length, ns
	start int64   // no take before this, Unix ns; with fixed windows, the current window's start
	log   []int64 // the takes of the last w, oldest first (n ≤ maxLog)
	used  int     // takes in the current fixed window (n > maxLog)
}

// maxLog is the largest budget kept as a sliding log.
const maxLog = 256

var _ Source = (*windowBudget)(nil)

func (b *windowBudget) sliding() bool { return b.n <= maxLog }

// roll forgets the takes that have left the window at t (sliding), or moves the fixed window
// forward to the one that holds t. Before start it stays put.
func (b *windowBudget) roll(t int64) {
	if b.sliding() {
		i := 0
		for i < len(b.log) && b.log[i] <= t-b.w {
			i++
		}
		if i > 0 {
			b.log = append(b.log[:0], b.log[i:]...)
		}
		return
	}
	if end := b.start + b.w; t >= end {
		b.start += (t - b.start) / b.w * b.w
		b.used = 0
	}
}

// free reports, under b.mu and after roll(t), whether a take at t is allowed, and if not when one
// will be.
func (b *windowBudget) free(t int64) (bool, int64) {
	if t < b.start {
		return false, b.start
	}
	if b.sliding() {
		if len(b.log) < b.n {
			return true, 0
		}
		return false, b.log[len(b.log)-b.n] + b.w
	}
	if b.used < b.n {
		return true, 0
	}
	return false, b.start + b.w
}

// Ready implements Source.
func (b *windowBudget) Ready(now time.Time) (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := now.UnixNano()
	b.roll(t)
	if ok, at := b.free(t); !ok {
		return false, time.Unix(0, at)
	}
	return true, time.Time{}
}

// Take implements Source.
func (b *windowBudget) Take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := now.UnixNano()
	b.roll(t)
	if ok, _ := b.free(t); !ok {
		return false
	}
	if !b.sliding() {
		b.used++
		return true
	}
	b.log = append(b.log, t)
	if l := len(b.log); l > 1 && b.log[l-2] > t {
		slices.Sort(b.log) // now went backwards
	}
	return true
}

// Return implements Source: the newest take is given back.
func (b *windowBudget) Return(time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.sliding() {
		if b.used > 0 {
			b.used--
		}
		return
	}
	if len(b.log) > 0 {
		b.log = b.log[:len(b.log)-1]
	}
}

// Limit implements Source: the budget as a rate.
func (b *windowBudget) Limit() rate.Limit {
	b.mu.Lock()
	defer b.mu.Unlock()
	return rate.Limit(float64(b.n) / time.Duration(b.w).Seconds())
}

// reset holds the budget to n per w, no take before start. The takes of the log stay in it: the
// origin still counts them.
func (b *windowBudget) reset(n int, w, start int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n, b.w, b.start, b.used = max(n, 1), w, start, 0
	if !b.sliding() {
		b.log = nil
	}
}

// seed counts in the sliding log the takes at ts (sorted) that fall in the window before start.
func (b *windowBudget) seed(ts []int64, start int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.sliding() {
		return
	}
	for _, t := range ts {
		if t > start-b.w && t <= start {
			b.log = append(b.log, t)
		}
	}
	if len(b.log) > b.n {
		b.log = append(b.log[:0], b.log[len(b.log)-b.n:]...)
	}
}

// allowance returns n and w.
func (b *windowBudget) allowance() (int, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n, b.w
}

// raise allows n per window from now on, keeping the takes counted so far.
func (b *windowBudget) raise(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	was := b.sliding()
	b.n = max(n, 1)
	if was && !b.sliding() {
		b.used, b.log = len(b.log), nil
	}
}
