package ratelimit

import (
	"time"

	"golang.org/x/time/rate"
)

// Bucket is one token bucket: a *rate.Limiter with a peek that takes nothing, or a Source kept
// elsewhere (SourceBucket). A nil *Bucket is no limit: always ready, never takes. Safe for
// concurrent use.
type Bucket struct {
	lim *rate.Limiter
	src Source // when set, lim is nil and the tokens are the source's
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

// takeLocal is Take for buckets that are all local (or nil).
func takeLocal(now time.Time, a, b, c *Bucket) bool {
	// Compact the buckets that apply into x, y, z.
	var x, y, z *rate.Limiter
	for _, bk := range [...]*Bucket{a, b, c} {
		switch {
		case bk == nil:
		case x == nil:
			x = bk.lim
		case y == nil:
			y = bk.lim
		default:
			z = bk.lim
		}
	}
	if y == nil {
		return x == nil || x.AllowN(now, 1)
	}
	// Written out, not looped over an array of *rate.Reservation: that would move them to the heap.
	rx := x.ReserveN(now, 1)
	if !rx.OK() || rx.DelayFrom(now) > 0 {
		rx.CancelAt(now)
		return false
	}
	ry := y.ReserveN(now, 1)
	if !ry.OK() || ry.DelayFrom(now) > 0 {
		ry.CancelAt(now)
		rx.CancelAt(now)
		return false
	}
	if z == nil {
		return true
	}
	rz := z.ReserveN(now, 1)
	if !rz.OK() || rz.DelayFrom(now) > 0 {
		rz.CancelAt(now)
		ry.CancelAt(now)
		rx.CancelAt(now)
		return false
	}
	return true
}
