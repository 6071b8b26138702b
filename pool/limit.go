package pool

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Adaptive concurrency per (exit, origin). A site that answers slower as more requests reach it
// at once — a loaded backend, or a WAF that tarpits an IP sending too many at a time — says so
// before it starts refusing; a pool that keeps every worker on it only makes each answer slower.
// With WithAdaptiveConcurrency each pair gets a concurrency limit learned from its latency, the
// gradient controller of Envoy's adaptive concurrency filter (itself after Netflix's
// concurrency-limits Gradient2):
//
//	gradient = clamp(tolerance × no-load latency ÷ answer's latency, ½, 2)
//	limit    = limit × (1 − smoothing) + limit × gradient × smoothing
//
// so the limit grows while answers come within tolerance × the no-load latency, shrinks when they
// take longer, and settles where they take about that. Gradient2 compares the answers with a
// long moving average of themselves; that average follows a latency that grows slowly with load,
// and a pool that started loaded never saw the unloaded latency at all. Envoy measures the
// no-load latency (its minRTT) instead, pinning the concurrency to a minimum for a moment now and
// then; so does this controller:
//
//   - The no-load latency is learned from answers that were alone in flight for their pair (and
//     an answer faster than it lowers it at once). A limit that shrank gives such answers by
//     itself: a site that became slower for everyone, load or not, drives the limit down to where
//     its answers are alone, which re-learns the no-load latency, and the limit grows again.
//   - A pair starts pinned at a limit of 1 until its first answer, and a pair that has given no
//     answer alone for noLoadMaxAge is pinned again until it does (Envoy's minRTT window): the
//     no-load latency is never taken from answers that came loaded, and one learned long ago
//     cannot hold the limit down or up for ever.
//   - While fewer than half the limit are in flight, it does not grow (Gradient2's app-limited
//     rule): a limit that light traffic never tested would not hold back a burst.
//
// The limit is kept per origin in the same 64 slots as the in-flight counts (load.go): the pick
// compares one with the other, two atomic loads, and passes over a pair at its limit as it passes
// over one with no token; once counted in flight, an attempt that finds its pair over the limit
// (others passed the same peek at once) gives its place back as one whose token was taken. The controller runs on the report, under the slot's own lock. In a tier
// of more than 64 exits the exits that share a slot share a limit, which then bounds their
// in-flight together: tighter, never looser.
const (
	// DefaultConcurrencyTolerance is how many times its no-load latency a pair's answers may take
	// before its limit shrinks (Envoy's minRTT buffer, Gradient2's rttTolerance 1.5: 2 leaves room
	// for the noise of one answer).
	DefaultConcurrencyTolerance = 2.0
	// DefaultInitialConcurrency is a pair's limit once its first answer came.
	DefaultInitialConcurrency = 8
	// DefaultMaxConcurrency caps a pair's limit.
	DefaultMaxConcurrency = 256
	// concSmoothing is the weight of one answer's gradient in the limit (Gradient2's smoothing).
	concSmoothing = 0.2
	// noLoadWeight is the weight of an answer alone in flight in the no-load latency.
	noLoadWeight = 0.25
	// noLoadMaxAge is how long a pair's no-load latency is trusted without a new answer alone in
	// flight (Envoy's min_rtt_calc_interval, 60 s).
	noLoadMaxAge = 60 * time.Second
)

// ConcurrencySettings tune WithAdaptiveConcurrency. A zero field keeps its default.
type ConcurrencySettings struct {
	// Tolerance is how many times its no-load latency a pair's answers may take before its limit
	// shrinks: the limit settles where answers take about that. Default
	// DefaultConcurrencyTolerance; at least 1.
	Tolerance float64
	// Initial is a pair's limit once its first answer came (until then it is 1: that answer gives
	// the pair's no-load latency). Default DefaultInitialConcurrency.
	Initial int
	// Max caps a pair's limit. Default DefaultMaxConcurrency; at least Initial. The least a limit
	// goes down to is 1.
	Max int
}

