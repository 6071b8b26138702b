package proxyd

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// A tunnel reaches its target through the exit the pool picked, as the transport's base
// transports do, but hands the client raw bytes: through an http:// or https:// proxy by CONNECT,
// through a socks5:// or socks5h:// proxy by the SOCKS5 CONNECT command, or — for a direct exit —
// by dialling the target itself (the only dial the SSRF guard checks by resolved address).

// countConn is a tunnel's connection to its exit (or, for a direct exit, to the target): it
// replays what the handshake read ahead, and holds the bytes that crossed the socket beneath
// (rawCount, under TLS to an https:// proxy), the handshake included.
type countConn struct {
	net.Conn
	ahead          []byte // read past the proxy's reply, served first
	sent, received atomic.Int64
}

func (c *countConn) Read(b []byte) (int, error) {
	if len(c.ahead) > 0 {
		n := copy(b, c.ahead)
		c.ahead = c.ahead[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

func (c *countConn) traffic() pool.Traffic {
	return pool.Traffic{Sent: c.sent.Load(), Received: c.received.Load()}
}

// closeWrite half-closes the connection towards the target, when the transport allows it.
func (c *countConn) closeWrite() {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// rawCount is the socket beneath a countConn, counting into it.
type rawCount struct {
	net.Conn
	c *countConn
}

func (r *rawCount) Read(b []byte) (int, error) {
	n, err := r.Conn.Read(b)
	r.c.received.Add(int64(n))
	return n, err
}

func (r *rawCount) Write(b []byte) (int, error) {
	n, err := r.Conn.Write(b)
	r.c.sent.Add(int64(n))
	return n, err
}

// CloseWrite half-closes the socket.
func (r *rawCount) CloseWrite() error {
	if cw, ok := r.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// dialResult is a tunnel's connection through its exit, or why there is none.
type dialResult struct {
	conn     *countConn  // nil on failure; its bytes count toward the exit even then
	received int         // the exit's status answering a CONNECT; 0 for SOCKS5 and direct exits
	reply    http.Header // the headers of the exit's 200 answering a CONNECT (a gateway's egress IP)
	err      error
}

// dialThrough connects to target (host:port) through e within the handshake timeout.
func (s *Server) dialThrough(ctx context.Context, e *pool.Exit, target string) dialResult {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.HandshakeTimeout)
	defer cancel()
	cc := &countConn{}
	switch e.Scheme() {
	case pool.SchemeDirect:
		c, err := s.directDial(ctx, target)
		if err != nil {
			return dialResult{err: err}
		}
		cc.Conn = &rawCount{Conn: c, c: cc}
		return dialResult{conn: cc}
	case pool.SchemeSOCKS5, pool.SchemeSOCKS5H:
		err := s.socksThrough(ctx, e, target, cc)
		return s.result(cc, 0, err)
	default:
		status, reply, err := s.connectThrough(ctx, e, target, cc)
		d := s.result(cc, status, err)
		d.reply = reply
		return d
	}
}

func (s *Server) result(cc *countConn, status int, err error) dialResult {
	if err != nil {
		if cc.Conn != nil {
			cc.Conn.Close()
		}
		return dialResult{conn: cc, received: status, err: err}
	}
	cc.Conn.SetDeadline(time.Time{})
	return dialResult{conn: cc, received: status}
}

// directDial dials target itself, refusing forbidden addresses after resolution.
func (s *Server) directDial(ctx context.Context, target string) (net.Conn, error) {
	d := net.Dialer{}
	if !s.cfg.AllowPrivate {
		d.Control = guardControl
	}
	c, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		var dnsErr *net.DNSError
		switch {
		case errors.Is(err, ErrForbiddenTarget), ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded):
			return nil, err
		case errors.As(err, &dnsErr):
			return nil, &originFault{err: err, dns: true}
		}
		return nil, &originFault{err: err}
	}
	return c, nil
}

// originFault is a failure to reach the origin that no proxy stands behind: a direct exit's dial,
// or a socks5:// exit's local lookup of the target's name.
type originFault struct {
	err error
	dns bool
}

func (e *originFault) Error() string { return "proxyd: origin: " + e.err.Error() }
func (e *originFault) Unwrap() error { return e.err }

// dialProxy connects to e's proxy, beneath TLS for an https:// one, counted in cc, with the
// handshake deadline set.
func (s *Server) dialProxy(ctx context.Context, e *pool.Exit, cc *countConn) error {
	u := e.ProxyURL()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return err
	}
	var c net.Conn = &rawCount{Conn: raw, c: cc}
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if e.Scheme() == pool.SchemeHTTPS {
		conf := &tls.Config{MinVersion: tls.VersionTLS12}
		if s.cfg.ProxyTLS != nil {
			conf = s.cfg.ProxyTLS.Clone()
		}
		conf.ServerName = u.Hostname()
		tc := tls.Client(c, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			raw.Close()
			return err
		}
		c = tc
	}
	cc.Conn = c
	return nil
}

// connectThrough opens a CONNECT tunnel to target through e's HTTP proxy. It returns the status
// the proxy answered and, on 200, its headers; a status other than 200 is a
// *transport.ProxyConnectError carrying the proxy's status line and headers, which
// transport.DefaultClassifier judges.
func (s *Server) connectThrough(ctx context.Context, e *pool.Exit, target string, cc *countConn) (int, http.Header, error) {
	if err := s.dialProxy(ctx, e, cc); err != nil {
		return 0, nil, err
	}
	c := cc.Conn
	req := "CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n"
	if u := e.ProxyURL(); u.User != nil {
		pass, _ := u.User.Password()
		req += "Proxy-Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass)) + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return 0, nil, err
	}
	lr := &capReader{r: c, left: int64(s.cfg.MaxHeaderBytes)}
	br := bufio.NewReaderSize(lr, 4096)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return resp.StatusCode, nil, &transport.ProxyConnectError{Exit: e.Label(), StatusCode: resp.StatusCode, Status: resp.Status, Header: resp.Header}
	}
	if n := br.Buffered(); n > 0 {
		cc.ahead, _ = br.Peek(n)
	}
	return http.StatusOK, resp.Header, nil
}

