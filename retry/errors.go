package retry

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// ResponseError is a response the transport judged a failure of the exit that carried it: a 429,
// a challenge page, a 407 from the proxy, a 502/503/504. Policy.CheckRetry returns it beside its
// decision to retry, so a client that runs out of retries reports what the last one was (go-
// retryablehttp wraps it: "giving up after 5 attempt(s): retry: via …").
type ResponseError struct {
	Exit       string // the exit's label
	Origin     string
	StatusCode int
	Verdict    pool.Verdict
}

// Error names the exit, the origin, the status and how the transport classified it.
func (e *ResponseError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "retry: via %s to %s: %d %s: %s", e.Exit, e.Origin, e.StatusCode, http.StatusText(e.StatusCode), e.Verdict.Class)
	if e.Verdict.Detector != "" {
		fmt.Fprintf(&b, " (%s)", e.Verdict.Detector)
	}
	if e.Verdict.RetryAfter > 0 {
		fmt.Fprintf(&b, ", retry after %v", e.Verdict.RetryAfter)
	}
	return b.String()
}

// GiveUpError is what Policy.CheckRetry returns when it stops before the client's RetryMax
// because waiting could not help in time: no exit (or the origin, or a token) will be ready
// within the longest a retry may wait. The typical case is a pool whose every exit the proxy
// provider refuses (407): each exit is parked for breaker.Settings.ParkFor, and the soonest probe
// is minutes away. It is also what CheckRetry returns when Settings.Budget refuses the retry: then
// Budget is set, Wait and MaxWait are zero, and errors.Is(err, ErrBudgetSpent) holds.
//
// Its message lists the request's failed attempts as pool.FormatGiveUp writes them, the same
// words collyext's give-up uses. errors.As finds Err's types (*pool.NoHealthyExitError and the
// like) and those of every listed failure (*transport.AttemptError, *transport.ProxyConnectError,
// *ResponseError) through it.
type GiveUpError struct {
	Origin  string
	Wait    time.Duration // until something may be tried again
	MaxWait time.Duration // the longest a retry may wait
	// Budget is the budget that refused the retry (its Stats count the refusal); nil when the
	// give-up is for a wait.
	Budget *Budget
	// Failures are the request's failed attempts, oldest first (the last pool.MaxFailedAttempts),
	// as recorded in its *pool.Retries; empty without one. Each Err is the *transport.AttemptError
	// (through the client's wrapping) or the *ResponseError the attempt came back with.
	Failures []pool.FailedAttempt
	Err      error // the refusal that stopped the retries, as the client returned it
}

// Error says what gave up, why, and which attempts failed, without credentials: exits appear by
// label.
func (e *GiveUpError) Error() string {
	head := fmt.Sprintf("retry: giving up on %s: nothing ready for %v, longer than the %v a retry may wait",
		e.Origin, e.Wait.Round(time.Millisecond), e.MaxWait)
	if e.Budget != nil {
		head = fmt.Sprintf("retry: giving up on %s: retry budget spent (%v)", e.Origin, e.Budget)
	}
	return pool.FormatGiveUp(head, e.Failures, e.Err)
}

// Is reports whether target is ErrBudgetSpent and the budget refused the retry.
func (e *GiveUpError) Is(target error) bool { return target == ErrBudgetSpent && e.Budget != nil }

// Unwrap returns the refusal, then the failures' errors, for errors.Is and errors.As.
func (e *GiveUpError) Unwrap() []error { return pool.GiveUpCauses(e.Err, e.Failures) }
