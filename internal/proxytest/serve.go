package proxytest

import (
	"bufio"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
)

// realm is the Basic realm named in Proxy-Authenticate.
const realm = "proxytest"

// serve handles one client connection: a keep-alive series of plain HTTP requests, or one CONNECT
// request followed by its tunnel, or (Config.SOCKS5) one SOCKS5 session.
func (p *Proxy) serve(c net.Conn) {
	if p.cfg.Hang {
		drain(c)
		return
	}
	if p.cfg.SOCKS5 {
		p.serveSOCKS(c)
		return
	}
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			if !isHangup(err) {
				p.reject(c, http.StatusBadRequest, "malformed request")
			}
			return
		}
		if req.Method == http.MethodConnect {
			p.tunnel(c, br, req)
			return
		}
		if !p.forward(c, req) {
			return
		}
	}
}

// isHangup reports whether a read error means the client went away rather than sent garbage.
func isHangup(err error) bool {
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, net.ErrClosed) || errors.As(err, &ne)
}

// admit judges the credentials in h and returns the source address the upstream dial binds to
// (the zero Addr: the kernel's choice). A gateway judges its own (Gateway.admit).
func (p *Proxy) admit(h http.Header) (netip.Addr, bool) {
	if p.gw != nil {
		return p.gw.admit(h)
	}
	return netip.Addr{}, p.authorized(h)
}

// authorized reports whether h carries the credentials the proxy expects.
func (p *Proxy) authorized(h http.Header) bool {
	if p.cfg.User == "" {
		return true
	}
	user, pass, ok := parseBasic(h.Get("Proxy-Authorization"))
	// Both comparisons always run, so the time taken says nothing about which one failed.
	userOK := subtle.ConstantTimeCompare([]byte(user), []byte(p.cfg.User))
	passOK := subtle.ConstantTimeCompare([]byte(pass), []byte(p.cfg.Pass))
	return ok && userOK&passOK == 1
}

// parseBasic decodes the value of a Basic Proxy-Authorization header.
func parseBasic(v string) (user, pass string, ok bool) {
	scheme, cred, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}

// rejectAuth answers 407 and counts a rejection.
func (p *Proxy) rejectAuth(c net.Conn) {
	p.rejected.Add(1)
	p.reply(c, http.StatusProxyAuthRequired, "proxy credentials missing or wrong",
		"Proxy-Authenticate", `Basic realm="`+realm+`"`)
}

// reject answers status and counts a rejection.
func (p *Proxy) reject(c net.Conn, status int, reason string) {
	p.rejected.Add(1)
	p.reply(c, status, reason)
}

// reply writes a complete error response that closes the connection. kv holds extra header
// names and values, alternating. Write errors are ignored: the connection is closed next anyway.
func (p *Proxy) reply(c net.Conn, status int, reason string, kv ...string) {
	body := fmt.Sprintf("proxytest %s: %s\n", p.cfg.Name, reason)
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", status, http.StatusText(status))
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", kv[i], kv[i+1])
	}
	fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		len(body), body)
	io.WriteString(c, b.String())
}

// loopbackTarget turns host and port into a dialable loopback address, or reports false when the
// target would leave the machine. "localhost" is taken as 127.0.0.1 without asking a resolver.
func loopbackTarget(host, port string) (string, bool) {
	if strings.EqualFold(host, "localhost") {
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil || !ip.IsLoopback() {
		return "", false
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", false
	}
	return net.JoinHostPort(ip.String(), port), true
}

// dial connects to a loopback target from source address from (the zero Addr: the kernel's
// choice), registers the connection and tracks the connection, all before the caller can write on
// it. The caller must untrack it when done.
func (p *Proxy) dial(target string, from netip.Addr) (net.Conn, error) {
	d := net.Dialer{Timeout: DialTimeout}
	if !from.IsValid() && p.cfg.SourceAddr != "" {
		// validate checked it: a loopback IP address.
		from, _ = netip.ParseAddr(p.cfg.SourceAddr)
	}
	if from.IsValid() {
		d.LocalAddr = &net.TCPAddr{IP: from.AsSlice()}
	}
	up, err := d.DialContext(p.ctx, "tcp", target)
	if err != nil {
		return nil, err
	}
	if !p.track(up) {
		up.Close()
		return nil, net.ErrClosed
	}
	if p.cfg.Registry != nil {
		p.cfg.Registry.register(up, p.cfg.Name)
	}
	return up, nil
}

// drain reads and discards r until it fails, which for a connection means the peer hung up or the
// proxy closed it.
func drain(r io.Reader) {
	io.Copy(io.Discard, r)
}
