package proxytest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/proxy"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

// socksClient returns a client that dials every connection through the SOCKS5 proxy p with
// golang.org/x/net/proxy, offering user and pass when user is not empty, and trusts origin's
// certificate when origin is not nil.
func socksClient(t *testing.T, p *proxytest.Proxy, user, pass string, origin *httptest.Server) *http.Client {
	t.Helper()
	tr := &http.Transport{DialContext: socksDialer(t, p, user, pass).DialContext, ForceAttemptHTTP2: true}
	if origin != nil {
		pool := x509.NewCertPool()
		pool.AddCert(origin.Certificate())
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// socksDialer is golang.org/x/net/proxy's SOCKS5 dialer for p.
func socksDialer(t *testing.T, p *proxytest.Proxy, user, pass string) proxy.ContextDialer {
	t.Helper()
	var auth *proxy.Auth
	if user != "" {
		auth = &proxy.Auth{User: user, Password: pass}
	}
	d, err := proxy.SOCKS5("tcp", p.Addr(), auth, &net.Dialer{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("proxy.SOCKS5 = %v", err)
	}
	return d.(proxy.ContextDialer)
}

// socksPort is the port of srv's listener.
func socksPort(srv *httptest.Server) string {
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	return port
}

func TestSOCKS5Routes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		user, pass string
	}{
		{name: "no auth"},
		{name: "username/password", user: "alice", pass: "s3cret"},
		{name: "empty password", user: "alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reg := &proxytest.Registry{}
			origin := newOrigin(t, reg)
			tlsOrigin := newTLSOrigin(t, reg)
			p := startProxy(t, proxytest.Config{Name: "socks-a", SOCKS5: true, User: tt.user, Pass: tt.pass, Registry: reg})
			c := socksClient(t, p, tt.user, tt.pass, tlsOrigin)

			steps := []struct{ url, wantProto string }{
				{origin.URL + "/ip", "HTTP/1.1"},                                // address type IPv4
				{"http://localhost:" + socksPort(origin) + "/name", "HTTP/1.1"}, // address type domain name
				{tlsOrigin.URL + "/h2", "HTTP/2.0"},
				{tlsOrigin.URL + "/h2-again", "HTTP/2.0"}, // same tunnel
			}
			for i, s := range steps {
				resp, body := get(t, c, s.url)
				path := s.url[strings.LastIndex(s.url, "/"):]
				if want := "proto=" + s.wantProto + " via=socks-a path=" + path + " body="; resp.StatusCode != 200 || body != want {
					t.Errorf("step %d: Get(%s) = %d %q, want 200 %q", i, s.url, resp.StatusCode, body, want)
				}
			}
			if r, c, j := p.Requests(), p.Connects(), p.Rejected(); r != 0 || c != 3 || j != 0 {
				t.Errorf("Requests, Connects, Rejected = %d, %d, %d, want 0, 3, 0", r, c, j)
			}
		})
	}
}

func TestSOCKS5IPv6Loopback(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	reg := &proxytest.Registry{}
	origin := httptest.NewUnstartedServer(whoHandler(reg))
	origin.Listener.Close()
	origin.Listener = ln
	origin.Start()
	t.Cleanup(origin.Close)
	p := startProxy(t, proxytest.Config{Name: "socks-6", SOCKS5: true, Registry: reg})

	_, body := get(t, socksClient(t, p, "", "", nil), origin.URL) // http://[::1]:PORT
	if want := "proto=HTTP/1.1 via=socks-6 path=/ body="; body != want {
		t.Errorf("Get(%s) body = %q, want %q", origin.URL, body, want)
	}
}

