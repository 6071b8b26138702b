package proxytest_test

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

func TestCloseCutsLatencyShort(t *testing.T) {
	t.Parallel()
	reg := &proxytest.Registry{}
	origin := newOrigin(t, reg)
	p, err := proxytest.Start(proxytest.Config{Name: "exit-slow", Latency: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET %s/ HTTP/1.1\r\nHost: %s\r\n\r\n", origin.URL, origin.Listener.Addr())
	waitForStack(t, "proxytest.(*Proxy).pause")

	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close() = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close() still waiting 5s into an hour of Latency")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Errorf("Read after Close = %d, %v, want the connection closed without a response", n, err)
	}
	if got := p.Requests(); got != 0 {
		t.Errorf("Requests() = %d, want 0", got)
	}
}

// waitForStack waits, for at most 5 s, until some goroutine is running fn: the only way to know,
// from outside, that the proxy has reached a wait.
func waitForStack(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if n := runtime.Stack(buf, true); strings.Contains(string(buf[:n]), fn) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no goroutine reached %s within 5s", fn)
		}
		runtime.Gosched()
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	// Not parallel: the goroutine snapshot must see only this test.
	before := goleak.IgnoreCurrent()
	reg := &proxytest.Registry{}
	origin := httptest.NewServer(whoHandler(reg))
	tlsOrigin := httptest.NewUnstartedServer(whoHandler(reg))
	tlsOrigin.EnableHTTP2 = true
	// The tunnel below never starts TLS; keep the origin from logging the failed handshake.
	tlsOrigin.Config.ErrorLog = log.New(io.Discard, "", 0)
	tlsOrigin.StartTLS()
	p, err := proxytest.Start(proxytest.Config{Name: "exit-a", Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	hanging, err := proxytest.Start(proxytest.Config{Name: "exit-h", Hang: true})
	if err != nil {
		t.Fatal(err)
	}

	// Raw client connections own no goroutines, so whatever is left after Close is the proxies'.
	dial := func(addr string) (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		return c, bufio.NewReader(c)
	}
	// 1. A kept-alive plain HTTP connection after one request.
	keep, keepR := dial(p.Addr())
	fmt.Fprintf(keep, "GET %s/ HTTP/1.1\r\nHost: %s\r\n\r\n", origin.URL, origin.Listener.Addr())
	if resp, err := http.ReadResponse(keepR, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("plain request on raw connection = %v, %v", resp, err)
	} else {
		io.Copy(io.Discard, resp.Body)
	}
	// 2. An open tunnel to the TLS origin, TLS never started.
	tun, tunR := dial(p.Addr())
	fmt.Fprintf(tun, "CONNECT %[1]s HTTP/1.1\r\nHost: %[1]s\r\n\r\n", tlsOrigin.Listener.Addr())
	if resp, err := http.ReadResponse(tunR, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT on raw connection = %v, %v", resp, err)
	}
	// 3. Half a request head.
	half, halfR := dial(p.Addr())
	io.WriteString(half, "GET http://127.0.0.1/ HTTP/1.1\r\nHo")
	// 4. A connection to a hanging proxy.
	hang, hangR := dial(hanging.Addr())
	io.WriteString(hang, "GET http://127.0.0.1/ HTTP/1.1\r\n\r\n")

	for _, pr := range []*proxytest.Proxy{p, hanging} {
		if err := pr.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
		if err := pr.Close(); err != nil {
			t.Errorf("second Close() = %v, want the first result, nil", err)
		}
	}
	conns := []net.Conn{keep, tun, half, hang}
	for i, r := range []*bufio.Reader{keepR, tunR, halfR, hangR} {
		conns[i].SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := r.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Errorf("connection %d: Read after Close = %d, %v, want the proxy to have closed it", i+1, n, err)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	origin.Close()
	tlsOrigin.Close()
	goleak.VerifyNone(t, before)
}
