package transport

import (
	"context"
	"net"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Bytes are counted where they cross the wire to the proxy: each exit's *http.Transport dials
// through countingDial, so every connection to the proxy is a *countedConn, under CONNECT and TLS
// for a tunnel (the proxy's reply and the TLS handshake included) and under the SOCKS5 handshake.
//
// An attempt learns its connection from net/http's GotConn trace hook and, when it ends, claims
// what the connection carried since the attempt before it on the same connection claimed: so the
// claims of a connection add up to what it carried, and per exit and per origin the totals are
// exact (an HTTP/2 connection, through its tunnel, carries one origin's host). What one attempt
// claims is exact for HTTP/1.1, which carries one request at a time — the connection's own setup
// goes to its first attempt — with two blurs: an attempt judged a failure at its headers claims what
// had arrived by then, and the rest of its body goes to the next attempt on the connection; and the
// next request on a kept-alive connection may start before the attempt before it has claimed. On an
// HTTP/2 connection carrying several attempts at once, an attempt claims its siblings' bytes so
// far as well as its own. An attempt also claims, when it ends, what the last connection dialled
// for it has carried so far, whether or not it used it: the CONNECT, TLS handshake and HTTP/2
// preface of a connection net/http dialled in a race and kept idle, or dropped, are the
// attempt's that caused them. What no attempt claims — the TLS close of an idle connection, the
// HTTP/2 frames after its last attempt, a connection whose attempt ended before its dial did —
// the connection counts for its exit when it closes, and for the origin of the attempt that
// dialled it (pool.Pool.AddTraffic): it is on no AttemptResult, and observers hear it as a
// pool.ConnectionTraffic (otelbreaker records it under the origin pool.ConnectionOrigin). With
// WithBase, or a template whose DialTLSContext dials an https:// proxy, nothing is counted.

// countedConn is a connection to an exit's proxy that counts the bytes read and written on it.
type countedConn struct {
	net.Conn
	sent, received atomic.Int64
	// claimedSent and claimedReceived are how much of sent and received attempts have claimed.
	claimedSent, claimedReceived atomic.Int64
	owner                        connCounter
	origin                       string // the origin key of the attempt that dialled it
}

// connCounter makes the countedConns of one exit's connections. With a pool, what a connection
// carried that no attempt claimed is counted when it closes (pool.Pool.AddTraffic), for the exit
// and for the origin of the attempt that dialled it.
type connCounter struct {
	pool  *pool.Pool // nil: NewExitTransport's, whose connections no pool counts
	exit  *pool.Exit
	conns *sessionConns // a gateway session's open connections; nil for other exits
}

// wrap returns c counted; ctx is the dial's, which carries the dialling attempt's values.
func (k connCounter) wrap(ctx context.Context, c net.Conn) *countedConn {
	cc := &countedConn{Conn: c, owner: k}
	k.conns.add(cc)
	if k.pool == nil {
		return cc
	}
	if a, ok := ctx.Value(attemptKey).(*attempt); ok {
		cc.origin = a.info.Origin
		if a.trace != nil {
			a.trace.dialed.Store(cc)
		}
	}
	return cc
}

// Close counts what no attempt claimed — with what arrived and was never read (traffic_unread_*.go)
// — and closes the connection. What TLS writes as it closes
// (its close_notify) has been written by then; counting first means that once the proxy sees the
// connection end, the totals hold all it carried.
func (c *countedConn) Close() error {
	c.owner.conns.remove(c)
	if n := unread(c.Conn); n > 0 {
		c.received.Add(n) // arrived, never read: it crossed the wire all the same
	}
	if c.owner.pool != nil {
		c.owner.pool.AddTraffic(c.owner.exit, c.origin, c.claim())
	}
	return c.Conn.Close()
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.received.Add(int64(n))
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.sent.Add(int64(n))
	return n, err
}

// countedConn returns c: connections that wrap one say so (countedOf).
func (c *countedConn) countedConn() *countedConn { return c }

// claim returns the bytes carried since the last claim, and marks them claimed. Concurrent claims
// take disjoint shares.
func (c *countedConn) claim() pool.Traffic {
	return pool.Traffic{Sent: claimCounter(&c.claimedSent, &c.sent), Received: claimCounter(&c.claimedReceived, &c.received)}
}

// claimCounter moves claimed up to total and returns by how much. claimed is loaded before total,
// which only grows, so a share is never negative.
func claimCounter(claimed, total *atomic.Int64) int64 {
	for {
		from := claimed.Load()
		to := total.Load()
		if claimed.CompareAndSwap(from, to) {
			return to - from
		}
	}
}

// countingDial returns a DialContext that wraps each connection dial (or dialPlain, when dial is
// nil; net.Dialer's zero value when both are) makes in a *countedConn of k's.
func countingDial(k connCounter, dial func(ctx context.Context, network, addr string) (net.Conn, error), dialPlain func(network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	if dial == nil {
		if dialPlain != nil {
			dial = func(_ context.Context, network, addr string) (net.Conn, error) { return dialPlain(network, addr) }
		} else {
			var zero net.Dialer
			dial = zero.DialContext
		}
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil || c == nil {
			return c, err
		}
		return k.wrap(ctx, c), nil
	}
}

// countedOf finds the *countedConn under c: c itself, or beneath the TLS connections (NetConn)
// and the SOCKS5 connection (socksConn) net/http and x/net/proxy put around it. nil if none.
func countedOf(c net.Conn) *countedConn {
	for range 8 {
		switch x := c.(type) {
		case interface{ countedConn() *countedConn }:
			return x.countedConn()
		case interface{ NetConn() net.Conn }:
			c = x.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// connTrace is an attempt's httptrace hook: its GotConn notes the connection net/http gave the
// attempt (the attempt's context answers httptrace's key with trace: attemptctx.go). Traces are
// kept across attempts (Transport.traces, a bounded free list like the watchdogs'), so that
// counting costs a request no allocation: trace's fields are set once, when the trace is made,
// and never written again, since net/http may still read them (for hooks it finds nil) after the
// attempt has handed the trace on. A trace composed with the caller's own (a context with an
// httptrace.ClientTrace) is made for its attempt and not kept.
type connTrace struct {
	trace   httptrace.ClientTrace
	conn    atomic.Pointer[countedConn]
	callers func(httptrace.GotConnInfo) // the caller's GotConn, for a composed trace
	kept    bool                        // goes back to the free list
	// earlier holds what the attempt claimed from a connection net/http gave it before the last
	// (HTTP/2 retries a request on another connection when the first one went away).
	earlierSent, earlierReceived atomic.Int64
	// dialed is the last connection dialled for the attempt (the dial's context carries it),
	// whose setup it claims whether or not it used it. Here, not in the attempt, which fills
	// its size class (TestAttemptFitsItsSizeClass).
	dialed atomic.Pointer[countedConn]
}

func (ct *connTrace) gotConn(info httptrace.GotConnInfo) {
	if ct.callers != nil {
		ct.callers(info)
	}
	c := countedOf(info.Conn)
	if old := ct.conn.Swap(c); old != nil && old != c {
		tr := old.claim()
		ct.earlierSent.Add(tr.Sent)
		ct.earlierReceived.Add(tr.Received)
	}
}

// claim returns what the attempt's connections carried for it (see above) and empties ct.
func (ct *connTrace) claim() pool.Traffic {
	tr := pool.Traffic{Sent: ct.earlierSent.Swap(0), Received: ct.earlierReceived.Swap(0)}
	if c := ct.conn.Swap(nil); c != nil {
		tr = tr.Add(c.claim())
	}
	return tr
}

// tracesKept is how many connTraces a transport keeps for its next attempts.
const tracesKept = 1024

// newConnTrace returns a trace for an attempt whose caller's context holds caller (nil: none).
func (t *Transport) newConnTrace(caller *httptrace.ClientTrace) *connTrace {
	if caller != nil {
		ct := &connTrace{trace: *caller, callers: caller.GotConn}
		ct.trace.GotConn = ct.gotConn
		return ct
	}
	select {
	case ct := <-t.traces:
		return ct
	default:
	}
	ct := &connTrace{kept: true}
	ct.trace.GotConn = ct.gotConn
	return ct
}

// traffic claims the bytes of the attempt, and hands its trace on for the next attempts.
func (a *attempt) traffic() pool.Traffic {
	ct := a.trace
	if ct == nil {
		return pool.Traffic{}
	}
	tr := ct.claim()
	if c := ct.dialed.Swap(nil); c != nil && c.owner.exit == a.info.Exit {
		// A connection dialled for the attempt that another attempt used, or none did (an HTTP/2
		// dial that lost a race, a tunnel never used): its setup so far is the attempt's. When it
		// is the attempt's own connection, claimed just above, this claims what arrived since. A
		// dial that ended after its attempt may have noted its connection in the trace of a later
		// one (traces are kept): on the same exit it is claimed there; else left to its close.
		tr = tr.Add(c.claim())
	}
	if ct.kept {
		select {
		case a.t.traces <- ct:
		default:
		}
	}
	return tr
}

// traceKey is httptrace's context key for a ClientTrace (unexported there), learnt by asking a
// context that records the key it is asked for.
var traceKey = func() any {
	var k keyRecorder
	httptrace.ContextClientTrace(&k)
	return k.key
}()

type keyRecorder struct {
	context.Context
	key any
}

func (k *keyRecorder) Value(key any) any {
	k.key = key
	return nil
}

// ConnTraffic returns what c, a connection an exit transport dialled (NewExitTransport's, or a
// Transport's), has carried to and from its proxy so far, and whether c is such a connection: c
// itself, or a TLS or SOCKS5 connection around one. For tools that send through NewExitTransport
// without a pool, such as package probe, which reads it per probe. Safe for concurrent use.
func ConnTraffic(c net.Conn) (pool.Traffic, bool) {
	cc := countedOf(c)
	if cc == nil {
		return pool.Traffic{}, false
	}
	return pool.Traffic{Sent: cc.sent.Load(), Received: cc.received.Load()}, true
}
