package transport

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrNoHealthyExit is matched (errors.Is) by the error RoundTrip returns when no exit is ready for
// the request's origin. The concrete error is a *NoHealthyExitError.
var ErrNoHealthyExit = errors.New("transport: no healthy exit")

// ErrOriginUnhealthy is matched by the error RoundTrip returns when the origin itself is failing
// through most exits at once. The concrete error is an *OriginUnhealthyError.
var ErrOriginUnhealthy = errors.New("transport: origin unhealthy")

// ErrClosed is returned by RoundTrip after Close.
var ErrClosed = errors.New("transport: closed")

// NoHealthyExitError says that no exit could take a request for Origin, and how long until the
// soonest one may be probed. A retry layer should wait RetryIn before trying again.
type NoHealthyExitError struct {
	Origin  string
	Exits   int           // exits in the pool when the request was refused
	RetryIn time.Duration // until the soonest exit becomes probeable; 0 if unknown
}

func (e *NoHealthyExitError) Error() string {
	if e.Exits == 0 {
		return fmt.Sprintf("transport: no healthy exit for %s: the pool has no exits", e.Origin)
	}
	return fmt.Sprintf("transport: no healthy exit for %s: %d exits, none ready, soonest probe in %v",
		e.Origin, e.Exits, e.RetryIn.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrNoHealthyExit) true.
func (e *NoHealthyExitError) Is(target error) bool { return target == ErrNoHealthyExit }

// OriginUnhealthyError says that the origin, not the exits, is failing: most of the exits that
// tried it recently failed in the same way. Requests fail fast until the origin's own breaker lets a
// probe through and it succeeds.
type OriginUnhealthyError struct {
	Origin       string
	FailingExits int           // distinct exits that failed the origin in the episode
	RetryIn      time.Duration // until the origin may be probed
}

func (e *OriginUnhealthyError) Error() string {
	return fmt.Sprintf("transport: origin %s unhealthy: %d exits failed it at once, next probe in %v",
		e.Origin, e.FailingExits, e.RetryIn.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrOriginUnhealthy) true.
func (e *OriginUnhealthyError) Is(target error) bool { return target == ErrOriginUnhealthy }

// ProxyConnectError is a CONNECT the proxy answered with something other than 200: 407 when it
// rejected the credentials. The per-exit base transport returns it from OnProxyConnectResponse, so
// classification never matches on error strings.
type ProxyConnectError struct {
	Exit       string // the exit's label
	StatusCode int
}

func (e *ProxyConnectError) Error() string {
	return fmt.Sprintf("transport: exit %s: proxy refused CONNECT: %d %s", e.Exit, e.StatusCode, http.StatusText(e.StatusCode))
}

// AttemptError is the error RoundTrip returns when an attempt failed without a response. It names
// the exit that carried the attempt and how the failure was classified, and wraps the cause.
type AttemptError struct {
	Exit    string // the exit's label
	Origin  string
	Verdict Verdict
	Err     error
}

func (e *AttemptError) Error() string {
	return fmt.Sprintf("transport: via %s to %s: %s: %v", e.Exit, e.Origin, e.Verdict.Class, e.Err)
}

// Unwrap returns the cause.
func (e *AttemptError) Unwrap() error { return e.Err }

// Timeout reports whether the attempt timed out (a dial, TLS, CONNECT or header timeout), so that
// *url.Error.Timeout() answers for it.
func (e *AttemptError) Timeout() bool {
	var ne interface{ Timeout() bool }
	return errors.As(e.Err, &ne) && ne.Timeout()
}

// ErrThrottled is matched (errors.Is) by the error RoundTrip returns when rate limits held a
// request back and it did not go: the gate fails fast, the request's deadline would pass before
// the next token, or the caller gave up while it waited. The concrete error is a *ThrottledError.
var ErrThrottled = errors.New("transport: throttled")

// ThrottledError says that no token was there for a request to Origin, which bucket lacked it, and
// how long until the soonest one. Err is the caller's context error when the caller gave up while
// waiting.
type ThrottledError struct {
	Origin  string
	Scope   string // "exit", "pair" or "origin"
	RetryIn time.Duration
	Err     error
}

func (e *ThrottledError) Error() string {
	msg := fmt.Sprintf("transport: throttled: no %s token for %s, next in %v", e.Scope, e.Origin, e.RetryIn.Round(time.Millisecond))
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrThrottled) true.
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// Unwrap returns the caller's context error, if any.
func (e *ThrottledError) Unwrap() error { return e.Err }
