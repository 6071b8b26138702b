package breaker

import "sync"

// Failure reasons are a handful of class names repeated across every breaker, so a breaker keeps
// a pointer to one shared copy of its last reason rather than the string itself: a pointer is half
// a string, and the breakers of a pool of many pairs are most of its memory.

// maxReasons bounds the shared copies; a reason beyond them gets a copy of its own.
const maxReasons = 4096

var reasons struct {
	sync.RWMutex
	m map[string]*string
}

// reason returns the shared copy of r.
func reason(r string) *string {
	reasons.RLock()
	p := reasons.m[r]
	reasons.RUnlock()
	if p != nil {
		return p
	}
	reasons.Lock()
	defer reasons.Unlock()
	if p = reasons.m[r]; p != nil {
		return p
	}
	p = &r
	if len(reasons.m) < maxReasons {
		if reasons.m == nil {
			reasons.m = make(map[string]*string)
		}
		reasons.m[r] = p
	}
	return p
}

// lastReason is the last failure's reason; "" if none.
func (b *Breaker) lastReason() string {
	if b.lastFail == nil {
		return ""
	}
	return *b.lastFail
}