// errReplyTooLarge is a proxy reply head beyond Config.MaxHeaderBytes.
var errReplyTooLarge = errors.New("proxyd: the exit's CONNECT reply head is too large")

// capReader reads at most left bytes, then fails.
type capReader struct {
	r    io.Reader
	left int64
}

func (c *capReader) Read(b []byte) (int, error) {
	if c.left <= 0 {
		return 0, errReplyTooLarge
	}
	if int64(len(b)) > c.left {
		b = b[:c.left]
	}
	n, err := c.r.Read(b)
	c.left -= int64(n)
	return n, err
}

// socksThrough opens a SOCKS5 CONNECT to target through e (RFC 1928, RFC 1929 credentials). A
// socks5:// exit resolves the target's name here, and its address is checked like a direct dial's;
// a socks5h:// exit hands the name on.
func (s *Server) socksThrough(ctx context.Context, e *pool.Exit, target string, cc *countConn) error {
	host, portStr, err := net.SplitHostPort(target)
	if err != nil {
		return err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return fmt.Errorf("proxyd: target port %q", portStr)
	}
	addr, ipErr := netip.ParseAddr(host)
	if ipErr != nil && e.Scheme() == pool.SchemeSOCKS5 {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil || len(ips) == 0 {
			return &originFault{err: fmt.Errorf("lookup %s: %v", host, err), dns: true}
		}
		addr, ipErr = ips[0].Unmap(), nil
		if !s.cfg.AllowPrivate && forbiddenAddr(addr) {
			return &forbiddenTarget{addr.String()}
		}
	}
	if err := s.dialProxy(ctx, e, cc); err != nil {
		return err
	}
	c := cc.Conn
	u := e.ProxyURL()
	var user, pass string
	if u.User != nil {
		user = u.User.Username()
		pass, _ = u.User.Password()
	}
	greet := []byte{socksVersion, 1, socksNoAuth}
	if user != "" {
		greet = []byte{socksVersion, 2, socksNoAuth, socksUserPass}
	}
	if _, err := c.Write(greet); err != nil {
		return err
	}
	var b [2]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return err
	}
	switch {
	case b[0] != socksVersion:
		return errors.New("proxyd: the exit does not speak SOCKS5")
	case b[1] == socksUserPass && user != "":
		msg := append([]byte{1, byte(len(user))}, user...)
		msg = append(append(msg, byte(len(pass))), pass...)
		if _, err := c.Write(msg); err != nil {
			return err
		}
		if _, err := io.ReadFull(c, b[:]); err != nil {
			return err
		}
		if b[1] != 0 {
			return errSOCKSAuth
		}
	case b[1] != socksNoAuth:
		return errSOCKSAuth
	}
	req := []byte{socksVersion, socksConnect, 0}
	switch {
	case ipErr == nil && addr.Unmap().Is4():
		a := addr.Unmap().As4()
		req = append(append(req, socksIPv4), a[:]...)
	case ipErr == nil:
		a := addr.As16()
		req = append(append(req, socksIPv6), a[:]...)
	default:
		if len(host) > 255 {
			return fmt.Errorf("proxyd: target name of %d bytes", len(host))
		}
		req = append(append(req, socksDomain, byte(len(host))), host...)
	}
	req = append(req, byte(port>>8), byte(port))
	if _, err := c.Write(req); err != nil {
		return err
	}
	if err := readSOCKSReply(c); err != nil {
		return err
	}
	return nil
}

