package transport

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"golang.org/x/net/proxy"
)

// forwardDialer adapts a DialContext func to proxy.ContextDialer.
type forwardDialer func(ctx context.Context, network, addr string) (net.Conn, error)

func (f forwardDialer) Dial(network, addr string) (net.Conn, error) {
	return f(context.Background(), network, addr)
}

func (f forwardDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return f(ctx, network, addr)
}

// socksDialer dials through the exit's SOCKS5 proxy. socks5h hands the origin's name to the proxy;
// socks5 resolves it here first. A proxy that turns the credentials down fails the dial with a
// *socksAuthError, told from the SOCKS5 replies themselves (socksWatch), not from x/net/proxy's
// message text.
func socksDialer(e *pool.Exit, template *http.Transport, resolver *net.Resolver, counter connCounter) func(ctx context.Context, network, addr string) (net.Conn, error) {
	u := e.ProxyURL()
	var auth *proxy.Auth
	if u.User != nil {
		pass, _ := u.User.Password()
		auth = &proxy.Auth{User: u.User.Username(), Password: pass}
	}
	forward := template.DialContext
	if forward == nil {
		forward = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	localDNS := e.Scheme() == pool.SchemeSOCKS5
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if localDNS {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if net.ParseIP(host) == nil {
				ips, err := resolver.LookupIPAddr(ctx, host)
				if err != nil {
					return nil, &originDNSError{err}
				}
				if len(ips) == 0 {
					return nil, &originDNSError{fmt.Errorf("no address for %s", host)}
				}
				addr = net.JoinHostPort(ips[0].IP.String(), port)
			}
		}
		// A dialer per connection, so that this dial's handshake is the one watched. proxy.SOCKS5
		// only allocates; the TCP and SOCKS handshakes that follow cost far more.
		var watch *socksWatch
		var counted *countedConn // under the handshake, so that it counts too (traffic.go)
		d, err := proxy.SOCKS5("tcp", u.Host, auth, forwardDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := forward(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			counted = counter.wrap(ctx, c)
			watch = &socksWatch{Conn: counted, userPass: auth != nil}
			return watch, nil
		}))
		if err != nil { // only for an unknown network, which net/http never asks for
			return nil, fmt.Errorf("transport: exit %s: socks5: %w", e.Label(), err)
		}
		c, err := d.(proxy.ContextDialer).DialContext(ctx, network, addr)
		if err != nil && watch != nil && watch.authRejected() {
			return nil, &socksAuthError{exit: e.Label(), err: err}
		}
		if err != nil {
			return nil, err
		}
		return &socksConn{Conn: c, counted: counted}, nil
	}
}

// socksConn is a connection through a SOCKS5 proxy, as x/net/proxy returned it, naming the
// *countedConn beneath it (countedOf).
type socksConn struct {
	net.Conn
	counted *countedConn
}

func (c *socksConn) countedConn() *countedConn { return c.counted }

// socksWatch is the connection to a SOCKS5 proxy, watching the first bytes the proxy sends: its
// method selection (RFC 1928: VER METHOD) and, when credentials were offered and it chose
// username/password, the status of the credential check (RFC 1929: VER STATUS). After those it
// only passes reads on. The dialing goroutine reads during the handshake and looks at the result
// after it; the connection changes hands only afterwards.
type socksWatch struct {
	net.Conn
	userPass bool // credentials were offered
	seen     [4]byte
	n        int  // bytes of seen filled
	done     bool // nothing more to watch
}

// SOCKS5 values socksWatch looks for.
const (
	socksMethodUserPass     = 0x02
	socksMethodNoAcceptable = 0xFF
	socksUserPassVersion    = 0x01
	socksUserPassOK         = 0x00
)

func (w *socksWatch) Read(b []byte) (int, error) {
	n, err := w.Conn.Read(b)
	if !w.done {
		w.observe(b[:n])
	}
	return n, err
}

// observe records the handshake bytes in p, which follow those already seen.
func (w *socksWatch) observe(p []byte) {
	w.n += copy(w.seen[w.n:], p)
	if w.n == len(w.seen) || (w.n >= 2 && (!w.userPass || w.seen[1] != socksMethodUserPass)) {
		w.done = true // the status is in, or there is no credential check to watch
	}
}

// authRejected reports whether the proxy refused every authentication method offered (which, with
// credentials offered, means it wants others; without, that it wants some), or checked the
// credentials and failed them.
func (w *socksWatch) authRejected() bool {
	if w.n < 2 {
		return false
	}
	switch w.seen[1] {
	case socksMethodNoAcceptable:
		return true
	case socksMethodUserPass:
		return w.userPass && w.n == len(w.seen) && w.seen[2] == socksUserPassVersion && w.seen[3] != socksUserPassOK
	}
	return false
}
