package clock

import "time"

// Clock tells the time and makes timers. Implementations must be safe for concurrent use.
type Clock interface {
	// Now returns the current instant.
	Now() time.Time
	// NewTimer returns a Timer that delivers the time on its channel once d has elapsed.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that waits use.
type Timer interface {
	// C returns the channel the firing time is delivered on.
	C() <-chan time.Time
	// Stop prevents the timer from firing and reports whether it was stopped before it fired.
	Stop() bool
}

// System is the Clock of the real world: time.Now and time.NewTimer.
var System Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time { return t.t.C }
func (t systemTimer) Stop() bool          { return t.t.Stop() }