// readSOCKSReply reads a SOCKS5 reply (its bound address included) and returns a *socksReplyError
// for any code but success.
func readSOCKSReply(r io.Reader) error {
	var h [4]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return err
	}
	if h[0] != socksVersion {
		return errors.New("proxyd: the exit's SOCKS5 reply has a wrong version")
	}
	var n int
	switch h[3] {
	case socksIPv4:
		n = 4
	case socksIPv6:
		n = 16
	case socksDomain:
		var l [1]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return err
		}
		n = int(l[0])
	default:
		return errors.New("proxyd: the exit's SOCKS5 reply has an unknown address type")
	}
	if _, err := io.ReadFull(r, make([]byte, n+2)); err != nil {
		return err
	}
	if h[1] != socksSucceeded {
		return &socksReplyError{code: h[1]}
	}
	return nil
}

// errSOCKSAuth is a SOCKS5 exit that refused the credentials, or every method offered: the SOCKS
// form of a 407.
var errSOCKSAuth = errors.New("proxyd: the SOCKS5 exit rejected the credentials")

// socksReplyError is a SOCKS5 exit's CONNECT reply other than success.
type socksReplyError struct{ code byte }

func (e *socksReplyError) Error() string {
	return fmt.Sprintf("proxyd: the SOCKS5 exit answered CONNECT with code %d", e.code)
}

// judgeDial returns the verdict of a tunnel whose setup through e failed with err.
func (s *Server) judgeDial(ctx context.Context, e *pool.Exit, origin string, err error) pool.Verdict {
	var of *originFault
	var sr *socksReplyError
	switch {
	case errors.Is(err, ErrForbiddenTarget):
		return pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassBadRequest}
	case transport.IsLocalExhaustion(err):
		// The daemon ran out of descriptors (or buffers): no exit's fault, and judging it as the
		// pair's would open it and close every live tunnel on it.
		return pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassNotAttempted}
	case ctx.Err() != nil:
		return pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}
	case errors.As(err, &of) && of.dns:
		return pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginDNS}
	case errors.As(err, &of) && isTimeoutErr(of.err):
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
	case errors.As(err, &of):
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassUpstream, Soft: true}
	case errors.Is(err, errSOCKSAuth):
		return pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	case errors.As(err, &sr):
		return socksReplyVerdict(sr.code)
	}
	return transport.DefaultClassifier.Classify(&transport.Attempt{Err: err, Exit: e, Origin: origin, Now: s.pool.Clock().Now()})
}

// socksReplyVerdict judges a SOCKS5 exit's refusal by its code (RFC 1928 §6).
func socksReplyVerdict(code byte) pool.Verdict {
	switch code {
	case socksNotAllowed:
		return pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopePair, Class: pool.ClassProxyDenied}
	case socksCommandUnsupported, socksAddressUnsupported:
		return pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassBadRequest}
	case socksTTLExpired:
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
	}
	// General failure, network or host unreachable, refused: the exit could not reach the
	// target — the target's trouble or this exit's route to it (like a CONNECT answered 502).
	return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassUpstream, Soft: true}
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
