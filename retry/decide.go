package retry

import (
	"errors"
	"net/http"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Decision is what the outcome of one attempt means for a retry layer.
type Decision struct {
	// Retry reports whether another attempt may succeed: the exit failed the request (transiently,
	// or for good: another exit may carry it), no exit was ready yet, the origin guard or a rate
	// limit held the request back. It is false for successes (whatever the origin answered: a 404
	// is the origin's word), for neutral outcomes (a 500 from the origin's own bug, the caller's
	// cancellation), for origin-scoped permanent failures, for an empty pool and for errors that did
	// not come from a transport.Transport.
	Retry bool
	// Wait is the least time before a retry can go out at all: when the origin has room next
	// through any exit, a probe or a token, when no exit was ready or none had a token
	// (pool.NoHealthyExitError.RoomIn, pool.ThrottledError.RoomIn; their RetryIn when RoomIn is
	// unknown), the origin guard's next probe (pool.OriginUnhealthyError.RetryIn), or an
	// origin-scoped failure's Retry-After. Zero means at once: the retry goes out through another
	// exit.
	Wait time.Duration
	// Verdict is how the transport classified the attempt. A refusal without an attempt (no exit,
	// origin unhealthy, throttled) has Class pool.ClassNotAttempted. Verdict.RetryAfter is the
	// origin's Retry-After for the exit that failed; the pair's breaker already keeps that exit away
	// for that long, so a retry through another exit need not wait it (Settings.WaitRetryAfter).
	Verdict pool.Verdict
	// Exit is the label of the exit that carried the attempt; empty when none did.
	Exit string
	// Origin is the origin the request was for: the transport's origin key when its error says it,
	// else the response URL's host (transport.OriginHost).
	Origin string
}

// Decide says what resp and err, as an http.Client over a transport.Transport returned them, mean
// for a retry. A response that did not come through a Transport is judged by its status alone:
// 429, 502, 503 and 504 are worth a retry (honouring Retry-After), anything else is not.
func Decide(resp *http.Response, err error) Decision {
	if err != nil {
		return decideError(err)
	}
	if resp == nil {
		return Decision{}
	}
	v, ok := transport.VerdictFromResponse(resp)
	if !ok {
		v = statusVerdict(resp)
	}
	d := DecideVerdict(v)
	if e := transport.ExitFromResponse(resp); e != nil {
		d.Exit = e.Label()
	}
	if resp.Request != nil && resp.Request.URL != nil {
		d.Origin = transport.OriginHost(resp.Request.URL)
	}
	return d
}

// DecideVerdict says what an attempt the transport classified as v means for a retry, whatever
// carried it: a response or an error.
//
//	outcome     scope          retry?  wait
//	success     any            no      -
//	neutral     any            no      -
//	transient   pair or exit   yes     0: another exit (v.RetryAfter is the failed exit's)
//	transient   origin         yes     v.RetryAfter
//	permanent   pair or exit   yes     0: the exit is parked, another carries the request
//	permanent   origin         no      -
func DecideVerdict(v pool.Verdict) Decision {
	d := Decision{Verdict: v}
	switch v.Outcome {
	case pool.Transient:
		d.Retry = true
		if v.Scope == pool.ScopeOrigin {
			d.Wait = v.RetryAfter
		}
	case pool.Permanent:
		d.Retry = v.Scope != pool.ScopeOrigin
	}
	return d
}

func decideError(err error) Decision {
	var (
		ae *transport.AttemptError
		nh *pool.NoHealthyExitError
		ou *pool.OriginUnhealthyError
		th *pool.ThrottledError
	)
	refused := Decision{Verdict: pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassNotAttempted}}
	switch {
	case errors.As(err, &ae):
		d := DecideVerdict(ae.Verdict)
		d.Exit, d.Origin = ae.Exit, ae.Origin
		return d
	case errors.As(err, &nh):
		refused.Origin = nh.Origin
		refused.Retry = nh.Exits > 0 // an empty pool stays empty
		refused.Wait = roomIn(nh.RoomIn, nh.RetryIn)
		return refused
	case errors.As(err, &ou):
		refused.Origin = ou.Origin
		refused.Retry, refused.Wait = true, ou.RetryIn
		return refused
	case errors.As(err, &th):
		refused.Origin = th.Origin
		refused.Retry = th.Err == nil // Err set: the caller gave up while it waited
		refused.Wait = roomIn(th.RoomIn, th.RetryIn)
		return refused
	}
	// Not the transport's: the caller's cancellation, a redirect policy, a malformed request, a
	// closed transport. Retrying cannot help.
	return Decision{Verdict: pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassError}}
}

// roomIn is a refusal's wait: when the origin has room next (room), else retryIn when that is
// unknown (0).
func roomIn(room, retryIn time.Duration) time.Duration {
	if room > 0 {
		return room
	}
	return retryIn
}

// statusVerdict judges a response that did not come through a Transport by its status alone.
func statusVerdict(resp *http.Response) pool.Verdict {
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		ra, _ := transport.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassError, RetryAfter: ra}
	}
	return pool.Verdict{Outcome: pool.Success}
}

// MovesOn reports whether the retry this decision calls for goes out through a fresh exit: an
// attempt went out and failed at its exit or its (exit, origin) pair, and an exit was ready to take
// the retry (no wait). Such retries need no growing backoff — the exit that failed is avoided
// (transport.ContextWithRetries), so the next attempt hammers nothing that failed — only a short,
// jittered pause (Delay). Refusals and failures the origin is blamed for do grow.
func (d Decision) MovesOn() bool {
	return d.Retry && d.Exit != "" && d.Wait == 0 && d.Verdict.Scope != pool.ScopeOrigin
}

// Delay is the backoff before retry number attempt (0 for the first) of a request that d decided
// to retry: the first step of Exponential when the retry moves on to a fresh exit (MovesOn), else
// Exponential(min, max, attempt, u). A wait d itself calls for (d.Wait) is the caller's to add.
func Delay(d Decision, min, max time.Duration, attempt int, u float64) time.Duration {
	if d.MovesOn() {
		attempt = 0
	}
	return Exponential(min, max, attempt, u)
}

// Exponential returns the exponential backoff with jitter before retry number attempt (0 for the
// first retry): d = min·2^attempt, capped at max, then a uniform draw in [d/2, d] taken from u, a
// number in [0, 1). Half the delay is certain, so waits still grow; the other half spreads
// requests that failed together. It returns 0 when min or max is not positive, and never more
// than max.
func Exponential(min, max time.Duration, attempt int, u float64) time.Duration {
	if min <= 0 || max <= 0 {
		return 0
	}
	d := min
	for i := 0; i < attempt && d < max; i++ {
		if d > max/2 {
			d = max
			break
		}
		d *= 2
	}
	d = minDuration(d, max)
	if u < 0 || u != u {
		u = 0
	}
	if u >= 1 {
		u = 1
	}
	half := d / 2
	return half + time.Duration(u*float64(d-half))
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}
