package transport

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// Transport is an http.RoundTripper that sends each request through an exit of its pool: it picks
// a ready exit for the request's origin (pool.Pool.Pick), sends the request through that exit's
// chain, classifies the outcome and reports the verdict on the lease. Set it as
// http.Client.Transport. It is safe for concurrent use.
//
// It keeps net/http's RoundTripper contract: the caller's request is never modified, its body is
// closed on every path, a response comes with a nil error whatever its status, and
// CloseIdleConnections reaches every exit's connections. When no exit is ready it fails closed:
// never a direct connection.
type Transport struct {
	pool          *pool.Pool
	classifier    Classifier
	base          http.RoundTripper // nil: one *http.Transport per exit, from template
	template      *http.Transport
	resolver      *net.Resolver
	originKey     OriginFunc
	headerTimeout time.Duration
	pace          bodyPace
	clock         clock.Clock
	watchdogs     chan *watchdog  // attempts' timers, stopped, for the next attempts (watchdog.go)
	traces        chan *connTrace // attempts' httptrace hooks, for the next attempts (traffic.go)
	obs           observers
	exitMW        []ExitMiddleware
	pages         *PageLooks        // nil: 2xx pages are not judged (pagelook.go)
	handler       http.RoundTripper // the per-request chain around roundTrip
	exits         sync.Map          // *pool.Exit → *exitChain
	unobserve     []func()
	closed        atomic.Bool
	closeOnce     sync.Once
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

// New returns a Transport that sends requests through the exits of p, configured by opts. It
// validates everything up front: a bad setting is an error naming it. Several transports may share
// one pool.
func New(p *pool.Pool, opts ...Option) (*Transport, error) {
	if p == nil {
		return nil, fmt.Errorf("transport: New: nil pool")
	}
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	t := &Transport{
		pool: p, classifier: c.classifier, base: c.base, template: c.template, resolver: c.resolver,
		originKey: c.originKey, headerTimeout: c.headerTimeout, pace: c.bodyPace, clock: p.Clock(),
		obs: c.observers, exitMW: c.exitMW, watchdogs: make(chan *watchdog, watchdogsKept),
		traces: make(chan *connTrace, tracesKept),
	}
	if c.pages.Peek >= 0 {
		t.pages = &c.pages
	}
	var h http.RoundTripper = roundTripFunc(t.roundTripEgress) // roundTrip, re-dialled on a banned egress IP (egress.go)
	for i := len(c.middleware) - 1; i >= 0; i-- {
		if h = c.middleware[i](h); h == nil {
			return nil, fmt.Errorf("transport: WithMiddleware: middleware %d returned a nil RoundTripper", i)
		}
	}
	t.handler = h
	rm, _ := p.Observe(exitRemoved{t: t})
	t.unobserve = append(t.unobserve, rm)
	for _, o := range c.observers {
		po, ok := o.(pool.Observer)
		if !ok {
			continue
		}
		rm, err := p.Observe(po)
		if err != nil {
			t.detach()
			return nil, fmt.Errorf("transport: WithObserver: %w", err)
		}
		t.unobserve = append(t.unobserve, rm)
	}
	return t, nil
}

// Pool returns the transport's pool: add and remove exits, take snapshots.
func (t *Transport) Pool() *pool.Pool { return t.pool }

// CloseIdleConnections closes the idle connections of every exit (or calls the base's).
func (t *Transport) CloseIdleConnections() {
	if t.base != nil {
		if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
			c.CloseIdleConnections()
		}
		return
	}
	t.exits.Range(func(_, v any) bool {
		v.(*exitChain).closeIdle()
		return true
	})
}

// Close makes RoundTrip refuse new requests with ErrClosed, closes idle connections, takes the
// transport's observers off the pool and waits for the pool's background sweeps. Requests in
// flight finish. The pool stays usable.
func (t *Transport) Close() error {
	t.closed.Store(true)
	t.CloseIdleConnections()
	t.detach()
	t.pool.Close()
	return nil
}

func (t *Transport) detach() {
	t.closeOnce.Do(func() {
		for _, rm := range t.unobserve {
			rm()
		}
	})
}

