package ratelimit

import (
	"time"

	"golang.org/x/time/rate"
)

// Source is a token bucket kept somewhere else: a fleet's shared per-exit budget that a store leases
// in batches (package store/redis), so that the provider's terms hold across processes, not per
// process. Limits.ExitSource makes one per limited exit; SourceBucket wraps one as a *Bucket, which
// the transport then peeks at and takes from exactly as it does a local one.
//
// Its methods run on the request path, under no lock, from many goroutines at once: they must be
// safe for concurrent use, must not make a network round trip (work that needs one is handed to a
// goroutine of the source's own), and should not allocate when a token is there. Only Take may
// wait, and only for tokens already on their way (a lease in flight), for a bounded time the
// source documents: a limit that fails fast refuses only a request the source cannot serve.
type Source interface {
	// Ready reports whether Take at now would succeed, taking nothing — or would wait for tokens
	// on their way. When it would not, at is the soonest instant worth asking again.
	Ready(now time.Time) (ok bool, at time.Time)
	// Take takes one token at now, or none, and reports whether it did. With no token at hand but
	// tokens on their way it may wait for them, boundedly.
	Take(now time.Time) bool
	// Return gives back a token Take took at now: Take calls it when another bucket of the same
	// all-or-none take had no token.
	Return(now time.Time)
	// Limit is the budget's rate, for reports.
	Limit() rate.Limit
}

// SourceBucket returns a bucket that draws its tokens from s; nil for a nil s.
func SourceBucket(s Source) *Bucket {
	if s == nil {
		return nil
	}
	return &Bucket{src: s}
}

// takeSources takes one token from each non-nil source, all or none, and reports whether it did.
// Written out, like Take, so that nothing escapes to the heap.
func takeSources(now time.Time, a, b, c Source) bool {
	if a != nil && !a.Take(now) {
		return false
	}
	if b != nil && !b.Take(now) {
		returnSources(now, a, nil, nil)
		return false
	}
	if c != nil && !c.Take(now) {
		returnSources(now, a, b, nil)
		return false
	}
	return true
}

func returnSources(now time.Time, a, b, c Source) {
	if a != nil {
		a.Return(now)
	}
	if b != nil {
		b.Return(now)
	}
	if c != nil {
		c.Return(now)
	}
}
