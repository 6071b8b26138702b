package transport_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// egressRig starts an origin that bans an address after serving it once (for an hour), over TLS
// or not, and a gateway with two addresses that reports them (X-Egress-IP), the pool's template
// line naming that header with one session. It runs four requests: each address is served once,
// then blocked once — the block tells the pool the session's IP is banned there, and the gateway
// rotates the session. Both addresses are then banned, and held by retired sessions as far as
// the gateway knows, so every new session is given one of them again.
func egressRig(t *testing.T, tls bool) (*gatewayRig, *proxytest.BanOrigin, *httptest.Server) {
	t.Helper()
	bo := &proxytest.BanOrigin{BanAfter: 1, BanFor: time.Hour}
	srv := httptest.NewUnstartedServer(bo)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	gc := proxytest.GatewayConfig{User: "acct", Pass: "pw", AddrHeader: "X-Egress-IP",
		First: netip.MustParseAddr("127.0.0.10"), Last: netip.MustParseAddr("127.0.0.11")}
	r := newGatewayRig(t, gc, "sessions=1 egress-header=X-Egress-IP", []*httptest.Server{srv})
	bo.Now = r.clk.Now
	for i, want := range []int{http.StatusOK, http.StatusForbidden, http.StatusOK, http.StatusForbidden} {
		if res := integGet(r.client, srv.URL); res.status != want {
			t.Fatalf("request %d: %d, %v; want %d", i+1, res.status, res.err, want)
		}
	}
	return r, bo, srv
}

// A gateway that reports the IP it assigns (egress-header=): over HTTPS, an assignment to an IP
// the target has banned is rejected on the CONNECT reply and re-dialled through a fresh session,
// so the origin never sees that IP again while its ban lasts; a gateway that has only banned IPs
// left fails the request with *pool.EgressBannedError after pool.MaxEgressRedials re-dials.
func TestIntegGatewayEgressBannedIPIsRedialled(t *testing.T) {
	r, bo, srv := egressRig(t, true)
	if got := bo.Blocks(); got != 2 {
		t.Fatalf("origin blocked %d requests, want 2", got)
	}
	assignedBefore := r.gw.Assigned()

	// Every session now gets a banned address: each CONNECT is rejected before the request is sent.
	res := integGet(r.client, srv.URL)
	if !errors.Is(res.err, pool.ErrEgressBanned) {
		t.Fatalf("request with only banned IPs left: %v, want pool.ErrEgressBanned", res.err)
	}
	var eb *pool.EgressBannedError
	if !errors.As(res.err, &eb) || eb.Gateway != "gw" || eb.Tries != pool.MaxEgressRedials+1 || !eb.IP.IsValid() {
		t.Errorf("error = %#v, want gateway gw, %d tries, an IP", eb, pool.MaxEgressRedials+1)
	}
	if got := r.gw.Assigned() - assignedBefore; got != pool.MaxEgressRedials+1 {
		t.Errorf("gateway assigned %d sessions for the request, want %d (one dial and %d re-dials)", got, pool.MaxEgressRedials+1, pool.MaxEgressRedials)
	}
	if got := bo.Blocks(); got != 2 {
		t.Errorf("origin blocked %d requests, want still 2: no request reached it from a banned IP", got)
	}
	_, rot := r.moves.snapshot()
	egress := 0
	for _, x := range rot {
		if x.Reason == pool.RotationEgress {
			egress++
		}
	}
	if egress != pool.MaxEgressRedials+1 {
		t.Errorf("%d egress rotations, want %d", egress, pool.MaxEgressRedials+1)
	}

	// Once the bans end, the pool's own ban records (pool.EgressBanFor) end too: served again.
	r.clk.Advance(pool.EgressBanFor + time.Hour)
	if res := integGet(r.client, srv.URL); res.status != http.StatusOK {
		t.Errorf("after the bans ended: %d, %v; want 200", res.status, res.err)
	}
}

// Over plain HTTP the gateway's header comes with the origin's response: the request reached the
// origin already, but the session assigned a banned IP is retired at once and the next request
// leaves through another.
func TestIntegGatewayEgressBannedIPRetiresTheSessionOverHTTP(t *testing.T) {
	r, _, srv := egressRig(t, false)
	// The third session is handed a banned address: the origin sees the request (and blocks it).
	res := integGet(r.client, srv.URL)
	if res.status != http.StatusForbidden {
		t.Fatalf("request through a banned address: %d, %v; want the origin's 403", res.status, res.err)
	}
	_, rot := r.moves.snapshot()
	if len(rot) == 0 || rot[len(rot)-1].Reason != pool.RotationEgress || rot[len(rot)-1].Old.Label() != res.exit {
		t.Fatalf("rotations = %+v, want the last an egress rotation of %s", rot, res.exit)
	}
	if next := integGet(r.client, srv.URL); next.exit == res.exit {
		t.Errorf("next request via %s again, want a fresh session", next.exit)
	}
}
