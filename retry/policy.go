package retry

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
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
	// transport's clock (transport.WithClock) so that soonest-probe times and waits agree.
	Clock clock.Clock
	// Rand returns a uniform float64 in [0, 1) for backoff jitter; it must be safe for concurrent
	// use. Default math/rand/v2.Float64.
	Rand func() float64
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
// and each logical request's context must come from WithRetries. A Policy is safe for concurrent
// use; give each client its own when their RetryWaitMax differ (Settings.MaxWait).
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
// refusals (no healthy exit, origin unhealthy, throttled) once they may clear: it notes the wait
// they need in the request's memo for PrepareRetry, or gives up with a *GiveUpError when the wait
// exceeds the longest allowed. A failed response comes back with a *ResponseError beside the
// decision to retry, so that running out of retries reports it. An error from the request's
// ResponseHandler is not the transport's and is not retried: wrap CheckRetry to retry it.
func (p *Policy) CheckRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
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
	m := memoFrom(ctx)
	if d.Exit != "" { // an attempt went out and failed (not a refusal)
		m.fail(Failure{Exit: d.Exit, Verdict: d.Verdict, Err: failure})
	}
	wait := d.Wait
	if p.s.WaitRetryAfter {
		wait = max(wait, d.Verdict.RetryAfter)
	}
	if limit := p.maxWait(); wait > limit {
		return false, &GiveUpError{Origin: d.Origin, Wait: wait, MaxWait: limit, Failures: m.failures(), Err: failure}
	}
	if wait > 0 {
		if m != nil {
			m.notBefore(p.s.Clock.Now().Add(wait))
		} else if err := p.sleep(ctx, wait); err != nil {
			// Without WithRetries there is no memo to hand the wait to PrepareRetry: wait here.
			return false, err
		}
	}
	if resp != nil {
		return true, failure
	}
	return true, nil
}

// Backoff has the shape of retryablehttp.Backoff: Exponential(min, max, attemptNum) with jitter,
// never more than max (nor Settings.MaxWait). It remembers max as the client's RetryWaitMax. It
// does not look at the response: the waits a failure calls for — the soonest probe after a
// refusal, which the client never shows Backoff since it is an error, and a Retry-After under
// Settings.WaitRetryAfter — are noted by CheckRetry and kept by PrepareRetry, in one place.
func (p *Policy) Backoff(min, max time.Duration, attemptNum int, resp *http.Response) time.Duration {
	if max > 0 {
		p.clientMax.Store(int64(max))
	}
	if p.s.MaxWait > 0 && (max <= 0 || p.s.MaxWait < max) {
		max = p.s.MaxWait
	}
	return Exponential(min, max, attemptNum, p.s.Rand())
}

// PrepareRetry has the shape of retryablehttp.PrepareRetry: the client calls it after the backoff
// and before each retry. It waits, on the policy's clock, until the instant CheckRetry noted in
// the request's memo (the soonest probe, a Retry-After), so that the total wait before the retry is
// the longer of the backoff and that instant. It returns the context's error if the request is
// cancelled meanwhile, which ends the retries. Without a memo (no WithRetries) it does nothing.
func (p *Policy) PrepareRetry(req *http.Request) error {
	m := memoFrom(req.Context())
	if m == nil {
		return nil
	}
	wait := m.until().Sub(p.s.Clock.Now())
	if wait <= 0 {
		return nil
	}
	return p.sleep(req.Context(), wait)
}

func (p *Policy) sleep(ctx context.Context, d time.Duration) error {
	t := p.s.Clock.NewTimer(d)
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
}

type memoKey struct{}

// memo is what one logical request's retries share: the instant the next may go out, and the
// failures so far.
type memo struct {
	mu    sync.Mutex
	next  time.Time
	fails []Failure
}

// WithRetries returns a context for one logical request sent through a retrying client: it is
// transport.WithRetries — each retry goes out through an exit that has not failed the request,
// while one is ready — plus the memo in which Policy.CheckRetry leaves PrepareRetry the wait a
// refusal needs. Make one per logical request, not one per client:
//
//	req, err := retryablehttp.NewRequestWithContext(retry.WithRetries(ctx), "GET", url, nil)
func WithRetries(ctx context.Context) context.Context {
	ctx = transport.WithRetries(ctx)
	if memoFrom(ctx) != nil {
		return ctx
	}
	return context.WithValue(ctx, memoKey{}, &memo{})
}

func memoFrom(ctx context.Context) *memo {
	m, _ := ctx.Value(memoKey{}).(*memo)
	return m
}

func (m *memo) notBefore(t time.Time) {
	m.mu.Lock()
	m.next = t
	m.mu.Unlock()
}

func (m *memo) until() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.next
}

func (m *memo) fail(f Failure) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if len(m.fails) == MaxFailures {
		copy(m.fails, m.fails[1:])
		m.fails = m.fails[:MaxFailures-1]
	}
	m.fails = append(m.fails, f)
	m.mu.Unlock()
}

func (m *memo) failures() []Failure {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Failure(nil), m.fails...)
}
