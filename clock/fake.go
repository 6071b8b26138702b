package clock

import (
	"slices"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to. Timers fire, in order of their deadlines (and of
// their making or last Reset, for equal deadlines), when Advance or Set moves the clock past them:
// a channel timer by a send on its buffered channel, an AfterFunc timer by calling its func
// synchronously, in the goroutine that moved the clock, after the Fake's lock is released. The
// zero value is not usable; call NewFake. A Fake is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

// NewFake returns a Fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start} }

// Now returns the fake clock's current reading.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d and fires every timer whose deadline has been reached.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the clock to t (backwards too: state machines must tolerate it) and fires every timer
// whose deadline is not after t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	var due []dueTimer
	kept := f.timers[:0]
	for _, tm := range f.timers {
		if !tm.deadline.After(t) {
			due = append(due, dueTimer{tm, tm.deadline, tm.seq})
		} else {
			kept = append(kept, tm)
		}
	}
	clear(f.timers[len(kept):])
	f.timers = kept
	f.mu.Unlock()
	slices.SortStableFunc(due, func(a, b dueTimer) int { return a.deadline.Compare(b.deadline) })
	for _, d := range due {
		if d.tm.f != nil {
			d.tm.f()
			continue
		}
		f.mu.Lock()
		if d.tm.seq == d.seq { // not Reset since it fell due: a Reset timer delivers no stale time
			select {
			case d.tm.ch <- t: // buffered, and drained by Reset: never blocks
			default:
			}
		}
		f.mu.Unlock()
	}
}

// dueTimer is a timer Set fires, with its deadline and its Reset count when it fell due.
type dueTimer struct {
	tm       *fakeTimer
	deadline time.Time
	seq      uint64
}

// Timers returns how many timers are waiting to fire. Tests use it to know a goroutine has started
// waiting before they advance the clock.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// NewTimer returns a timer that fires when the clock reaches Now()+d; d <= 0 fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	tm := &fakeTimer{clock: f, ch: make(chan time.Time, 1)}
	f.mu.Lock()
	tm.deadline = f.now.Add(d)
	if d <= 0 {
		now := f.now
		f.mu.Unlock()
		tm.ch <- now
		return tm
	}
	f.timers = append(f.timers, tm)
	f.mu.Unlock()
	return tm
}

// AfterFunc returns a timer that calls f when the clock reaches Now()+d; d <= 0 calls f at once,
// in a new goroutine (as time.AfterFunc does).
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	tm := &fakeTimer{clock: f, f: fn}
	f.mu.Lock()
	tm.deadline = f.now.Add(d)
	if d <= 0 {
		f.mu.Unlock()
		go fn()
		return tm
	}
	f.timers = append(f.timers, tm)
	f.mu.Unlock()
	return tm
}

type fakeTimer struct {
	clock    *Fake
	deadline time.Time // guarded by clock.mu, as is seq
	seq      uint64    // how many times Reset was called
	f        func()    // AfterFunc's; nil for a channel timer
	ch       chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.removeLocked(t)
}

// Reset makes the timer fire when the clock reaches Now()+d, pending again whether it was pending,
// stopped or had fired, and reports whether it was pending. A channel timer's channel is drained
// first, and a time it fell due for before the Reset is not delivered. d <= 0 fires at once: a
// channel timer by a send, an AfterFunc timer by calling its func in a new goroutine. As with
// time.Timer, an AfterFunc timer whose func is running (or about to be called by Set) when it is
// Reset runs its func again at the new deadline.
func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.clock
	f.mu.Lock()
	pending := f.removeLocked(t)
	t.seq++
	if t.f == nil {
		select {
		case <-t.ch:
		default:
		}
	}
	t.deadline = f.now.Add(d)
	if d <= 0 {
		if t.f == nil {
			t.ch <- f.now // drained above: never blocks
		}
		f.mu.Unlock()
		if t.f != nil {
			go t.f()
		}
		return pending
	}
	f.timers = append(f.timers, t)
	f.mu.Unlock()
	return pending
}

// removeLocked takes t off the list of waiting timers and reports whether it was on it. f.mu is
// held.
func (f *Fake) removeLocked(t *fakeTimer) bool {
	for i, tm := range f.timers {
		if tm == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			return true
		}
	}
	return false
}
