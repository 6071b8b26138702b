package proxyd

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestOpenRelayRefused: a listener beyond loopback without credentials or an allowlist is refused,
// by CheckListen and by Serve; either of the two makes it acceptable.
func TestOpenRelayRefused(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		addr string
		ok   bool
	}{
		{Config{}, "127.0.0.1:8118", true},
		{Config{}, "[::1]:8118", true},
		{Config{}, "localhost:8118", true},
		{Config{}, "0.0.0.0:8118", false},
		{Config{}, "[::]:8118", false},
		{Config{}, "10.0.0.5:8118", false},
		{Config{}, "proxy.example:8118", false},
		{Config{Credentials: []Credential{{"u", "p"}}}, "0.0.0.0:8118", true},
		{Config{Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, "0.0.0.0:8118", true},
	} {
		err := c.cfg.CheckListen(c.addr)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrOpenRelay)) {
			t.Errorf("CheckListen(%s) with %d credentials, %d allowed = %v, want ok %v", c.addr, len(c.cfg.Credentials), len(c.cfg.Allow), err, c.ok)
		}
	}
	p, _ := pool.New(pool.WithExits(pool.DirectExit()))
	s, err := New(p, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(addrListener{ln, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 8118}}, ""); !errors.Is(err, ErrOpenRelay) {
		t.Errorf("Serve on 192.0.2.1 without credentials = %v, want ErrOpenRelay", err)
	}
}

// addrListener is a listener that reports another address.
type addrListener struct {
	net.Listener
	addr net.Addr
}

func (l addrListener) Addr() net.Addr { return l.addr }

// TestCredentials: with credentials configured, a request without them or with others is answered
// 407 with Proxy-Authenticate (CONNECT too), a SOCKS5 client is refused; with them it goes through.
// No answer or log shows the password.
func TestCredentials(t *testing.T) {
	logger, logged := testLogger()
	w := newWorld(t, Config{AllowPrivate: true, Credentials: []Credential{{"alice", "s3cret-pw"}}, Logger: logger}, "", exitSpec{label: "a"})
	srv, _ := w.origin(false)
	for _, user := range []string{"", "alice:wrong-pw", "bob:s3cret-pw", "alice-session-1:wrong-pw"} {
		resp := rawGet(t, w, srv.URL, user)
		if resp.StatusCode != http.StatusProxyAuthRequired || resp.Header.Get("Proxy-Authenticate") != `Basic realm="proxybreakerd"` {
			t.Errorf("user %q: %d %q, want 407 with Proxy-Authenticate", user, resp.StatusCode, resp.Header.Get("Proxy-Authenticate"))
		}
	}
	if code, body, _ := get(t, w.client("alice-session-1:s3cret-pw", nil, nil), srv.URL); code != 200 || body != "hello from a" {
		t.Errorf("alice with her password: %d %q, want 200", code, body)
	}
	if _, err := w.socksClient("alice:wrong-pw", nil).Get(srv.URL); err == nil {
		t.Error("SOCKS5 with a wrong password went through")
	}
	if _, err := w.socksClient("", nil).Get(srv.URL); err == nil {
		t.Error("SOCKS5 without credentials went through")
	}
	// country-x matches no exit: the SOCKS5 CONNECT is refused by the ruleset code.
	if _, err := w.socksClient("alice-country-x:s3cret-pw", nil).Get(srv.URL); err == nil || !strings.Contains(err.Error(), "not allowed by ruleset") {
		t.Errorf("SOCKS5 with options no exit matches: %v, want refused by ruleset", err)
	}
	if st := w.s.Stats(); st.AuthRefused < 4 {
		t.Errorf("auth refusals = %d, want at least 4", st.AuthRefused)
	}
	if l := logged(); strings.Contains(l, "s3cret") || strings.Contains(l, "wrong-pw") {
		t.Errorf("the log shows a password:\n%s", l)
	}
}

