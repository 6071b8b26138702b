package retry

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// DefaultMaxWait is the longest a retry waits when neither Settings.MaxWait nor the client says
// otherwise: go-retryablehttp's own default RetryWaitMax.
const DefaultMaxWait = 30 * time.Second

// Settings tune a Policy. The zero value is the recommended configuration.
type Settings struct {
	// MaxWait caps every wait before a retry: the backoff, the soonest probe, Retry-After. When
	// something will not be ready within it, CheckRetry gives up at once with a *GiveUpError instead
	// of retrying into the same refusal. Zero means the max the client passes to Backoff (its
	// RetryWaitMax), and DefaultMaxWait until Backoff has first been called. Negative is an error.
	MaxWait time.Duration
	// WaitRetryAfter makes a response's Retry-After a floor on the wait before the next retry even
	// though that retry goes out through another exit. By default a Retry-After is taken as the
	// origin's judgement of the exit that got it — the transport keeps that (exit, origin) pair OPEN
	// at least that long — and the retry moves to another exit at once; when no other exit is
	// ready, the wait for the soonest probe covers the Retry-After. Set it for origins whose
	// Retry-After throttles the client as a whole.
	WaitRetryAfter bool
	// Clock tells the time and makes the timers PrepareRetry waits on. Default clock.System. Use the
	// pool's clock (pool.WithClock, Pool.Clock) so that soonest-probe times and waits agree.
	Clock clock.Clock
	// Rand returns a uniform float64 in [0, 1) for backoff jitter; it must be safe for concurrent
	// use. Default math/rand/v2.Float64.
	Rand func() float64
	// Logger, when set, logs each retry CheckRetry allows at Debug and each give-up at Warn (exits
	// by label, never credentials). Default: no logging.
	Logger *slog.Logger
	// Budget, when set, bounds the retries of all the requests it sees together (see Budget):
	// CheckRetry deposits for each request's first attempt and withdraws for each retry it allows,
	// and gives up with a *GiveUpError matching ErrBudgetSpent when the budget has no retry left.
	// PrepareRetry marks a request's retries (in its context) so that they deposit nothing: wire
	// all three hooks. Default nil: no budget, only the client's RetryMax bounds the retries.
	Budget *Budget
}

// Policy holds go-retryablehttp hooks that understand the transport: CheckRetry decides, Backoff
// says how long the client sleeps, PrepareRetry waits out what the backoff could not know (the
// soonest probe after a "no healthy exit"). Their method values are plain funcs assignable to
// retryablehttp.CheckRetry, retryablehttp.Backoff and retryablehttp.PrepareRetry:
//
//	client.CheckRetry = p.CheckRetry
//	client.Backoff = p.Backoff
//	client.PrepareRetry = p.PrepareRetry
//
// and each logical request's context must come from transport.ContextWithRetries, whose
// *pool.Retries holds what the request's attempts share: the exits that failed it, its failed
// attempts, the instant the next may go. A Policy keeps no per-request state of its own. It is
// safe for concurrent use; give each client its own when their RetryWaitMax differ
// (Settings.MaxWait).
type Policy struct {
	s         Settings
	clientMax atomic.Int64 // the max the client last passed to Backoff
}

// New validates s and returns a Policy.
func New(s Settings) (*Policy, error) {
	if s.MaxWait < 0 {
		return nil, fmt.Errorf("retry: Settings.MaxWait = %v: must not be negative", s.MaxWait)
	}
	if s.Clock == nil {
		s.Clock = clock.System
	}
	if s.Rand == nil {
		s.Rand = rand.Float64
	}
	return &Policy{s: s}, nil
}

// Settings returns the policy's settings, defaults filled in.
func (p *Policy) Settings() Settings { return p.s }

// maxWait is the longest a retry may wait.
func (p *Policy) maxWait() time.Duration {
	if p.s.MaxWait > 0 {
		return p.s.MaxWait
	}
	if m := time.Duration(p.clientMax.Load()); m > 0 {
		return m
	}
	return DefaultMaxWait
}

// CheckRetry has the shape of retryablehttp.CheckRetry. It stops on the caller's cancellation
// (returning ctx.Err()) and wherever Decide says a retry cannot help; then the client returns what
// it got. It retries the exit's failures, transient or permanent, through another exit, and
// refusals (no healthy exit, origin unhealthy, throttled) once they may clear. It records each
// failed attempt in the request's *pool.Retries (transport.RetriesFromContext) and notes there
// the instant a refusal lets the retry go (Retries.WaitUntil), for PrepareRetry; or it gives up
// with a *GiveUpError when that wait exceeds the longest allowed, or when Settings.Budget has no
// retry left (errors.Is(err, ErrBudgetSpent)). A failed response comes back
// with a *ResponseError beside the decision to retry, so that running out of retries reports it.
// An error from the request's ResponseHandler is not the transport's and is not retried: wrap
// CheckRetry to retry it.
func (p *Policy) CheckRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if b := p.s.Budget; b != nil && firstAttempt(ctx, resp, err) {
		b.Deposit()
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	d := Decide(resp, err)
	if !d.Retry {
		return false, nil
	}
	failure := err
	if resp != nil {
		failure = &ResponseError{Exit: d.Exit, Origin: d.Origin, StatusCode: resp.StatusCode, Verdict: d.Verdict}
	}
	r := transport.RetriesFromContext(ctx)
	if d.Exit != "" && r != nil { // an attempt went out and failed (not a refusal)
		r.Record(pool.FailedAttempt{Exit: d.Exit, Verdict: d.Verdict, Err: failure})
	}
	wait := d.Wait
	if p.s.WaitRetryAfter {
		wait = max(wait, d.Verdict.RetryAfter)
	}
	if limit := p.maxWait(); wait > limit {
		return false, p.giveUp(ctx, r, &GiveUpError{Origin: d.Origin, Wait: wait, MaxWait: limit, Err: failure})
	}
	if b := p.s.Budget; b != nil && !b.TryWithdraw() {
		return false, p.giveUp(ctx, r, &GiveUpError{Origin: d.Origin, Budget: b, Err: failure})
	}
	if l := p.s.Logger; l != nil {
		l.LogAttrs(ctx, slog.LevelDebug, "retry: retrying", slog.String("origin", d.Origin),
			slog.String("exit", d.Exit), slog.String("class", string(d.Verdict.Class)),
			slog.Duration("wait", wait), slog.Bool("fresh_exit", d.MovesOn()))
	}
	if wait > 0 {
		if r != nil {
			r.WaitUntil(p.s.Clock.Now().Add(wait))
		} else if err := clock.Sleep(ctx, p.s.Clock, wait); err != nil {
			// Without transport.ContextWithRetries there is nowhere to hand the wait to
			// PrepareRetry: wait here.
			return false, err
		}
	}
	if resp != nil {
		return true, failure
	}
	return true, nil
}

