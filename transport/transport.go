package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
)

// Transport is an http.RoundTripper that sends each request through an exit of its Pool: it picks a
// ready exit for the request's origin, sends the request through it, classifies the outcome and
// feeds the breakers. Set it as http.Client.Transport. It is safe for concurrent use.
//
// It keeps net/http's RoundTripper contract: the caller's request is never modified, its body is
// closed on every path, a response comes with a nil error whatever its status, and
// CloseIdleConnections reaches every exit's connections. When no exit is ready it fails closed:
// never a direct connection.
type Transport struct {
	pool          *Pool
	classifier    Classifier
	base          http.RoundTripper // nil: one *http.Transport per exit, from template
	template      *http.Transport
	resolver      *net.Resolver
	originKey     OriginFunc
	headerTimeout time.Duration
	clock         clock.Clock
	obs           observers
	closed        atomic.Bool
}

var _ http.RoundTripper = (*Transport)(nil)

// errHeaderTimeout is the cause an attempt's context is cancelled with when its response headers
// did not arrive within the header timeout, and the error RoundTrip reports then (wrapped in an
// *AttemptError): a net.Error whose Timeout() is true, so url.Error.Timeout() is true too.
var errHeaderTimeout error = &timeoutError{"transport: timeout awaiting response headers through the exit"}

type timeoutError struct{ msg string }

func (e *timeoutError) Error() string { return e.msg }
func (e *timeoutError) Timeout() bool { return true }

// Temporary is part of net.Error.
func (e *timeoutError) Temporary() bool { return true }

// errNilResponse stands in for the error a base RoundTripper failed to return with its nil response.
var errNilResponse = errors.New("transport: base RoundTripper returned a nil response and a nil error")

// errAttemptPanicked is the error observers see for an attempt ended by a panic.
var errAttemptPanicked = errors.New("transport: attempt panicked")

// New returns a Transport configured by opts. It validates everything up front: a bad setting is an
// error naming it.
func New(opts ...Option) (*Transport, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	pool := c.pool
	if pool == nil {
		if pool, err = newPool(c); err != nil {
			return nil, err
		}
	} else if len(c.poolOptions) > 0 {
		return nil, fmt.Errorf("transport: WithPool cannot be combined with pool options (%v): configure the pool itself", c.poolOptions)
	}
	t := &Transport{
		pool: pool, classifier: c.classifier, base: c.base, template: c.template, resolver: c.resolver,
		originKey: c.originKey, headerTimeout: c.headerTimeout, clock: pool.clock, obs: pool.obs,
	}
	if t.template == nil {
		t.template = DefaultBaseTemplate()
	}
	if t.base == nil {
		pool.removed = closeIdle
	}
	return t, nil
}

// Pool returns the transport's pool: add and remove exits, take snapshots.
func (t *Transport) Pool() *Pool { return t.pool }

// CloseIdleConnections closes the idle connections of every exit (or calls the base's).
func (t *Transport) CloseIdleConnections() {
	if t.base != nil {
		if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
		return
	}
	for _, es := range t.pool.set.Load().all {
		closeIdle(es)
	}
}