// rawGet sends a plain-HTTP proxy request with user (user:pass) as Basic credentials, when set.
func rawGet(t *testing.T, w *world, u, user string) *http.Response {
	t.Helper()
	c := w.dialDaemon()
	req := "GET " + u + " HTTP/1.1\r\nHost: x\r\n"
	if user != "" {
		name, pass, _ := strings.Cut(user, ":")
		req += "Proxy-Authorization: Basic " + basic(name, pass) + "\r\n"
	}
	io.WriteString(c, req+"\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestPrivateTargetsRefused: without AllowPrivate, loopback, link-local (cloud metadata), private
// and unique-local targets are refused before any pick — plain HTTP, CONNECT and SOCKS5 alike —
// and a name that resolves to loopback is refused at the direct exit's dial.
func TestPrivateTargetsRefused(t *testing.T) {
	w := newWorld(t, Config{}, "", exitSpec{label: "direct"})
	for _, target := range []string{"127.0.0.1:80", "169.254.169.254:80", "10.1.2.3:443", "192.168.0.1:80", "172.16.5.5:80",
		"100.64.0.1:80", "0.0.0.0:80", "[::1]:443", "[fe80::1]:443", "[fd00::1]:443", "[::ffff:127.0.0.1]:80", "localhost:80", "a.localhost:80"} {
		resp := rawGet(t, w, "http://"+target+"/", "")
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get("Proxy-Status"), "error=destination_ip_prohibited") {
			t.Errorf("GET http://%s/: %d %q, want 403 destination_ip_prohibited", target, resp.StatusCode, resp.Header.Get("Proxy-Status"))
		}
		resp2, _, _ := w.connect(target)
		if resp2.StatusCode != http.StatusForbidden {
			t.Errorf("CONNECT %s: %d, want 403", target, resp2.StatusCode)
		}
	}
	// SOCKS5 to a private IPv4 address: "connection not allowed by ruleset".
	c := w.dialDaemon()
	c.Write([]byte{5, 1, 0, 5, 1, 0, socksIPv4, 10, 0, 0, 1, 0, 80})
	reply := make([]byte, 12)
	if _, err := io.ReadFull(c, reply); err != nil || reply[3] != socksNotAllowed {
		t.Errorf("SOCKS5 CONNECT 10.0.0.1: reply %v, %v; want code %d", reply, err, socksNotAllowed)
	}
	// A name that is not "localhost" but resolves to loopback (this machine's own name, from
	// /etc/hosts) passes the literal check and is refused by the direct exit's dial: the address
	// checked is the one resolved.
	host := loopbackName(t)
	srv, _ := w.origin(false)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	target := net.JoinHostPort(host, port)
	if resp := rawGet(t, w, "http://"+target+"/", ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET http://%s/ (resolves to loopback) through the direct exit: %d, want 403", target, resp.StatusCode)
	}
	if resp, _, _ := w.connect(target); resp.StatusCode != http.StatusForbidden {
		t.Errorf("CONNECT %s (resolves to loopback) through the direct exit: %d, want 403", target, resp.StatusCode)
	}
	if st := w.s.pool.Snapshot(); len(st.Pairs) != 0 || st.Exits[0].Breaker.FailuresInWindow != 0 {
		t.Errorf("refused targets counted against the direct exit: %+v", st.Pairs)
	}
}

// loopbackName returns this machine's host name, which resolves to a loopback address (from
// /etc/hosts), and skips the test where it does not.
func loopbackName(t *testing.T) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Skip("no host name")
	}
	ips, err := net.DefaultResolver.LookupNetIP(context.Background(), "ip", host)
	if err != nil || len(ips) == 0 || !ips[0].IsLoopback() {
		t.Skipf("host name %q does not resolve to loopback (%v %v)", host, ips, err)
	}
	return host
}

// TestSOCKS5ExitResolvedNameRefused: a socks5:// exit is handed the address the daemon's side
// resolved the target's name to, so a name that passes the literal check but resolves to
// loopback is refused over plain HTTP (the transport's lookup, checked at its dial) as over a
// tunnel (the daemon's own): 403, nothing reaches the origin, nothing counts against the exit.
// With -allow-private the same request goes through.
func TestSOCKS5ExitResolvedNameRefused(t *testing.T) {
	host := loopbackName(t)
	for _, allow := range []bool{false, true} {
		w := newWorld(t, Config{AllowPrivate: allow}, "", exitSpec{label: "s", cfg: proxytest.Config{SOCKS5: true}})
		srv, seen := w.origin(false)
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
		target := net.JoinHostPort(host, port)
		resp := rawGet(t, w, "http://"+target+"/", "")
		resp.Body.Close()
		resp2, _, _ := w.connect(target)
		if !allow {
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(resp.Header.Get("Proxy-Status"), "error=destination_ip_prohibited") {
				t.Errorf("GET http://%s/ (resolves to loopback) via socks5://: %d %q, want 403 destination_ip_prohibited", target, resp.StatusCode, resp.Header.Get("Proxy-Status"))
			}
			if resp2.StatusCode != http.StatusForbidden {
				t.Errorf("CONNECT %s via socks5://: %d, want 403", target, resp2.StatusCode)
			}
			if n := len(*seen); n != 0 {
				t.Errorf("the origin saw %d requests, want 0", n)
			}
			if st := w.s.pool.Snapshot(); len(st.Pairs) != 0 || st.Exits[0].Breaker.FailuresInWindow != 0 {
				t.Errorf("refused targets counted against the socks5 exit: %+v", st.Pairs)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK || len(*seen) != 1 {
			t.Errorf("with AllowPrivate: GET %d, origin saw %d; want 200 and 1", resp.StatusCode, len(*seen))
		}
		if resp2.StatusCode != http.StatusOK {
			t.Errorf("with AllowPrivate: CONNECT %d, want 200", resp2.StatusCode)
		}
	}
}

// TestSlowClientsAreCut: a client that trickles a request head, one that trickles a SOCKS5
// handshake and one that sends nothing are disconnected by the header timeout before they finish.
func TestSlowClientsAreCut(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true, HeaderTimeout: 300 * time.Millisecond}, "", exitSpec{label: "a"})
	for _, c := range []struct {
		name  string
		first string
		drip  string
	}{
		{"http head", "GET http://127.0.0.1:1/ HTTP/1.1\r\n", "X-Slow: 1\r\n"},
		{"socks5 greeting", "\x05", "\x01"},
		{"silent", "", ""},
	} {
		conn := w.dialDaemon()
		io.WriteString(conn, c.first)
		const lines = 100
		sent := 0
		for ; sent < lines; sent++ {
			if c.drip != "" {
				if _, err := io.WriteString(conn, c.drip); err != nil {
					break
				}
			}
			conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			if _, err := conn.Read(make([]byte, 1)); err != nil && !isTimeoutErr(err) {
				break // closed by the daemon
			}
		}
		if sent == lines {
			t.Errorf("%s: the daemon kept the connection through %d drips, want it cut", c.name, lines)
		}
	}
}