// giveUp fills in gu's failures from r, logs it and returns it.
func (p *Policy) giveUp(ctx context.Context, r *pool.Retries, gu *GiveUpError) *GiveUpError {
	gu.Failures = r.Failures() // nil without a Retries
	if l := p.s.Logger; l != nil {
		l.LogAttrs(ctx, slog.LevelWarn, "retry: giving up", slog.String("origin", gu.Origin), slog.String("error", gu.Error()))
	}
	return gu
}

// Backoff has the shape of retryablehttp.Backoff: Delay's backoff with jitter, never more than
// max (nor Settings.MaxWait). It grows with attemptNum only for failures the origin is blamed for;
// a retry that moves on to a fresh exit (a failed response the transport judged the exit's, or a
// transport error: the exit that failed is avoided) gets the first step every time. It remembers
// max as the client's RetryWaitMax. The waits a failure calls for — the soonest probe after a
// refusal, which the client never shows Backoff since it is an error, and a Retry-After under
// Settings.WaitRetryAfter — are noted by CheckRetry and kept by PrepareRetry, in one place.
func (p *Policy) Backoff(min, max time.Duration, attemptNum int, resp *http.Response) time.Duration {
	if max > 0 {
		p.clientMax.Store(int64(max))
	}
	if p.s.MaxWait > 0 && (max <= 0 || p.s.MaxWait < max) {
		max = p.s.MaxWait
	}
	if resp == nil {
		// An error: an attempt the exit failed (the retry avoids it) or a refusal (its wait is in
		// the request's Retries, for PrepareRetry). Neither calls for a growing backoff.
		attemptNum = 0
	} else if v, ok := transport.VerdictFromResponse(resp); ok && v.Scope != pool.ScopeOrigin && v.Outcome != pool.Success {
		attemptNum = 0 // the exit's failure: the retry moves on to a fresh exit
	}
	return Exponential(min, max, attemptNum, p.s.Rand())
}

// PrepareRetry has the shape of retryablehttp.PrepareRetry: the client calls it after the backoff
// and before each retry. It waits, on the policy's clock, until the instant CheckRetry noted in
// the request's *pool.Retries (Retries.NotBefore: the soonest probe, a Retry-After), so that the
// total wait before the retry is the longer of the backoff and that instant. It returns the
// context's error if the request is cancelled meanwhile, which ends the retries. Without a
// Retries in the request's context (no transport.ContextWithRetries) it waits for nothing. With a
// Settings.Budget it marks req as a retry (req's context becomes one that says so, for
// CheckRetry), so its outcome deposits nothing: go-retryablehttp makes a fresh shallow copy of the
// request for PrepareRetry to change.
func (p *Policy) PrepareRetry(req *http.Request) error {
	if p.s.Budget != nil {
		markRetry(req)
	}
	r := transport.RetriesFromContext(req.Context())
	if r == nil {
		return nil
	}
	wait := r.NotBefore().Sub(p.s.Clock.Now())
	if wait <= 0 {
		return nil
	}
	return clock.Sleep(req.Context(), p.s.Clock, wait)
}

// retryMark is the context key PrepareRetry sets on a request's retries when a budget is on.
type retryMark struct{}

// markRetry makes req's context say that req is a retry. go-retryablehttp hands PrepareRetry a
// shallow copy of the request made for it to change, and passes that copy's context to CheckRetry.
func markRetry(req *http.Request) {
	if req.Context().Value(retryMark{}) == nil {
		*req = *req.WithContext(context.WithValue(req.Context(), retryMark{}, true))
	}
}

// firstAttempt reports whether CheckRetry is judging a request's first attempt, the one that
// deposits. PrepareRetry marks the retries. go-retryablehttp calls CheckRetry a second time for an
// attempt whose response its ResponseHandler rejected, with the response and the handler's error:
// that call deposits nothing (a redirect policy's error, which also comes with a response, is so
// never deposited for: it is not retried either).
func firstAttempt(ctx context.Context, resp *http.Response, err error) bool {
	return ctx.Value(retryMark{}) == nil && (resp == nil || err == nil)
}
