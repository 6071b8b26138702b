package sim

import "time"

// gobreaker's defaults (sony/gobreaker/v2 Settings{}): trip when consecutive failures exceed 5,
// stay OPEN for 60 s, then admit MaxRequests = 1 probe in HALF_OPEN; Interval 0 never clears
// CLOSED counts (a success resets the consecutive count anyway).
const (
	gbConsecutive = 5
	gbTimeout     = 60 * time.Second
	gbMaxRequests = 1
)

const (
	gbClosed = iota
	gbOpen
	gbHalfOpen
)

// gbBreaker replays sony/gobreaker/v2's state machine on the simulation's clock (gobreaker reads
// time.Now itself, so the library cannot run on a virtual clock). Results from an older
// generation are ignored, as gobreaker does.
type gbBreaker struct {
	state    int
	gen      uint64
	fails    int
	inFlight int
	expiry   time.Time
}

func (b *gbBreaker) current(now time.Time) {
	if b.state == gbOpen && !now.Before(b.expiry) {
		b.setState(gbHalfOpen, now)
	}
}

func (b *gbBreaker) setState(s int, now time.Time) {
	b.state, b.fails, b.inFlight = s, 0, 0
	b.gen++
	if s == gbOpen {
		b.expiry = now.Add(gbTimeout)
	}
}

// allow reports whether a request may go, its generation, and when refused how long until a
// probe may go.
func (b *gbBreaker) allow(now time.Time) (gen uint64, ok bool, retryIn time.Duration) {
	b.current(now)
	switch b.state {
	case gbOpen:
		return 0, false, b.expiry.Sub(now)
	case gbHalfOpen:
		if b.inFlight >= gbMaxRequests {
			return 0, false, time.Second
		}
	}
	b.inFlight++
	return b.gen, true, 0
}

func (b *gbBreaker) report(now time.Time, gen uint64, ok bool) {
	b.current(now)
	if gen != b.gen {
		return
	}
	b.inFlight--
	switch b.state {
	case gbClosed:
		if ok {
			b.fails = 0
		} else if b.fails++; b.fails > gbConsecutive {
			b.setState(gbOpen, now)
		}
	case gbHalfOpen:
		if ok {
			b.setState(gbClosed, now) // consecutive successes ≥ MaxRequests (1)
		} else {
			b.setState(gbOpen, now)
		}
	}
}