// TestConnectionCap: past MaxConns open client connections, one more is closed at once.
func TestConnectionCap(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true, MaxConns: 2}, "", exitSpec{label: "a"})
	a, b := w.dialDaemon(), w.dialDaemon()
	waitFor(t, "two connections accepted", func() bool { return w.s.Stats().ConnsAccepted == 2 })
	c := w.dialDaemon()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); isTimeoutErr(err) {
		t.Error("a third connection past MaxConns 2 stayed open")
	}
	if st := w.s.Stats(); st.ConnsOverCap != 1 {
		t.Errorf("connections over the cap = %d, want 1", st.ConnsOverCap)
	}
	a.Close()
	b.Close()
	waitFor(t, "the slots to free", func() bool { return w.s.conns.Load() == 0 })
	srv, _ := w.origin(false)
	if code, _, _ := get(t, w.client("", nil, nil), srv.URL); code != 200 {
		t.Errorf("after the two closed: %d, want 200", code)
	}
}

// TestAllowlistAndHeaderLimit: a client outside the allowlist is disconnected; a request head past
// MaxHeaderBytes is answered 431.
func TestAllowlistAndHeaderLimit(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true, Allow: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, "", exitSpec{label: "a"})
	c := w.dialDaemon()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); isTimeoutErr(err) {
		t.Error("a client outside the allowlist stayed connected")
	}
	if st := w.s.Stats(); st.ConnsNotAllowed != 1 {
		t.Errorf("connections not allowed = %d, want 1", st.ConnsNotAllowed)
	}
	w2 := newWorld(t, Config{AllowPrivate: true, MaxHeaderBytes: 4 << 10}, "", exitSpec{label: "a"})
	srv, _ := w2.origin(false)
	resp := rawGetHeader(t, w2, srv.URL, strings.Repeat("x", 16<<10))
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("a 16 KiB header with MaxHeaderBytes 4 KiB: %d, want 431", resp.StatusCode)
	}
}

func rawGetHeader(t *testing.T, w *world, u, value string) *http.Response {
	t.Helper()
	c := w.dialDaemon()
	go io.WriteString(c, "GET "+u+" HTTP/1.1\r\nHost: x\r\nX-Big: "+value+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestShutdownDrainsTunnels: Shutdown waits for a live tunnel while its deadline lasts, then
// closes it and says so; a server with no tunnel shuts down cleanly.
func TestShutdownDrainsTunnels(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "a"})
	_, conn, br := w.connect(rawOrigin(t, echo))
	conn.Write([]byte("x"))
	io.ReadFull(br, make([]byte, 1))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := w.s.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown with a live tunnel = %v, want DeadlineExceeded", err)
	}
	if !closedByDaemon(conn, br) {
		t.Error("the tunnel outlived Shutdown's deadline")
	}
	if n := w.s.tunnels.len(); n != 0 {
		waitFor(t, "the tunnel to end", func() bool { return w.s.tunnels.len() == 0 })
	}

	w2 := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "a"})
	_, conn2, br2 := w2.connect(rawOrigin(t, echo))
	conn2.Write([]byte("y"))
	io.ReadFull(br2, make([]byte, 1))
	done := make(chan error, 1)
	go func() { done <- w2.s.Shutdown(context.Background()) }()
	conn2.Close() // the client ends its tunnel: Shutdown returns
	if err := <-done; err != nil {
		t.Errorf("Shutdown after the last tunnel ended = %v, want nil", err)
	}
}
