package transport

import (
	"context"
	"errors"
	"net"
	"net/http"
)

// Direct exits (pool.DirectExit, "direct" in a proxy list) have no proxy: their *http.Transport
// has a nil Proxy and dials origins itself, through a counting connection like every exit's
// (traffic.go), so a direct exit's bytes are those it exchanged with the origin, TLS included.
// Only an exit the user made direct dials this way: a refused pick still sends nothing.
//
// With no proxy in between, a failed dial is the origin's: its name did not resolve, or it did not
// answer. directDial says so with the errors the classifier reads (originDNSError, which socks5://
// exits use for the same fault, and originDialError), where a proxy exit's failed dial would blame
// the proxy and park the exit for every origin.

// originDialError marks a direct exit's failed dial to an origin: refused, unreachable or timed
// out. The classifier judges it as a proxy's failure to reach the target (upstreamUnreachable):
// the origin's trouble, or this exit's route to it, counted on the pair and by the origin guard.
type originDialError struct{ err error }

func (e *originDialError) Error() string { return "transport: direct dial to origin: " + e.err.Error() }
func (e *originDialError) Unwrap() error { return e.err }

// directTransport sets tr, cloned from template, to dial origins with no proxy, counting what its
// connections carry for k.
func directTransport(tr, template *http.Transport, k connCounter) {
	tr.Proxy = nil
	tr.DialContext = directDial(countingDial(k, template.DialContext, template.Dial))
}

// directDial wraps dial so that its failures name the origin (see above): a failed lookup of the
// origin's name, timed out or not, is an originDNSError; any other failure an originDialError. A
// dial whose context ended (the caller's, or the transport's header timeout) keeps its error, which
// the classifier judges by what ended it.
func directDial(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err == nil {
			return c, nil
		}
		var dnsErr *net.DNSError
		switch {
		case ctx.Err() != nil:
			return nil, err
		case errors.As(err, &dnsErr):
			return nil, &originDNSError{err}
		}
		return nil, &originDialError{err}
	}
}
