package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// windowBudget allows n takes per window of length w, the windows starting at start, start+w, …:
// the origin's own fixed window as a pair learned it from its Retry-Afters (learn.go). It is a
// Source, so that the pool peeks at it and takes from it as from any bucket. Safe for concurrent
// use.
type windowBudget struct {
	mu    sync.Mutex
	n     int   // takes allowed per window
	w     int64 // window length, ns
	start int64 // the current window's start, Unix ns
	used  int   // takes in the current window
}

var _ Source = (*windowBudget)(nil)

// roll moves the window forward to the one that holds t. Before start (the rest a 429 asked for)
// it stays put.
func (b *windowBudget) roll(t int64) {
	if end := b.start + b.w; t >= end {
		b.start += (t - b.start) / b.w * b.w
		b.used = 0
	}
}

// Ready implements Source.
func (b *windowBudget) Ready(now time.Time) (bool, time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := now.UnixNano()
	b.roll(t)
	if t < b.start {
		return false, time.Unix(0, b.start)
	}
	if b.used < b.n {
		return true, time.Time{}
	}
	return false, time.Unix(0, b.start+b.w)
}

// Take implements Source.
func (b *windowBudget) Take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := now.UnixNano()
	b.roll(t)
	if t < b.start || b.used >= b.n {
		return false
	}
	b.used++
	return true
}

// Return implements Source.
func (b *windowBudget) Return(time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 {
		b.used--
	}
}

// Limit implements Source: the budget as a rate.
func (b *windowBudget) Limit() rate.Limit {
	b.mu.Lock()
	defer b.mu.Unlock()
	return rate.Limit(float64(b.n) / time.Duration(b.w).Seconds())
}

// reset starts the budget over: n per w from start.
func (b *windowBudget) reset(n int, w, start int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n, b.w, b.start, b.used = max(n, 1), w, start, 0
}

// allowance returns n and w.
func (b *windowBudget) allowance() (int, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n, b.w
}

// raise allows n per window from now on, keeping the current window's count.
func (b *windowBudget) raise(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n = max(n, 1)
}
