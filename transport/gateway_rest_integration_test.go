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

// A session template (rotate=on) through the gateway fixture, over HTTPS, to a site that bans
// every address the gateway has: after pool.GatewayRestAfter (K) fresh sessions banned in a row
// the site rests on the gateway, and is sent at most K + 1 fresh sessions in any window as long as
// the shortest rest — counted at the origin (requests from banned addresses, each through a
// fresh session) — while the gateway serves another site at every step. The clock is the
// fixture's and the pool's fake, moved 5 s per step; sockets are real.
func TestIntegGatewaySiteThatBansEveryAddressRests(t *testing.T) {
	bans, open := &proxytest.BanOrigin{}, &proxytest.BanOrigin{}
	first, last := netip.MustParseAddr("127.0.0.10"), netip.MustParseAddr("127.0.0.200")
	for a := first; !last.Less(a); a = a.Next() {
		bans.Ban(a)
	}
	srvBan, srvOpen := httptest.NewUnstartedServer(bans), httptest.NewUnstartedServer(open)
	srvBan.EnableHTTP2, srvOpen.EnableHTTP2 = true, true
	srvBan.StartTLS()
	srvOpen.StartTLS()
	t.Cleanup(srvBan.Close)
	t.Cleanup(srvOpen.Close)
	r := newGatewayRig(t, proxytest.GatewayConfig{User: "acct", Pass: "pw", First: first, Last: last}, "sessions=2",
		[]*httptest.Server{srvBan, srvOpen})

	const step = 5 * time.Second
	// 1,000 s: K bans, then rests of 30 s, 1 m, 2 m, 4 m, 8 m. sent: when the banning site got a request.
	var sent []time.Time
	for i := range 200 {
		res := integGet(r.client, srvBan.URL)
		switch {
		case res.err == nil && res.status == http.StatusForbidden:
			sent = append(sent, r.clk.Now())
		case res.err != nil && (errors.Is(res.err, pool.ErrNoHealthyExit) || errors.Is(res.err, pool.ErrOriginUnhealthy)):
		default:
			t.Fatalf("step %d: request to the banning site = %d, %v; want its 403 or a refusal", i, res.status, res.err)
		}
		integMustGet(t, r.client, srvOpen.URL) // the gateway keeps serving the other site
		r.clk.Advance(step)
	}
	if got := bans.Blocks(); got != len(sent) {
		t.Fatalf("banning site saw %d requests, the client %d 403s", got, len(sent))
	}
	if len(sent) < pool.GatewayRestAfter+2 {
		t.Fatalf("banning site got %d requests in %d steps, want K = %d and then probes", len(sent), 200, pool.GatewayRestAfter)
	}
	shortest := time.Duration(float64(pool.GatewayRestBase) * (1 - pool.GatewayRestJitter))
	for i := range sent {
		n := 0
		for j := i; j < len(sent) && sent[j].Sub(sent[i]) < shortest; j++ {
			n++
		}
		if n > pool.GatewayRestAfter+1 {
			t.Errorf("%d requests to the banning site within %v from %v, want at most K+1 = %d", n, shortest, sent[i].Sub(integT0), pool.GatewayRestAfter+1)
		}
	}
	// Without rests the site would have had one fresh session per step: 200.
	if max := pool.GatewayRestAfter + 8; len(sent) > max {
		t.Errorf("banning site got %d requests over %v, want at most %d (K, then one probe per rest)", len(sent), 200*step, max)
	}
	s := r.pool.Snapshot()
	if len(s.Gateways) != 1 || len(s.Gateways[0].Resting) != 1 {
		t.Errorf("Snapshot.Gateways = %+v, want the banning site resting", s.Gateways)
	}
	var at []time.Duration
	for _, x := range sent {
		at = append(at, x.Sub(integT0))
	}
	t.Logf("banning site: %d requests in %v, at %v; the gateway handed out %d addresses in all", len(sent), 200*step, at, r.gw.Assigned())
}
