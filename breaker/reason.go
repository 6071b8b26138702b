package breaker

import (
	"sync"
	"sync/atomic"
)

// Failure reasons are a handful of class names repeated across every breaker, so a breaker keeps
// a pointer to one shared copy of its last reason rather than the string itself: a pointer is half
// a string, and the breakers of a pool of many pairs are most of its memory.

// maxReasons bounds the shared copies; a reason beyond them gets a copy of its own.
const maxReasons = 4096

// reasons maps a reason to its shared copy. A sync.Map: after the first failure of each class,
// every failure of every breaker only reads it, without a lock.
var (
	reasons     sync.Map // string → *string
	reasonCount atomic.Int32
)

// reason returns the shared copy of r. Only a reason seen for the first time allocates.
func reason(r string) *string {
	if p, ok := reasons.Load(r); ok {
		return p.(*string)
	}
	return newReason(r)
}

func newReason(r string) *string {
	s := r // copied here, so that only a new reason moves to the heap
	if reasonCount.Load() >= maxReasons {
		return &s
	}
	p, loaded := reasons.LoadOrStore(r, &s)
	if !loaded {
		reasonCount.Add(1)
	}
	return p.(*string)
}

// lastReason is the last failure's reason; "" if none.
func (b *Breaker) lastReason() string {
	if b.lastFail == nil {
		return ""
	}
	return *b.lastFail
}
