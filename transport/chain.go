package transport

import (
	"net/http"
	"sync"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Middleware wraps a RoundTripper: a link of the transport's per-request chain (WithMiddleware).
type Middleware func(next http.RoundTripper) http.RoundTripper

// ExitMiddleware wraps the base RoundTripper of exit e: a link of the per-attempt chain
// (WithExitMiddleware), built once per exit.
type ExitMiddleware func(e *pool.Exit, next http.RoundTripper) http.RoundTripper

// roundTripFunc adapts a func to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// exitChain is one exit's per-attempt chain: its own *http.Transport (nil with WithBase) wrapped
// by the exit middleware, built on first use.
type exitChain struct {
	once  sync.Once
	own   *http.Transport
	rt    http.RoundTripper
	conns *sessionConns // a gateway session's open connections (gateway_conns.go); nil for other exits
}

// exitRoundTripper returns e's chain, building it the first time. One *http.Transport per exit is
// what makes routing true: net/http pools HTTP/2 connections by origin alone, so a shared transport
// with a per-request Proxy func would reuse one exit's h2 connection for every exit.
func (t *Transport) exitRoundTripper(e *pool.Exit) http.RoundTripper {
	v, ok := t.exits.Load(e)
	if !ok {
		v, _ = t.exits.LoadOrStore(e, &exitChain{})
	}
	c := v.(*exitChain)
	c.once.Do(func() {
		rt := t.base
		if rt == nil {
			c.conns = newSessionConns(e)
			c.own = newExitTransport(t.pool, e, t.template, t.resolver, c.conns)
			rt = c.own
		}
		for i := len(t.exitMW) - 1; i >= 0; i-- {
			rt = t.exitMW[i](e, rt)
		}
		c.rt = rt
	})
	return c.rt
}

// closeIdle closes the idle connections of e's own transport, if it was ever built.
func (c *exitChain) closeIdle() {
	if c.own != nil {
		c.own.CloseIdleConnections()
	}
}

// exitRemoved drops a removed exit's chain and closes its idle connections.
type exitRemoved struct {
	pool.NopObserver
	t *Transport
}

func (o exitRemoved) ExitRemoved(e *pool.Exit) {
	if v, ok := o.t.exits.LoadAndDelete(e); ok {
		c := v.(*exitChain)
		c.once.Do(func() {}) // a chain built concurrently is not half-built when closed
		c.closeIdle()
		c.conns.closeAll() // no tunnel outlives its gateway session
	}
}
