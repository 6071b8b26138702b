package proxyd

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// tlsFront serves TLS on 127.0.0.1 with cert in front of the plain proxy at addr: an https://
// proxy. handshakes counts the TLS handshakes that completed.
func tlsFront(t *testing.T, cert []tls.Certificate, addr string) (string, *atomic.Int64) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: cert})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var handshakes atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() != nil {
					return
				}
				handshakes.Add(1)
				up, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { io.Copy(up, c); up.Close() }()
				io.Copy(c, up)
			}()
		}
	}()
	return ln.Addr().String(), &handshakes
}

// TestConnectThroughHTTPSProxy: a tunnel through an https:// exit speaks TLS to the proxy
// (Config.ProxyTLS's roots) and CONNECT inside it; the client's own TLS to the origin runs in the
// tunnel. An https:// exit whose certificate the daemon does not trust fails the setup, judged a
// TLS failure of the pair, never reaching the proxy's CONNECT.
func TestConnectThroughHTTPSProxy(t *testing.T) {
	p, err := proxytest.Start(proxytest.Config{Name: "inner"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	certSrv := httptest.NewTLSServer(http.NotFoundHandler()) // its certificate names 127.0.0.1
	t.Cleanup(certSrv.Close)
	front, handshakes := tlsFront(t, certSrv.TLS.Certificates, p.Addr())
	origin := httptest.NewTLSServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) { io.WriteString(rw, "hello") }))
	t.Cleanup(origin.Close)

	for _, trusted := range []bool{true, false} {
		exits, err := pool.ReadExits(strings.NewReader("https://" + front + " label=tls"))
		if err != nil {
			t.Fatal(err)
		}
		pl, err := pool.New(pool.WithExits(exits...), pool.WithSeed(1))
		if err != nil {
			t.Fatal(err)
		}
		cfg := Config{AllowPrivate: true}
		if trusted {
			cfg.ProxyTLS = &tls.Config{RootCAs: rootsOf(certSrv).RootCAs}
		}
		w := &world{t: t}
		w.s = w.serve(pl, cfg, "")
		hsBefore, connectsBefore := handshakes.Load(), p.Connects()
		target := strings.TrimPrefix(origin.URL, "https://")
		resp, c, br := w.connect(target)
		ps := resp.Header.Get("Proxy-Status")
		if !trusted {
			if resp.StatusCode != http.StatusBadGateway || !strings.Contains(ps, `next-hop="tls"`) || !strings.Contains(ps, "error=tls_protocol_error") {
				t.Errorf("CONNECT through an untrusted https:// exit: %d %q, want 502 tls_protocol_error from tls", resp.StatusCode, ps)
			}
			if n := p.Connects() - connectsBefore; n != 0 {
				t.Errorf("the proxy behind the untrusted TLS saw %d CONNECTs, want 0", n)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(ps, `next-hop="tls"`) {
			t.Fatalf("CONNECT through the https:// exit: %d %q, want 200 via tls", resp.StatusCode, ps)
		}
		conf := rootsOf(origin)
		conf.ServerName = "127.0.0.1"
		tc := tls.Client(&bufConn{Conn: c, r: br}, conf)
		io.WriteString(tc, "GET / HTTP/1.1\r\nHost: "+target+"\r\nConnection: close\r\n\r\n")
		got, err := io.ReadAll(tc)
		if err != nil || !strings.HasSuffix(string(got), "hello") {
			t.Errorf("GET inside the tunnel: %q %v, want the origin's hello", got, err)
		}
		if hs, n := handshakes.Load()-hsBefore, p.Connects()-connectsBefore; hs != 1 || n != 1 {
			t.Errorf("TLS handshakes with the proxy %d, CONNECTs it relayed %d; want 1 and 1", hs, n)
		}
		waitFor(t, "the tunnel's verdict", func() bool { return w.s.verdictCount("success", "ok") == 1 })
	}
}

// bufConn is a connection whose first bytes sit in r.
type bufConn struct {
	net.Conn
	r io.Reader
}

func (c *bufConn) Read(b []byte) (int, error) { return c.r.Read(b) }