// WithAdaptiveConcurrency gives each (exit, origin) pair a concurrency limit learned from its
// latency (see ConcurrencySettings): a pair whose answers slow down as more of its requests are in
// flight gets fewer at a time, and a pick passes over a pair at its limit as over one with no
// token — when every ready pair is at its limit the pick is throttled (*ThrottledError, ScopePair,
// RetryIn about one no-load answer) or, with WithRateLimits, waits that long. Off by default.
func WithAdaptiveConcurrency(s ConcurrencySettings) Option {
	return optionFunc(func(c *config) error {
		if s.Tolerance == 0 {
			s.Tolerance = DefaultConcurrencyTolerance
		}
		if s.Initial == 0 {
			s.Initial = DefaultInitialConcurrency
		}
		if s.Max == 0 {
			s.Max = max(DefaultMaxConcurrency, s.Initial)
		}
		switch {
		case math.IsNaN(s.Tolerance) || math.IsInf(s.Tolerance, 0) || s.Tolerance < 1:
			return fmt.Errorf("pool: WithAdaptiveConcurrency: Tolerance %v, want a finite number at least 1", s.Tolerance)
		case s.Initial < 1:
			return fmt.Errorf("pool: WithAdaptiveConcurrency: Initial %d, want at least 1", s.Initial)
		case s.Max < s.Initial || s.Max > math.MaxInt32:
			return fmt.Errorf("pool: WithAdaptiveConcurrency: Max %d, want at least Initial (%d)", s.Max, s.Initial)
		}
		c.concurrency = &s
		return nil
	})
}

// originLimits is an origin's concurrency limits, one per load slot.
type originLimits struct {
	set   ConcurrencySettings
	slots [loadSlots]limitSlot
}

// limitSlot is the limit of the pairs of one load slot. limit is what a pick reads; the rest is
// the controller's, under mu.
type limitSlot struct {
	limit  atomic.Int32
	wait   atomic.Int64 // the no-load latency in ns, for a pick that finds the slot full
	mu     sync.Mutex
	est    float64 // the limit, unrounded
	noLoad float64 // the no-load latency, seconds; 0 before the first answer
	// noLoadAt is when an answer alone in flight last came (Unix ns); pinned that the slot waits
	// for one at a limit of 1.
	noLoadAt int64
	pinned   bool
}

// newOriginLimits returns the limits of a new origin, or nil when the pool has none.
func newOriginLimits(s *ConcurrencySettings) *originLimits {
	if s == nil {
		return nil
	}
	l := &originLimits{set: *s}
	for i := range l.slots {
		// Pinned from the start, as Envoy's controller starts in its minRTT window: the first
		// answer comes alone and gives the no-load latency, and the limit is Initial from then on.
		sl := &l.slots[i]
		sl.limit.Store(1)
		sl.est, sl.pinned = float64(s.Initial), true
	}
	return l
}

// full reports whether the pair of exit id holds as many attempts in flight as its limit allows,
// and if so about when one may end: one no-load answer from now. A nil l has no limits.
func (l *originLimits) full(now time.Time, load *originLoad, id uint32) (bool, time.Time) {
	if l == nil {
		return false, time.Time{}
	}
	sl := &l.slots[id%loadSlots]
	if load.get(id) < sl.limit.Load() {
		return false, time.Time{}
	}
	return true, now.Add(max(time.Duration(sl.wait.Load()), time.Millisecond))
}

// over reports whether the pair of exit id, its attempt being picked already counted in flight,
// is over its limit: picks that peeked at it together (full) took more than it had room for. A
// nil l has no limits.
func (l *originLimits) over(load *originLoad, id uint32) bool {
	return l != nil && load.get(id) > l.slots[id%loadSlots].limit.Load()
}

// observe runs the controller of the pair of exit id on one answer that took d, with inflight of
// its slot's attempts in flight while it ended (itself included). A nil l has no limits.
func (l *originLimits) observe(now time.Time, id uint32, d time.Duration, inflight int32) {
	if l == nil || d <= 0 {
		return
	}
	s := d.Seconds()
	sl := &l.slots[id%loadSlots]
	sl.mu.Lock()
	defer sl.mu.Unlock()
	n := now.UnixNano()
	switch {
	case sl.noLoad == 0 || s < sl.noLoad:
		sl.noLoad, sl.noLoadAt = s, n
	case inflight <= 1:
		sl.noLoad += (s - sl.noLoad) * noLoadWeight
		sl.noLoadAt = n
	}
	sl.wait.Store(int64(sl.noLoad * float64(time.Second)))
	if sl.pinned {
		if sl.noLoadAt != n {
			return // still waiting for an answer alone in flight
		}
		sl.pinned = false
	} else if n-sl.noLoadAt > int64(noLoadMaxAge) {
		sl.pinned = true // no answer alone for too long: make room for one
		sl.limit.Store(1)
		return
	}
	gradient := min(max(l.set.Tolerance*sl.noLoad/s, 0.5), 2)
	if gradient > 1 && float64(inflight) < sl.est/2 {
		gradient = 1 // app-limited: a limit light traffic never tested does not grow
	}
	sl.est = min(max(sl.est*(1-concSmoothing+gradient*concSmoothing), 1), float64(l.set.Max))
	sl.limit.Store(int32(sl.est))
}

// limitOf returns the limit the pairs of exit id's slot have now with o (0: none).
func (l *originLimits) limitOf(id uint32) int {
	if l == nil {
		return 0
	}
	return int(l.slots[id%loadSlots].limit.Load())
}
