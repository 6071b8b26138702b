package transport_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// rotatingHTTPS starts a TLS origin offering HTTP/2 that judges clients by their address (bo),
// a provider-like gateway handing out first..last and reporting each CONNECT's address in
// X-Egress-IP, and a transport whose one exit is the gateway's rotating line (rotate=request)
// with attrs.
func rotatingHTTPS(t *testing.T, bo *proxytest.BanOrigin, first, last string, attrs string) (*proxytest.Gateway, *httptest.Server, *transport.Transport, *http.Client) {
	t.Helper()
	srv := httptest.NewUnstartedServer(bo)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	clk := newIntegClock()
	gw, err := proxytest.StartGateway(proxytest.GatewayConfig{User: "acct", Pass: "pw", AddrHeader: "X-Egress-IP",
		First: netip.MustParseAddr(first), Last: netip.MustParseAddr(last), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	exits, err := pool.ReadExits(strings.NewReader(gw.URL().String() + " label=rot rotate=request " + attrs))
	if err != nil {
		t.Fatal(err)
	}
	tr, client := integNew(t, []*httptest.Server{srv}, pool.WithExits(exits...), pool.WithClock(clk))
	return gw, srv, tr, client
}

// A rotating gateway (rotate=request) over HTTPS gives each CONNECT a new address, so each
// request must open a new tunnel: its exit's transport keeps no connection alive and speaks no
// HTTP/2 (which would carry every request down one tunnel, from one address). Counted at the
// gateway (CONNECTs) and at the origin (addresses), sequential and concurrent requests alike, and
// a retry of a blocked request leaves through a new tunnel from a new address and is served.
func TestIntegRotatingGatewayNewConnectPerRequestOverHTTPS(t *testing.T) {
	const sequential, concurrent = 6, 8
	bo := &proxytest.BanOrigin{}
	gw, srv, _, client := rotatingHTTPS(t, bo, "127.0.0.10", "127.0.0.60", "")
	for i := range sequential {
		if res := integMustGet(t, client, srv.URL); res.proto != 1 {
			t.Errorf("request %d answered over HTTP/%d, want HTTP/1.1 (no HTTP/2 through a rotating line)", i, res.proto)
		}
	}
	var wg sync.WaitGroup
	for range concurrent {
		wg.Go(func() {
			if res := integGet(client, srv.URL); res.status != http.StatusOK {
				t.Errorf("concurrent request: %d, %v", res.status, res.err)
			}
		})
	}
	wg.Wait()
	n := sequential + concurrent
	if got := gw.Connects(); got != int64(n) {
		t.Errorf("gateway answered %d CONNECTs for %d requests, want one each", got, n)
	}
	if got := len(bo.Addrs()); got != n {
		t.Errorf("origin saw %d addresses for %d requests, want a new one each", got, n)
	}

	// The next address is banned: the request is blocked, and its retry (the same logical
	// request's memory, as the retry layers carry it) goes down a new tunnel and is served.
	next := netip.MustParseAddr("127.0.0.10")
	for range n {
		next = next.Next()
	}
	bo.Ban(next)
	ctx := transport.ContextWithRetries(t.Context())
	for i, want := range []int{http.StatusForbidden, http.StatusOK} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("attempt %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	if got := bo.BlocksOf(next); got != 1 {
		t.Errorf("banned address %s sent %d requests, want 1", next, got)
	}
	if got := gw.Connects(); got != int64(n+2) {
		t.Errorf("gateway answered %d CONNECTs after the retry, want %d: the retry has a tunnel of its own", got, n+2)
	}
}

// A rotating gateway that reports each CONNECT's address (egress-header=) over HTTPS: once a
// block has shown the library that an address is banned by the origin, a CONNECT assigned that
// address again is closed before any request goes down it, and re-dialled — a new CONNECT, a new
// address. Counted at the origin by source address: each banned address is sent exactly the one
// request that revealed its ban, and every later request is served.
func TestIntegRotatingGatewayEgressBannedAddressNeverSentAgain(t *testing.T) {
	bo := &proxytest.BanOrigin{}
	banned := []netip.Addr{netip.MustParseAddr("127.0.0.10"), netip.MustParseAddr("127.0.0.11")}
	for _, a := range banned {
		bo.Ban(a)
	}
	gw, srv, _, client := rotatingHTTPS(t, bo, "127.0.0.10", "127.0.0.13", "egress-header=X-Egress-IP")
	const requests = 24
	served := 0
	for i := range requests {
		res := integGet(client, srv.URL)
		switch {
		case res.err != nil:
			t.Errorf("request %d: %v", i+1, res.err)
		case res.status == http.StatusOK:
			served++
		case i >= len(banned):
			t.Errorf("request %d: %d, want 200: every banned address is known by then", i+1, res.status)
		}
	}
	for _, a := range banned {
		if got := bo.BlocksOf(a); got != 1 {
			t.Errorf("banned address %s was sent %d requests, want 1: none after its ban was seen", a, got)
		}
	}
	if want := requests - len(banned); served != want {
		t.Errorf("%d of %d requests served, want %d", served, requests, want)
	}
	// Every request after the first two met the banned addresses in turn (two of every four
	// CONNECTs): the rejected tunnels count at the gateway, never at the origin.
	if got, min := gw.Connects(), int64(requests+requests/2); got < min {
		t.Errorf("gateway answered %d CONNECTs, want at least %d (rejected tunnels re-dialled)", got, min)
	}
}