func TestSOCKS5WrongCredentials(t *testing.T) {
	t.Parallel()
	reg := &proxytest.Registry{}
	origin := newOrigin(t, reg)
	p := startProxy(t, proxytest.Config{Name: "socks-a", SOCKS5: true, User: "alice", Pass: "s3cret", Registry: reg})

	tests := []struct {
		user, pass string
		want       string // in x/net/proxy's error
	}{
		{"alice", "wrong", "username/password authentication failed"},
		{"mallory", "s3cret", "username/password authentication failed"},
		{"", "", "no acceptable authentication methods"}, // offers no-auth only
	}
	for i, tt := range tests {
		c, err := socksDialer(t, p, tt.user, tt.pass).DialContext(context.Background(), "tcp", origin.Listener.Addr().String())
		if err == nil {
			c.Close()
			t.Errorf("step %d: DialContext with user %q, pass %q succeeded, want an error", i, tt.user, tt.pass)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("step %d: DialContext with user %q = %v, want an error containing %q", i, tt.user, err, tt.want)
		}
	}

	// On the wire: status 0x01, then the proxy closes the connection (RFC 1929).
	c := socksRaw(t, p)
	socksWrite(t, c, 0x05, 0x01, 0x02)
	if got := socksRead(t, c, 2); got[0] != 0x05 || got[1] != 0x02 {
		t.Fatalf("method selection = % x, want 05 02", got)
	}
	socksWrite(t, c, append(append([]byte{0x01, 5}, "alice"...), append([]byte{5}, "wrong"...)...)...)
	if got := socksRead(t, c, 2); got[0] != 0x01 || got[1] != 0x01 {
		t.Errorf("username/password status = % x, want 01 01", got)
	}
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("Read after a failed authentication = %d, %v, want EOF", n, err)
	}

	if r, c, j := p.Requests(), p.Connects(), p.Rejected(); r != 0 || c != 0 || j != int64(len(tests)+1) {
		t.Errorf("Requests, Connects, Rejected = %d, %d, %d, want 0, 0, %d", r, c, j, len(tests)+1)
	}
}

// TestSOCKS5RefusesRequests: targets off the loopback interface are not allowed (nothing is
// dialed and nothing is resolved), commands other than CONNECT and unknown address types are not
// supported.
func TestSOCKS5RefusesRequests(t *testing.T) {
	t.Parallel()
	p := startProxy(t, proxytest.Config{Name: "socks-a", SOCKS5: true})
	domain := func(name string) []byte { return append([]byte{0x03, byte(len(name))}, name...) }
	tests := []struct {
		name string
		cmd  byte
		addr []byte // address type and address
		want byte
	}{
		{"TEST-NET IPv4", 0x01, []byte{0x01, 192, 0, 2, 1}, 0x02},
		{"unspecified IPv4", 0x01, []byte{0x01, 0, 0, 0, 0}, 0x02},
		{"reserved name", 0x01, domain("example.invalid"), 0x02},
		{"empty name", 0x01, domain(""), 0x02},
		{"documentation IPv6", 0x01, append([]byte{0x04, 0x20, 0x01, 0x0d, 0xb8}, make([]byte, 12)...), 0x02},
		{"BIND", 0x02, []byte{0x01, 127, 0, 0, 1}, 0x07},
		{"UDP ASSOCIATE", 0x03, domain("localhost"), 0x07},
		{"unknown address type", 0x01, []byte{0x09, 127, 0, 0, 1}, 0x08},
	}
	for i, tt := range tests {
		c := socksRaw(t, p)
		socksWrite(t, c, 0x05, 0x01, 0x00)
		if got := socksRead(t, c, 2); got[0] != 0x05 || got[1] != 0x00 {
			t.Fatalf("step %d (%s): method selection = % x, want 05 00", i, tt.name, got)
		}
		req := append(append([]byte{0x05, tt.cmd, 0x00}, tt.addr...), 0x00, 0x50)
		socksWrite(t, c, req...)
		if got := socksRead(t, c, 10); got[0] != 0x05 || got[1] != tt.want {
			t.Errorf("step %d (%s): reply to % x = % x, want 05 %02x ...", i, tt.name, req, got, tt.want)
		}
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("step %d (%s): Read after the reply = %d, %v, want EOF", i, tt.name, n, err)
		}
	}

	// x/net/proxy reports the refusal as an error.
	if c, err := socksDialer(t, p, "", "").DialContext(context.Background(), "tcp", "192.0.2.1:80"); err == nil {
		c.Close()
		t.Errorf("DialContext(192.0.2.1:80) succeeded, want an error")
	} else if !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("DialContext(192.0.2.1:80) = %v, want connection not allowed", err)
	}
	if c, j := p.Connects(), p.Rejected(); c != 0 || j != int64(len(tests)+1) {
		t.Errorf("Connects, Rejected = %d, %d, want 0, %d", c, j, len(tests)+1)
	}
}

// TestSOCKS5DialFailure: a loopback target where nothing listens is answered "connection refused"
// (0x05), which is not a rejection.
func TestSOCKS5DialFailure(t *testing.T) {
	t.Parallel()
	addr, err := proxytest.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, proxytest.Config{Name: "socks-a", SOCKS5: true})
	c, err := socksDialer(t, p, "", "").DialContext(context.Background(), "tcp", addr)
	if err == nil {
		c.Close()
		t.Fatalf("DialContext(%s) succeeded, want an error", addr)
	}
	if !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("DialContext(%s) = %v, want connection refused", addr, err)
	}
	if c, j := p.Connects(), p.Rejected(); c != 0 || j != 0 {
		t.Errorf("Connects, Rejected = %d, %d, want 0, 0", c, j)
	}
}