// RoundTrip implements http.RoundTripper: the request goes through the per-request middleware,
// then is picked an exit and sent.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeRequestBody(req)
		return nil, errors.New("transport: request has no URL")
	}
	if t.closed.Load() {
		closeRequestBody(req)
		return nil, ErrClosed
	}
	return t.handler.RoundTrip(req)
}

// roundTrip is the innermost link of the per-request chain: pick, attempt, classify, report.
func (t *Transport) roundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil {
		closeRequestBody(req)
		return nil, errors.New("transport: request has no URL")
	}
	ctx := req.Context()
	origin := t.originKey(req.URL)
	lease, err := t.pool.Pick(ctx, request(ctx, origin))
	if err != nil {
		closeRequestBody(req)
		return nil, err
	}
	a := &attempt{t: t, lease: lease, caller: req}
	if t.base == nil {
		a.trace = t.newConnTrace(httptrace.ContextClientTrace(ctx))
	}
	a.info = AttemptInfo{LeaseInfo: lease.Info(), Method: req.Method}
	exit := a.info.Exit
	a.initContext(ctx)
	a.ctx = a
	settled := false
	defer func() {
		if !settled {
			// A panic in an observer, the base or the classifier: give the permits back (probe
			// slots, leases out) and stop the timer before it goes on up.
			a.finish(pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassError}, 0, errAttemptPanicked)
			a.cancel(nil)
		}
	}()
	if len(t.obs) > 0 {
		a.ctx = a.observed(t.obs.started(a, a.info))
	}
	if t.headerTimeout > 0 {
		a.mu.Lock()
		a.startTimerLocked(t.headerTimeout)
		a.mu.Unlock()
	}
	// A shallow copy that lives in the attempt (WithContext is inlined, and its copy does not
	// escape): the caller's request is never touched.
	a.out = *req.WithContext(a.ctx)
	out := &a.out
	resp, err := t.exitRoundTripper(exit).RoundTrip(out)
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
	responseEgress(a, exit, out, resp) // a gateway's egress IP, over plain HTTP (egress.go)
	at := &a.at
	*at = Attempt{Request: out, Response: resp, Err: err, Exit: exit, Origin: origin}
	at.Now = t.clock.Now()
	at.CallerDone = callerDone(req)
	at.TimedOut = a.cause() == errHeaderTimeout
	if at.TimedOut && err != nil {
		err = errHeaderTimeout // not the context.Canceled net/http reports: the caller cancelled nothing
		at.Err = err
	}
	v := t.classifier.Classify(at)
	if out.URL != nil {
		a.lease.SetPath(out.URL.Path) // what the plain-403 judgement compares (pool.Lease.SetPath)
	}
	if v.Suspect {
		// The pool's judgement of a plain 403 (a ban, or the site's answer), now: the caller and
		// the observers are told the verdict the breakers count, and a ban fails here, as a block.
		v = a.lease.JudgeAt(at.Now, v)
	}
	if v.Outcome == pool.Success && t.pages != nil && at.Response != nil && at.Response.StatusCode < 300 {
		v = t.judgePage(a, at, v) // a soft block with no vendor marker (pagelook.go)
	}
	resp = at.Response
	if resp != nil {
		// Fixed from here on: VerdictFromResponse reads them, and so may the timer once the phase
		// below has turned.
		a.status, a.verdict = resp.StatusCode, v
		if v.Outcome == pool.Success {
			a.prepareBody(t.bodyPaceFor(req), at.Now)
		}
	}
	if !a.phase.CompareAndSwap(phaseHeaders, phaseBody) && resp != nil && !callerDone(req) {
		// The header timeout fired while the classifier peeked at the body: the body is dead.
		resp.Body.Close()
		resp, err = nil, errHeaderTimeout
		v = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
	}
	settled = true
	if err != nil {
		a.finish(v, 0, err)
		a.cancel(nil)
		return nil, &AttemptError{Exit: exit.Label(), Origin: origin, Verdict: v, Err: err}
	}
	a.rc = resp.Body
	resp.Body = a
	if v.Outcome != pool.Success {
		a.finish(v, resp.StatusCode, nil)
	} else {
		a.startBody()
	}
	return resp, nil
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
