package clock

import (
	"slices"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told to. Timers fire, in order of their deadlines (and of
// their making, for equal deadlines), when Advance or Set moves the clock past them: a channel
// timer by a send on its buffered channel, an AfterFunc timer by calling its func synchronously,
// in the goroutine that moved the clock, after the Fake's lock is released. The zero value is not usable; call NewFake.
// A Fake is safe for concurrent use.
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
	var due []*fakeTimer
	kept := f.timers[:0]
	for _, tm := range f.timers {
		if !tm.deadline.After(t) {
			due = append(due, tm)
		} else {
			kept = append(kept, tm)
		}
	}
	clear(f.timers[len(kept):])
	f.timers = kept
	f.mu.Unlock()
	slices.SortStableFunc(due, func(a, b *fakeTimer) int { return a.deadline.Compare(b.deadline) })
	for _, tm := range due {
		if tm.f != nil {
			tm.f()
			continue
		}
		tm.ch <- t // buffered: never blocks
	}
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
	deadline time.Time
	f        func() // AfterFunc's; nil for a channel timer
	ch       chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, tm := range f.timers {
		if tm == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			return true
		}
	}
	return false
}
