package ratelimit

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Bucket is one token bucket: a *rate.Limiter with a peek that takes nothing, or a Source kept
// elsewhere (SourceBucket). A nil *Bucket is no limit: always ready, never takes. Safe for
// concurrent use.
//
// Callers read their clock before they take, so concurrent takes reach the limiter out of order.
// rate.Limiter moves its clock back to an earlier instant it is given and then credits the same
// interval again on the next, later one: under load (a goroutine descheduled between reading the
// clock and taking) a bucket over-admits. A Bucket therefore never hands its limiter an instant
// before the latest one it has used (mu, last): a late take is made at that latest instant.
type Bucket struct {
	lim *rate.Limiter
	src Source // when set, lim is nil and the tokens are the source's

	mu   sync.Mutex // held across each call that moves lim's clock
	last time.Time  // the latest instant handed to lim
}

// lock takes b's mutex and returns the instant to hand its limiter for a call at now: now, or the
// latest instant already used when now is earlier. The caller unlocks b.mu.
func (b *Bucket) lock(now time.Time) time.Time {
	b.mu.Lock()
	if now.Before(b.last) {
		return b.last
	}
	b.last = now
	return now
}

// setLimit sets the bucket's rate at now (rate.Limiter.SetLimitAt on a monotone instant).
func (b *Bucket) setLimit(now time.Time, r rate.Limit) {
	t := b.lock(now)
	b.lim.SetLimitAt(t, r)
	b.mu.Unlock()
}

// NewBucket returns a full bucket shaped by l, or nil for the zero Limit.
func NewBucket(l Limit) *Bucket {
	if l.IsZero() {
		return nil
	}
	return &Bucket{lim: rate.NewLimiter(l.Rate, l.Burst)}
}

// Ready reports whether a token is there at now, without taking it. When it is not, at is when
// one will be (if nobody takes it first).
func (b *Bucket) Ready(now time.Time) (ok bool, at time.Time) {
	if b == nil {
		return true, time.Time{}
	}
	if b.src != nil {
		return b.src.Ready(now)
	}
	tokens := b.lim.TokensAt(now)
	if tokens >= 1 {
		return true, time.Time{}
	}
	return false, now.Add(tokenWait(b.lim.Limit(), 1-tokens))
}

// Limit returns the bucket's current rate (rate.Inf for a nil bucket).
func (b *Bucket) Limit() rate.Limit {
	if b == nil {
		return rate.Inf
	}
	if b.src != nil {
		return b.src.Limit()
	}
	return b.lim.Limit()
}

// tokenWait is how long rate takes to make missing tokens.
func tokenWait(r rate.Limit, missing float64) time.Duration {
	if r <= 0 {
		return time.Duration(1<<63 - 1)
	}
	if r == rate.Inf {
		return 0
	}
	return time.Duration(missing / float64(r) * float64(time.Second))
}

// Take takes one token from each non-nil bucket at now, all or none, and reports whether it did.
// Nothing is left taken when it fails, so a caller may peek, choose, Take, and on failure choose
// again without losing tokens. With one bucket it is rate.Limiter.AllowN; with several it reserves
// each in turn (rate.Limiter.ReserveN) and cancels the ones it holds when a later one has no token
// now. It does not allocate: the reservations stay on the stack.
//
// Buckets backed by a Source are taken from first; when a local bucket then has no token, their
// tokens are given back (Source.Return).
func Take(now time.Time, a, b, c *Bucket) bool {
	if a.source() != nil || b.source() != nil || c.source() != nil {
		sa, sb, sc := a.source(), b.source(), c.source()
		if !takeSources(now, sa, sb, sc) {
			return false
		}
		if !takeLocal(now, a.local(), b.local(), c.local()) {
			returnSources(now, sa, sb, sc)
			return false
		}
		return true
	}
	return takeLocal(now, a, b, c)
}

// source returns b's Source, nil for a nil or local bucket.
func (b *Bucket) source() Source {
	if b == nil {
		return nil
	}
	return b.src
}

// local returns b if it is a local bucket, nil otherwise.
func (b *Bucket) local() *Bucket {
	if b == nil || b.src != nil {
		return nil
	}
	return b
}

// takeLocal is Take for buckets that are all local (or nil). Each bucket is locked only around
// its own reservation or cancellation (never two at once, so no lock order to keep), at an
// instant no earlier than any it has seen.
func takeLocal(now time.Time, a, b, c *Bucket) bool {
	// Compact the buckets that apply into x, y, z.
	var x, y, z *Bucket
	for _, bk := range [...]*Bucket{a, b, c} {
		switch {
		case bk == nil:
		case x == nil:
			x = bk
		case y == nil:
			y = bk
		default:
			z = bk
		}
	}
	if x == nil {
		return true
	}
	if y == nil {
		t := x.lock(now)
		ok := x.lim.AllowN(t, 1)
		x.mu.Unlock()
		return ok
	}
	// Written out, not looped over an array of reservations: that would move them to the heap.
	rx, ok := x.reserve(now)
	if !ok {
		return false
	}
	ry, ok := y.reserve(now)
	if !ok {
		x.cancel(now, &rx)
		return false
	}
	if z == nil {
		return true
	}
	if _, ok := z.reserve(now); !ok {
		y.cancel(now, &ry)
		x.cancel(now, &rx)
		return false
	}
	return true
}

// reserve takes one token from b at now if one is there (a reservation with no delay), at an
// instant no earlier than b's latest; a reservation that would have to wait is given back at once.
// The reservation is returned by value, so that it stays on the caller's stack.
func (b *Bucket) reserve(now time.Time) (rate.Reservation, bool) {
	t := b.lock(now)
	r := b.lim.ReserveN(t, 1)
	ok := r.OK() && r.DelayFrom(t) <= 0
	if !ok {
		r.CancelAt(t)
	}
	b.mu.Unlock()
	return *r, ok
}

// cancel gives back a reservation made on b, at an instant no earlier than b's latest.
func (b *Bucket) cancel(now time.Time, r *rate.Reservation) {
	t := b.lock(now)
	r.CancelAt(t)
	b.mu.Unlock()
}
