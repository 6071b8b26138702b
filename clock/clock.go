package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers. Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current instant.
	Now() time.Time
	// NewTimer returns a Timer that delivers the time on its channel once d has elapsed.
	NewTimer(d time.Duration) Timer
	// AfterFunc returns a Timer that calls f, in its own goroutine for System, once d has
	// elapsed. Its C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer that waits use.
type Timer interface {
	// C returns the channel the firing time is delivered on.
	C() <-chan time.Time
	// Stop prevents the timer from firing and reports whether it was stopped before it fired.
	Stop() bool
	// Reset makes the timer fire once d has elapsed from now, whether it was pending, stopped or
	// had fired, and reports whether it was pending. For an AfterFunc timer, a false return means
	// f runs again; it does not wait for an earlier run of f to complete. After Reset of a channel
	// timer, its channel delivers no time from an earlier setting. Reset is how a waiter that waits
	// again and again (a watchdog) reuses one timer instead of making one per wait.
	Reset(d time.Duration) bool
}

// System is the Clock of the real world: time.Now and time.NewTimer.
var System Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer {
	return systemTimer{time.AfterFunc(d, f)}
}

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }

func (t systemTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// Sleep waits on c until d has passed or ctx is done, and returns ctx's error in the second case.
// A d <= 0 returns at once (nil, unless ctx is already done).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}
