package pool

import (
	"math"
	"time"
)

// An origin with many pairs out of CLOSED — thousands of exits banned or cooling down for one
// site — would make every pick that draws one of them look the pair up and lock its breaker, only
// to learn that it is still cooling down. The origin caches instead the earliest instant any of
// them may admit a request, and picks trust it while nothing has changed.

// dueRefresh is how often, at most, an origin recomputes its cache (on the pool's clock).
const dueRefresh = time.Second

// dueCache says that no pair of the origin out of CLOSED admits a request before at (Unix ns), as
// long as the origin's count of pair transitions is still changes.
type dueCache struct {
	changes uint64
	at      int64
}

// pairsNotBefore reports, from the cache, that every pair of o out of CLOSED refuses requests
// until the instant it returns; ok is false when the cache cannot tell (stale, spent or none).
func (o *originState) pairsNotBefore(now time.Time) (until time.Time, ok bool) {
	c := o.due.Load()
	if c == nil || c.changes != o.changes.Load() || now.UnixNano() >= c.at {
		return time.Time{}, false
	}
	return time.Unix(0, c.at), true
}

// maybeRefreshDue recomputes o's cache at most once per dueRefresh: in the background, or at once
// WithInlineSweep (as sweeps are).
func (p *Pool) maybeRefreshDue(now time.Time, o *originState) {
	last := o.dueChecked.Load()
	if now.UnixNano()-last < int64(dueRefresh) || !o.dueChecked.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	if p.inline {
		o.refreshDue(now)
		return
	}
	p.sweeps.Add(1)
	go func() {
		defer p.sweeps.Done()
		o.refreshDue(now)
	}()
}

// refreshDue computes the cache at now from every pair out of CLOSED. The transition count is
// read first: a transition during the scan leaves the result stale at once. Nothing is cached
// while some pair would admit a request now.
func (o *originState) refreshDue(now time.Time) {
	changes := o.changes.Load()
	earliest := int64(math.MaxInt64)
	o.mu.RLock()
	defer o.mu.RUnlock()
	for id, pr := range o.pairs {
		if !o.open.get(id) {
			continue
		}
		ok, at := pr.b.Ready(now)
		if ok || at.IsZero() {
			return
		}
		earliest = min(earliest, at.UnixNano())
	}
	if earliest > now.UnixNano() {
		o.due.Store(&dueCache{changes: changes, at: earliest})
	}
}
