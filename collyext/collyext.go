package collyext

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Headers the extension uses.
const (
	// ExitHeader is set on every response that came through the pool to the label of the exit that
	// carried it (any value the origin sent under that name is removed first). Exit reads it.
	ExitHeader = "X-Proxybreaker-Exit"
	// RequestHeader carries the extension's id for a logical request on the collector's side: set
	// by Attach's OnRequest callback, kept by colly's Request.Retry, and removed before the request
	// leaves, so origins never see it.
	RequestHeader = "X-Proxybreaker-Request"
)

// Defaults for Settings.
const (
	DefaultRetries    = 4
	DefaultMinDelay   = 100 * time.Millisecond
	DefaultMaxDelay   = time.Minute
	DefaultMaxTracked = 10000
)

// ErrProxyFuncSet is the error every request fails with once the collector's SetProxy or
// SetProxyFunc has been called after Attach: colly would route through that proxy instead of the
// pool (with any other transport than the one Attach sets, it replaces the transport outright).
var ErrProxyFuncSet = errors.New("collyext: Collector.SetProxy or SetProxyFunc was called after Attach: " +
	"the pool picks the proxy for each request; remove the call")

// Settings tune the extension's retries (RetryOnError). The zero value is the recommended
// configuration.
type Settings struct {
	// Retries is how many times RetryOnError re-queues one request. Default 4; negative: never.
	Retries int
	// MinDelay is the backoff's base. A re-queue that moves on to a fresh exit (the exit that failed
	// is avoided, another is ready: retry.Decision.MovesOn) waits a random time in
	// [MinDelay/2, MinDelay] however many came before it; otherwise the n-th re-queue of a request
	// waits in [d/2, d], d = MinDelay·2^(n-1), capped at MaxDelay — or longer when the failure calls
	// for it (the soonest probe, the origin guard's next probe). Default 100 ms.
	MinDelay time.Duration
	// MaxDelay is the longest a request waits before a re-queue. A failure after which nothing will
	// be ready for longer (every exit parked or cooling for this origin) is not re-queued: the
	// request is given up with a *GiveUpError that says how long. Default 1 min.
	MaxDelay time.Duration
	// WaitRetryAfter makes a response's Retry-After a floor on the delay before the re-queue even
	// though it goes out through another exit (see retry.Settings.WaitRetryAfter). Default false:
	// the (exit, origin) pair that got the Retry-After stays OPEN that long, and the re-queue moves
	// to another exit.
	WaitRetryAfter bool
	// MaxTracked bounds how many logical requests the extension remembers between a failure and
	// its re-queue (the exits that failed each, its retries so far). When it is full, an arbitrary
	// one is forgotten: its next retry may go through an exit that already failed it. Default
	// 10,000.
	MaxTracked int
	// Clock makes the timers re-queue delays wait on. Default: the clock of the transport's pool
	// (Pool.Clock: clock.System unless pool.WithClock chose another), so that soonest-probe times
	// and waits agree.
	Clock clock.Clock
	// Rand returns a uniform float64 in [0, 1) for jitter; it must be safe for concurrent use.
	// Default math/rand/v2.Float64.
	Rand func() float64
	// Logger, when set, logs each re-queue at Debug and each request given up at Warn (exits by
	// label, never credentials). Default: no logging.
	Logger *slog.Logger
	// Budget, when set, bounds the re-queues of all requests together (retry.Budget: a share of
	// the requests plus a floor per second, over a sliding window): each logical request deposits
	// when its first fetch reaches the transport, each re-queue withdraws, and a re-queue the
	// budget refuses is given up at once with a *GiveUpError matching retry.ErrBudgetSpent.
	// Retries still bounds each request. Default nil: no budget.
	Budget *retry.Budget
}

func (s *Settings) validate() error {
	switch {
	case s.MinDelay < 0:
		return fmt.Errorf("collyext: Settings.MinDelay = %v: must not be negative", s.MinDelay)
	case s.MaxDelay < 0:
		return fmt.Errorf("collyext: Settings.MaxDelay = %v: must not be negative", s.MaxDelay)
	case s.MaxTracked < 0:
		return fmt.Errorf("collyext: Settings.MaxTracked = %d: must not be negative", s.MaxTracked)
	}
	if s.Retries == 0 {
		s.Retries = DefaultRetries
	}
	if s.MinDelay == 0 {
		s.MinDelay = DefaultMinDelay
	}
	if s.MaxDelay == 0 {
		s.MaxDelay = max(DefaultMaxDelay, s.MinDelay)
	}
	if s.MaxDelay < s.MinDelay {
		return fmt.Errorf("collyext: Settings.MaxDelay = %v: must not be shorter than MinDelay (%v)", s.MaxDelay, s.MinDelay)
	}
	if s.MaxTracked == 0 {
		s.MaxTracked = DefaultMaxTracked
	}
	if s.Rand == nil {
		s.Rand = rand.Float64
	}
	return nil
}

