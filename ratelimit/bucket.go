package ratelimit

import (
	"time"

	"golang.org/x/time/rate"
)

// Bucket is one token bucket: a *rate.Limiter with a peek that takes nothing. A nil *Bucket is
// no limit: always ready, never takes. Safe for concurrent use.
type Bucket struct {
	lim *rate.Limiter
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

// maxScopes is how many buckets one request can need: its exit's, its pair's and its origin's.
const maxScopes = 3

// Take takes one token from each non-nil bucket at now, all or none, and reports whether it did.
// Nothing is left taken when it fails, so a caller may peek, choose, Take, and on failure choose
// again without losing tokens. With one bucket it does not allocate (rate.Limiter.AllowN); with
// several it reserves each (rate.Limiter.ReserveN, one small allocation apiece) so that it can
// cancel the ones it took when a later one has no token.
func Take(now time.Time, buckets ...*Bucket) bool {
	var live [maxScopes]*Bucket
	n := 0
	for _, b := range buckets {
		if b != nil && n < maxScopes {
			live[n] = b
			n++
		}
	}
	switch n {
	case 0:
		return true
	case 1:
		return live[0].lim.AllowN(now, 1)
	}
	var taken [maxScopes]*rate.Reservation
	for i := range n {
		r := live[i].lim.ReserveN(now, 1)
		if !r.OK() || r.DelayFrom(now) > 0 {
			r.CancelAt(now)
			for j := range i {
				taken[j].CancelAt(now)
			}
			return false
		}
		taken[i] = r
	}
	return true
}
