package transport

import (
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
)

// watchdog is an attempt's one timer (the header timeout, then the body's stall watchdog), with
// the func it calls bound once: it is kept across attempts (Transport.watchdogs) and re-armed with
// Reset, so that a request that neither times out nor stalls makes no timer and no func value.
//
// The transport keeps stopped watchdogs in a bounded free list rather than a sync.Pool: a
// sync.Pool empties at every garbage collection and, under the race detector, drops one Put in
// four at random, which would make a request's allocations a matter of chance (and
// TestBodyPaceAddsNoAllocations with them). The list holds at most watchdogsKept (a watchdog is
// about 160 bytes with its timer and func); more requests in flight than that allocate the excess.
//
// A watchdog goes back for another attempt only when the attempt's last Stop of it found it
// pending, and no earlier Stop found it firing (attempt.tainted): then no call of fire is under
// way but one that has already read its owner — the attempt re-arms it only from its own fire, or
// when it is disarmed, which only a fire that has read its owner does (watch) — so no fire meant
// for one attempt can reach the next. A watchdog that fired is left to the garbage collector.
type watchdog struct {
	t     clock.Timer
	fire  func() // w.fired, bound once
	owner atomic.Pointer[attempt]
}

// watchdogsKept is how many stopped watchdogs a transport keeps for its next attempts.
const watchdogsKept = 1024

// fired is the timer's func: the owner's tick.
func (w *watchdog) fired() {
	if a := w.owner.Load(); a != nil {
		a.tick()
	}
}

// startTimerLocked arms the attempt's timer, due in d: its watchdog, re-armed, or one from the
// transport's pool, or a new one. a.mu is held.
func (a *attempt) startTimerLocked(d time.Duration) {
	if a.wd != nil {
		a.wd.t.Reset(d)
		return
	}
	select {
	case w := <-a.t.watchdogs:
		w.owner.Store(a)
		a.wd = w
		w.t.Reset(d)
		return
	default:
	}
	w := &watchdog{}
	w.fire = w.fired
	w.owner.Store(a)
	a.wd = w
	w.t = a.t.clock.AfterFunc(d, w.fire)
}

// pauseTimerLocked stops the attempt's timer for now (a later Read may arm it again). a.mu is
// held.
func (a *attempt) pauseTimerLocked() {
	if a.wd != nil && !a.wd.t.Stop() {
		a.tainted = true // it fired, and its fire may still be on its way
	}
}

// stopTimer stops the attempt's timer for good, and gives the watchdog back to the transport
// when no fire of it can be under way.
func (a *attempt) stopTimer() {
	a.mu.Lock()
	a.stopped = true
	if w := a.wd; w != nil {
		a.wd = nil
		if w.t.Stop() && !a.tainted {
			w.owner.Store(nil)
			select {
			case a.t.watchdogs <- w:
			default: // full: left to the garbage collector
			}
		}
	}
	a.mu.Unlock()
}
