package pool

import (
	"errors"
	"fmt"
	"time"
)

// ErrNoHealthyExit is matched (errors.Is) by the error Pick returns when no exit is ready for the
// origin. The concrete error is a *NoHealthyExitError.
var ErrNoHealthyExit = errors.New("pool: no healthy exit")

// ErrOriginUnhealthy is matched by the error Pick returns when the origin itself is failing through
// most exits at once. The concrete error is an *OriginUnhealthyError.
var ErrOriginUnhealthy = errors.New("pool: origin unhealthy")

// ErrThrottled is matched by the error Pick returns when rate limits held a request back and it
// did not go: the limits fail fast, the request's deadline would pass before the next token, or
// the caller gave up while it waited. The concrete error is a *ThrottledError.
var ErrThrottled = errors.New("pool: throttled")

// NoHealthyExitError says that no exit could take a request for Origin, and how long until the
// soonest one may be probed. A retry layer should wait RetryIn before trying again.
type NoHealthyExitError struct {
	Origin string
	// Exits is how many exits the request could use when it was refused: the pool's, or with a
	// Want (Want, its canonical form) the ones that match it — every one of them cooling.
	Exits   int
	Want    string
	RetryIn time.Duration // until the soonest exit becomes probeable; 0 if unknown
	// RoomIn is how long until the origin has room next through any exit — a probe or a token
	// (Pool.NextSlotAt), from what the refused pick looked at; 0 if unknown. A scheduler waits
	// it, or serves other origins meanwhile.
	RoomIn time.Duration
}

// Error names the origin, the exits in the pool (or matching the Want) and the time until the
// soonest probe.
func (e *NoHealthyExitError) Error() string {
	if e.Exits == 0 {
		return fmt.Sprintf("pool: no healthy exit for %s: the pool has no exits", e.Origin)
	}
	if e.Want != "" {
		return fmt.Sprintf("pool: no healthy exit for %s: %d exits match %s, none ready, soonest probe in %v",
			e.Origin, e.Exits, e.Want, e.RetryIn.Round(time.Millisecond))
	}
	return fmt.Sprintf("pool: no healthy exit for %s: %d exits, none ready, soonest probe in %v",
		e.Origin, e.Exits, e.RetryIn.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrNoHealthyExit) true.
func (e *NoHealthyExitError) Is(target error) bool { return target == ErrNoHealthyExit }

// OriginUnhealthyError says that the origin, not the exits, is failing: most of the exits that
// tried it recently failed in the same way. Picks fail fast until the origin's guard lets a probe
// through and it succeeds.
type OriginUnhealthyError struct {
	Origin       string
	FailingExits int           // distinct exits that failed the origin in the episode
	RetryIn      time.Duration // until the origin may be probed
}

// Error names the origin, how many exits failed it and the time until its next probe.
func (e *OriginUnhealthyError) Error() string {
	return fmt.Sprintf("pool: origin %s unhealthy: %d exits failed it at once, next probe in %v",
		e.Origin, e.FailingExits, e.RetryIn.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrOriginUnhealthy) true.
func (e *OriginUnhealthyError) Is(target error) bool { return target == ErrOriginUnhealthy }

// ThrottledError says that no token was there for a request to Origin, which bucket lacked it
// (ScopeExit, ScopePair or ScopeOrigin), and how long until the soonest one. Err is the caller's
// context error when the caller gave up while waiting.
type ThrottledError struct {
	Origin  string
	Scope   Scope
	RetryIn time.Duration // until the soonest token of a bucket of Scope
	// RoomIn is how long until the origin has room next through any exit: the soonest token, or
	// an exit's probe when one comes sooner (Pool.NextSlotAt), from what the refused pick looked
	// at; 0 if unknown. A scheduler waits it, or serves other origins meanwhile.
	RoomIn time.Duration
	Err    error
}

// Error names the bucket that lacked a token, the origin and the time until the next token,
// followed by the caller's context error when there is one.
func (e *ThrottledError) Error() string {
	msg := fmt.Sprintf("pool: throttled: no %s token for %s, next in %v", e.Scope, e.Origin, e.RetryIn.Round(time.Millisecond))
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrThrottled) true.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// Unwrap returns the caller's context error, if any.
func (e *ThrottledError) Unwrap() error { return e.Err }