func TestSOCKS5Hang(t *testing.T) {
	t.Parallel()
	p := startProxy(t, proxytest.Config{Name: "socks-h", SOCKS5: true, Hang: true})
	c := socksRaw(t, p)
	socksWrite(t, c, 0x05, 0x01, 0x00)
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c.Read(make([]byte, 2)); !isTimeout(err) {
		t.Errorf("Read of the method selection = %d, %v, want a timeout", n, err)
	}
	if c, j := p.Connects(), p.Rejected(); c != 0 || j != 0 {
		t.Errorf("Connects, Rejected = %d, %d, want 0, 0", c, j)
	}
}

func TestSOCKS5HangAfterConnect(t *testing.T) {
	t.Parallel()
	reg := &proxytest.Registry{}
	tlsOrigin := newTLSOrigin(t, reg)
	p := startProxy(t, proxytest.Config{Name: "socks-h", SOCKS5: true, HangAfterConnect: true})
	c, err := socksDialer(t, p, "", "").DialContext(context.Background(), "tcp", tlsOrigin.Listener.Addr().String())
	if err != nil {
		t.Fatalf("DialContext = %v, want a tunnel that opens", err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	c.Write([]byte("\x16\x03\x01")) // the start of a TLS ClientHello
	if n, err := c.Read(make([]byte, 1)); !isTimeout(err) {
		t.Errorf("Read through the silent tunnel = %d, %v, want a timeout", n, err)
	}
	if got := p.Connects(); got != 1 {
		t.Errorf("Connects() = %d, want 1", got)
	}
}

func TestSOCKS5Latency(t *testing.T) {
	t.Parallel()
	const latency = 150 * time.Millisecond
	reg := &proxytest.Registry{}
	origin := newOrigin(t, reg)
	p := startProxy(t, proxytest.Config{Name: "socks-slow", SOCKS5: true, Latency: latency})
	start := time.Now()
	get(t, socksClient(t, p, "", "", nil), origin.URL)
	if elapsed := time.Since(start); elapsed < latency {
		t.Errorf("request took %v, want at least Latency %v", elapsed, latency)
	}
}

// TestSOCKS5WithNetHTTP: net/http's own SOCKS5 support takes the proxy's URL as it is.
func TestSOCKS5WithNetHTTP(t *testing.T) {
	t.Parallel()
	reg := &proxytest.Registry{}
	origin := newOrigin(t, reg)
	p := startProxy(t, proxytest.Config{Name: "socks-a", SOCKS5: true, User: "alice", Pass: "s3cret", Registry: reg})
	if got, want := p.URL().String(), "socks5://alice:s3cret@"+p.Addr(); got != want {
		t.Errorf("URL() = %q, want %q", got, want)
	}
	if got, want := p.URLWithCredentials("bob", "x").String(), "socks5://bob:x@"+p.Addr(); got != want {
		t.Errorf("URLWithCredentials = %q, want %q", got, want)
	}
	_, body := get(t, newClient(t, p.URL(), nil, nil), origin.URL)
	if want := "proto=HTTP/1.1 via=socks-a path=/ body="; body != want {
		t.Errorf("Get through http.ProxyURL(socks5://...) body = %q, want %q", body, want)
	}
}

func TestSOCKS5Validates(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 256)
	for i, cfg := range []proxytest.Config{
		{SOCKS5: true, User: long},
		{SOCKS5: true, User: "alice", Pass: long},
	} {
		p, err := proxytest.Start(cfg)
		if err == nil {
			p.Close()
			t.Errorf("step %d: Start = nil error, want one about 255 bytes", i)
		} else if !strings.Contains(err.Error(), "255 bytes") {
			t.Errorf("step %d: Start = %v, want one about 255 bytes", i, err)
		}
	}
}

// socksRaw opens a raw connection to p that gives up after 5 s.
func socksRaw(t *testing.T, p *proxytest.Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

func socksWrite(t *testing.T, c net.Conn, b ...byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatalf("Write(% x) = %v", b, err)
	}
}

func socksRead(t *testing.T, c net.Conn, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("ReadFull(%d bytes) = %v", n, err)
	}
	return b
}
