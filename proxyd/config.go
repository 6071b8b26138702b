package proxyd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/proxybreaker/proxybreaker/transport"
)

// Defaults of Config, each used when its field is zero.
const (
	DefaultMaxHeaderBytes   = 32 << 10
	DefaultHeaderTimeout    = 10 * time.Second
	DefaultIdleTimeout      = 90 * time.Second
	DefaultHandshakeTimeout = 15 * time.Second
	DefaultFirstByteTimeout = 15 * time.Second
	// DefaultTunnelIdleTimeout closes a tunnel silent both ways for five minutes: longer than the
	// keep-alive of any browser or HTTP library (Chromium 5 min on a proxy's socket is the longest).
	DefaultTunnelIdleTimeout = 5 * time.Minute
	DefaultMaxConns          = 4096
	// DefaultSessionsKept bounds the (session, site) → exit table the report API reads.
	DefaultSessionsKept = 100_000
)

// Config tunes a Server. The zero value is a loopback daemon with every default; New validates it.
type Config struct {
	// Credentials, when set, are demanded of every client: Proxy-Authorization Basic (answered 407
	// with Proxy-Authenticate otherwise) or SOCKS5 username/password. The user name is the account
	// part of the proxy username; the options follow it (Options).
	Credentials []Credential
	// Allow, when set, is the client addresses served; others are disconnected at once.
	Allow []netip.Prefix
	// AllowPrivate lets clients relay to loopback, link-local and private addresses (safety.go).
	// Off by default; tests and crawls of a local site turn it on.
	AllowPrivate bool

	// MaxHeaderBytes bounds a plain-HTTP or CONNECT request's head. Default DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// HeaderTimeout bounds how long a client may take to send its first byte and then a request's
	// head, or the SOCKS5 handshake: a client that trickles is disconnected. Default
	// DefaultHeaderTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout is how long a kept-alive client connection may wait for its next request.
	// Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// HandshakeTimeout bounds a tunnel's setup through its exit: the dial, TLS to an https://
	// proxy, the CONNECT or SOCKS5 exchange. Default DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// FirstByteTimeout is how long a tunnel waits, from the client's first bytes, for the first
	// byte from the origin: past it the tunnel is a stall, judged a timeout and closed. Default
	// DefaultFirstByteTimeout.
	FirstByteTimeout time.Duration
	// TunnelIdleTimeout closes a tunnel whose both directions carried nothing for this long: the
	// client went quiet, which says nothing of the exit (an unjudged lease is given back neutral).
	// Default DefaultTunnelIdleTimeout.
	TunnelIdleTimeout time.Duration
	// MaxConns caps the client connections open at once across the server's listeners; one more
	// is closed as soon as it is accepted. Default DefaultMaxConns.
	MaxConns int
	// SessionsKept bounds the (session, site) → exit table (Server.ExitOfSession). Default
	// DefaultSessionsKept.
	SessionsKept int

	// ProxyTLS, when set, is the TLS configuration of a tunnel's connection to an https:// exit
	// (its RootCAs, say, for a proxy whose certificate a private CA signed); ServerName is always
	// the exit's host. Nil: the system's roots, TLS 1.2 at least. Plain HTTP through an https://
	// exit goes through the transport, whose base template's TLSClientConfig applies instead.
	ProxyTLS *tls.Config

	// OriginKey maps a target to the origin key breakers are kept per: give the transport's
	// (transport.WithOriginKey) so that plain HTTP and tunnels share breakers. Default
	// transport.OriginHost.
	OriginKey transport.OriginFunc
	// Logger receives connection-level events (debug) and errors; nil discards them. No line holds
	// a password or a session id.
	Logger *slog.Logger
}

// withDefaults fills the zero fields and validates the others.
func (c Config) withDefaults() (Config, error) {
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"HeaderTimeout", &c.HeaderTimeout, DefaultHeaderTimeout},
		{"IdleTimeout", &c.IdleTimeout, DefaultIdleTimeout},
		{"HandshakeTimeout", &c.HandshakeTimeout, DefaultHandshakeTimeout},
		{"FirstByteTimeout", &c.FirstByteTimeout, DefaultFirstByteTimeout},
		{"TunnelIdleTimeout", &c.TunnelIdleTimeout, DefaultTunnelIdleTimeout},
	} {
		switch {
		case *d.v < 0:
			return c, fmt.Errorf("proxyd: Config.%s %v must not be negative", d.name, *d.v)
		case *d.v == 0:
			*d.v = d.def
		}
	}
	for _, n := range []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxHeaderBytes", &c.MaxHeaderBytes, DefaultMaxHeaderBytes},
		{"MaxConns", &c.MaxConns, DefaultMaxConns},
		{"SessionsKept", &c.SessionsKept, DefaultSessionsKept},
	} {
		switch {
		case *n.v < 0:
			return c, fmt.Errorf("proxyd: Config.%s %d must not be negative", n.name, *n.v)
		case *n.v == 0:
			*n.v = n.def
		}
	}
	for _, p := range c.Allow {
		if !p.IsValid() {
			return c, errors.New("proxyd: Config.Allow holds an invalid prefix")
		}
	}
	if c.OriginKey == nil {
		c.OriginKey = transport.OriginHost
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// ErrOpenRelay is matched by the error of a listener beyond loopback without credentials or an
// allowlist: it would relay for anyone who can reach it.
var ErrOpenRelay = errors.New("proxyd: refusing to listen beyond loopback without credentials or an allowlist")

// CheckListen returns an error matching ErrOpenRelay when addr (host:port) is not a loopback
// address and c has neither Credentials nor Allow. A host name other than localhost counts as
// beyond loopback: it may resolve anywhere.
func (c Config) CheckListen(addr string) error {
	if len(c.Credentials) > 0 || len(c.Allow) > 0 {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("proxyd: listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Unmap().IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: %s (give credentials, an allowlist, or a loopback address)", ErrOpenRelay, addr)
}
