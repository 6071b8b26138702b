package probe

import (
	"context"
	"math"
	"net"
	"net/http"
	"sync"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Bytes and spend. Each probe's transport dials through a connLog, which keeps the connections it
// dialled; when the probe ends, what they carried to and from the proxy (transport.ConnTraffic:
// the proxy's CONNECT or SOCKS5 exchange, TLS, headers and the body read, up to BodyLimit) is the
// probe's Result.Bytes, and that priced at the exit's own cost attributes (cost-per-gb,
// cost-per-request; pool.Exit.Cost) its Result.Spend. A probe that reached no proxy moved nothing
// and costs nothing; one that did costs its exit's price per request besides its bytes. The
// Stats of every group sum them: the exits' summaries say what each exit carried and cost, and
// Overall.Spend estimates what the run spent at the providers — the probe's own traffic, which a
// quota-billed tier pays for like any other. Tier prices set in code (pool.WithTierCost) are a
// pool's, and the probe has none: give the exits their prices as attributes. An https:// proxy's
// connections (a template's DialTLSContext) are not counted, as in package transport.

// connLog keeps the connections a probe's transport dialled.
type connLog struct {
	mu    sync.Mutex
	conns []net.Conn
}

// wrap makes rt dial through l.
func (l *connLog) wrap(rt *http.Transport) {
	dial := rt.DialContext
	if dial == nil {
		return // NewExitTransport always sets one; without it there is nothing to count
	}
	rt.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if c != nil {
			l.mu.Lock()
			l.conns = append(l.conns, c)
			l.mu.Unlock()
		}
		return c, err
	}
}

// traffic returns what l's connections carried so far.
func (l *connLog) traffic() pool.Traffic {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sum pool.Traffic
	for _, c := range l.conns {
		if tr, ok := transport.ConnTraffic(c); ok {
			sum = sum.Add(tr)
		}
	}
	return sum
}

// account sets res's Bytes and Spend from what the probe's connections carried, priced at e's
// own cost attributes.
func account(res *Result, l *connLog, e *pool.Exit) {
	tr := l.traffic()
	if tr == (pool.Traffic{}) {
		return
	}
	res.Bytes = tr.Sent + tr.Received
	if c, ok := e.Cost(); ok {
		res.Spend = roundSpend(c.Of(tr))
	}
}

// roundSpend rounds a spend to a billionth of its unit, the precision the pool counts in.
func roundSpend(v float64) float64 { return math.Round(v*1e9) / 1e9 }