// Close makes RoundTrip refuse new requests with ErrClosed, closes idle connections and waits for
// the pool's background sweeps. Requests in flight finish.
func (t *Transport) Close() error {
	t.closed.Store(true)
	t.CloseIdleConnections()
	t.pool.Close()
	return nil
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeRequestBody(req)
		return nil, errors.New("transport: request has no URL")
	}
	if t.closed.Load() {
		closeRequestBody(req)
		return nil, ErrClosed
	}
	ctx := req.Context()
	now := t.clock.Now()
	origin := t.originKey(req.URL)
	tk, err := t.pool.pick(ctx, now, origin)
	if err != nil {
		closeRequestBody(req)
		t.obs.refused(ctx, origin, err)
		return nil, err
	}
	now = tk.now // later than before if the request waited for a token
	a := &attempt{t: t, tk: tk, caller: req, memo: retryMemoFrom(ctx)}
	a.info = AttemptInfo{
		Exit: tk.exit.exit, Origin: origin, Method: req.Method, At: now,
		Probe:     tk.pairPm.Probe() || tk.exitPm.Probe() || tk.originPm.Probe(),
		PairState: tk.pairState, ExitState: tk.exitState,
		DryRun: t.pool.dryRun, WouldRefuse: tk.would,
	}
	cctx, cancel := context.WithCancelCause(ctx)
	a.cancel = cancel
	a.actx = attemptContext{Context: cctx, exit: tk.exit.exit, att: a}
	a.ctx = &a.actx
	settled := false
	defer func() {
		if !settled {
			// A panic in an observer, the base or the classifier: give the permits back (probe
			// slots, in-flight count) before it goes on up.
			if a.timer != nil {
				a.timer.Stop()
			}
			a.finish(Verdict{Outcome: Neutral, Class: ClassError}, 0, errAttemptPanicked)
			cancel(nil)
		}
	}()
	if len(t.obs) > 0 {
		a.ctx = t.obs.started(a.ctx, a.info)
	}
	if t.headerTimeout > 0 {
		a.timer = time.AfterFunc(t.headerTimeout, a.headersTimedOut)
	}
	out := req.WithContext(a.ctx) // a shallow copy: the caller's request is never touched
	resp, err := t.roundTripper(tk.exit).RoundTrip(out)
	if resp != nil && err != nil { // a misbehaving base: keep our own contract
		resp.Body.Close()
		resp = nil
	}
	if resp == nil && err == nil {
		err = errNilResponse
	}
	if resp != nil && resp.Body == nil {
		resp.Body = http.NoBody
	}
	if resp != nil && resp.Request == nil {
		resp.Request = out // so that ExitFromResponse names the exit
	}
	at := &a.at
	*at = Attempt{Request: out, Response: resp, Err: err, Exit: tk.exit.exit, Origin: origin}
	at.Now = t.clock.Now()
	at.CallerDone = callerDone(req)
	at.TimedOut = context.Cause(cctx) == errHeaderTimeout
	if at.TimedOut && err != nil {
		err = errHeaderTimeout // not the context.Canceled net/http reports: the caller cancelled nothing
		at.Err = err
	}
	v := t.classifier.Classify(at)
	resp = at.Response
	if a.timer != nil && !a.timer.Stop() && resp != nil && !callerDone(req) {
		// The header timeout fired while the classifier peeked at the body: the body is dead.
		resp.Body.Close()
		resp, err = nil, errHeaderTimeout
		v = Verdict{Outcome: Transient, Class: ClassTimeout, ConnLevel: true}
	}
	settled = true
	if err != nil {
		a.finish(v, 0, err)
		cancel(nil)
		return nil, &AttemptError{Exit: tk.exit.exit.label, Origin: origin, Verdict: v, Err: err}
	}
	a.rc = resp.Body
	resp.Body = a
	a.status, a.verdict = resp.StatusCode, v // fixed from here on: VerdictFromResponse reads them
	if v.Outcome != Success {
		a.finish(v, resp.StatusCode, nil)
	}
	return resp, nil
}

func (t *Transport) roundTripper(es *exitState) http.RoundTripper {
	if t.base != nil {
		return t.base
	}
	return exitTransport(es, t.template, t.resolver)
}

// callerDone reports whether the caller gave up on req: its context ended, or (for callers such
// as http.Client with a Timeout, which also closes the deprecated Request.Cancel channel of a
// RoundTripper it does not recognise) its Cancel channel closed.
func callerDone(req *http.Request) bool {
	if req.Context().Err() != nil {
		return true
	}
	if req.Cancel != nil {
		select {
		case <-req.Cancel:
			return true
		default:
		}
	}
	return false
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}
