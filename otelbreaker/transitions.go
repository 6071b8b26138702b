package otelbreaker

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// Breaker transitions reach StateChanged without a context, on the goroutine that caused them and
// just before that goroutine reports its attempt: a probe slot (OPEN → HALF_OPEN) is taken while the
// exit is picked, before AttemptStarted; a trip or a close happens when the verdict is applied,
// before AttemptFinished. pending holds the transitions for a moment so that the attempt can claim
// the ones that are its own — same breaker, same instant — and record them as span events.

// pendingSize bounds the transitions waiting to be claimed; the oldest is overwritten.
const pendingSize = 64

// pendingTTL is how long an unclaimed transition waits (in the instants of the breakers' clock)
// before a scan drops it: a lease expiry, a transition whose attempt's span is not recording.
const pendingTTL = 10 * time.Second

// finishSlack is how far a transition's instant may be from the attempt's end (At + Latency) and
// still be claimed by it: the end is computed from a monotonic latency, the transition's instant
// from the wall clock.
const finishSlack = time.Millisecond

type pendingTransitions struct {
	n    atomic.Int32 // entries in use: lets the request path skip the lock when there are none
	mu   sync.Mutex
	buf  [pendingSize]pendingEntry
	next int
}

type pendingEntry struct {
	used bool
	at   int64 // c.At in Unix nanoseconds
	c    pool.StateChange
}

// add keeps c until an attempt claims it, it expires, or newer ones push it out.
func (p *pendingTransitions) add(c pool.StateChange) {
	p.mu.Lock()
	e := &p.buf[p.next]
	if !e.used {
		p.n.Add(1)
	}
	*e = pendingEntry{used: true, at: c.At.UnixNano(), c: c}
	p.next = (p.next + 1) % pendingSize
	p.mu.Unlock()
}

// claim removes and passes to f, oldest first, the transitions of the attempt's pair, exit or
// origin whose instant is within slack of at, and that started (cooldown) is true for: the
// attempt was admitted as a probe, or false for: its verdict was applied. It drops transitions older
// than pendingTTL before at.
func (p *pendingTransitions) claim(a *pool.LeaseInfo, at time.Time, slack time.Duration, started bool, f func(pool.StateChange)) {
	if p.n.Load() == 0 {
		return
	}
	t := at.UnixNano()
	var mine [4]pool.StateChange // at most pair, exit and origin; more are rare
	out := mine[:0]
	p.mu.Lock()
	for k := range pendingSize {
		i := (p.next + k) % pendingSize // oldest first
		e := &p.buf[i]
		if !e.used {
			continue
		}
		switch {
		case e.at < t-int64(pendingTTL):
			e.used = false
			p.n.Add(-1)
		case abs(e.at-t) <= int64(slack) && belongs(&e.c, a) && (e.c.Cause == breaker.CauseCooldown) == started:
			out = append(out, e.c)
			e.used = false
			p.n.Add(-1)
		}
	}
	p.mu.Unlock()
	for _, c := range out {
		f(c)
	}
}

// belongs reports whether c is a transition of the attempt's pair, exit or origin breaker.
func belongs(c *pool.StateChange, a *pool.LeaseInfo) bool {
	switch c.Scope {
	case pool.ScopePair:
		return c.Exit == a.Exit && c.Origin == a.Origin
	case pool.ScopeExit:
		return c.Exit == a.Exit
	case pool.ScopeOrigin:
		return c.Origin == a.Origin
	}
	return false
}

func abs(d int64) int64 {
	if d < 0 {
		return -d
	}
	return d
}