// Extension is a proxybreaker transport attached to a colly.Collector. It is safe for concurrent
// use, as async collectors need.
type Extension struct {
	c     *colly.Collector
	tr    *transport.Transport
	s     Settings
	shell *http.Transport
	ids   atomic.Uint64

	mu   sync.Mutex
	reqs map[string]*request
}

// Attach makes c send every request through tr, the way Colly's own extensions plug in: one call,
// before the collector's first request and before you register your own callbacks (so that
// r.Request.ProxyURL is already set when they run). The collector keeps its cookie jar, request
// timeout, redirect policy and async mode: only its http.Client's Transport changes.
//
// Attach registers OnRequest, OnResponseHeaders and OnError callbacks. They give each logical
// request an id (RequestHeader) so that its retries avoid the exits that failed it; set
// r.Request.ProxyURL to the label of the exit that carried the response (see Exit); and abort,
// after its headers, a response the transport judged a failure that colly would otherwise parse as
// content — a challenge page served with 200, or any failed response when c.ParseHTTPErrorResponse
// is set — so it reaches OnError instead. Register RetryOnError to re-queue failures.
//
// Do not call c.SetProxy or c.SetProxyFunc afterwards: colly would route through that proxy
// instead of the pool; Attach's transport notices and fails every request with ErrProxyFuncSet.
// c.WithTransport, c.SetClient and c.Appengine replace the transport, and undo Attach.
func Attach(c *colly.Collector, tr *transport.Transport, s Settings) (*Extension, error) {
	if c == nil {
		return nil, errors.New("collyext: Attach: nil collector")
	}
	if tr == nil {
		return nil, errors.New("collyext: Attach: nil transport")
	}
	if s.Clock == nil {
		s.Clock = tr.Pool().Clock()
	}
	if err := s.validate(); err != nil {
		return nil, err
	}
	e := &Extension{c: c, tr: tr, s: s, reqs: make(map[string]*request)}
	e.shell = newShell(&roundTripper{e})
	c.WithTransport(e.shell)
	e.Hook(c)
	return e, nil
}

// Hook registers the extension's callbacks on c, a clone of the collector given to Attach
// (Collector.Clone shares the transport but not the callbacks). Attach calls it for its own
// collector.
func (e *Extension) Hook(c *colly.Collector) {
	c.OnRequest(e.onRequest)
	c.OnResponseHeaders(e.onResponseHeaders)
	c.OnError(e.onError)
}

// Transport returns the transport requests go through.
func (e *Extension) Transport() *transport.Transport { return e.tr }

// Settings returns the extension's settings, defaults filled in.
func (e *Extension) Settings() Settings { return e.s }

// Exit returns the label of the exit that carried r: the ExitHeader of its headers, or, for a
// failure without a response, the exit named by the error (Attach's OnError callback puts it in
// r.Request.ProxyURL). It returns "" when no exit carried r.
func Exit(r *colly.Response) string {
	if r == nil {
		return ""
	}
	if r.Headers != nil {
		if l := r.Headers.Get(ExitHeader); l != "" {
			return l
		}
	}
	if r.Request != nil {
		return r.Request.ProxyURL
	}
	return ""
}

// newShell returns the *http.Transport the collector holds. It never dials: the http and https
// schemes are registered to rt (Transport.RegisterProtocol), so every request goes through the
// pool. An *http.Transport, rather than rt itself, because colly's SetProxyFunc replaces any
// other transport with a fresh one (silently bypassing the pool), while on an *http.Transport it
// only sets Proxy — which rt notices. Requests net/http will not hand to a registered protocol (a
// websocket upgrade over https) fail at the refusing dialers: never a direct connection.
func newShell(rt http.RoundTripper) *http.Transport {
	refuse := func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("collyext: refusing a direct connection: requests go through the pool")
	}
	shell := &http.Transport{
		DialContext:    refuse,
		DialTLSContext: refuse,
		// A non-nil, empty map keeps net/http from setting up HTTP/2 on the shell, which would
		// register its own "https" protocol. The exits' own transports speak HTTP/2.
		TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{},
	}
	shell.RegisterProtocol("http", rt)
	shell.RegisterProtocol("https", rt)
	return shell
}
