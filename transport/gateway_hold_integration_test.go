package transport_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Through a provider-like gateway: a session that serves three sites keeps its address when one
// of them bans it. The banning site is served through the other session at once, the banned
// session keeps serving the other two from the same address, nothing is replaced, and the ban
// costs the banning site one blocked request.
func TestIntegGatewayHoldsABanWhileOtherSitesServe(t *testing.T) {
	sites := make([]*proxytest.BanOrigin, 3)
	servers := make([]*httptest.Server, 3)
	for i := range sites {
		sites[i] = &proxytest.BanOrigin{}
		servers[i] = httptest.NewServer(sites[i])
		t.Cleanup(servers[i].Close)
	}
	r := newGatewayRig(t, proxytest.GatewayConfig{User: "acct", Pass: "pw"}, "sessions=2", servers)
	held := r.pool.Exits()[0].Label()
	via := func(exit, u string) integResult {
		t.Helper()
		req, err := http.NewRequestWithContext(transport.ContextWithExit(context.Background(), exit), http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := r.client.Do(req)
		if err != nil {
			return integResult{err: err}
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return integResult{status: resp.StatusCode, body: string(body), from: resp.Header.Get(integFromHeader)}
	}
	var addr string
	for _, s := range servers {
		res := via(held, s.URL)
		if res.status != http.StatusOK || (addr != "" && res.body != addr) {
			t.Fatalf("through %s: %d %q, want 200 from one address (%q)", held, res.status, res.body, addr)
		}
		addr = res.body
	}
	sites[0].Ban(netip.MustParseAddr(addr))
	if res := via(held, servers[0].URL); res.status != http.StatusForbidden {
		t.Fatalf("site 0 through %s after the ban: %d, want its ban (403)", held, res.status)
	}
	other := integMustGet(t, r.client, servers[0].URL)
	if other.exit == held || other.body == addr {
		t.Errorf("site 0 after the ban: served via %s from %s, want the other session and address", other.exit, other.body)
	}
	for _, s := range servers[1:] {
		if res := via(held, s.URL); res.status != http.StatusOK || res.body != addr {
			t.Errorf("another site through %s after the ban: %d from %q, want 200 from its address %s", held, res.status, res.body, addr)
		}
	}
	if _, rot := r.moves.snapshot(); len(rot) != 0 {
		t.Errorf("rotations = %+v, want none: one site of three banned the session", rot)
	}
	if got := sites[0].Blocks(); got != 1 {
		t.Errorf("site 0 blocked %d requests, want 1", got)
	}
}
