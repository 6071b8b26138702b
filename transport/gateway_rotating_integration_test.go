package transport_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// A rotating gateway (rotate=request: a new source address per request) that one site blocks
// wholesale backs off for that site once most of its answers from it are blocks, and keeps
// serving another site. Asserted by what the origins saw.
func TestIntegRotatingGatewayBacksOffForTheSiteThatBlocksIt(t *testing.T) {
	first, last := netip.MustParseAddr("127.0.0.10"), netip.MustParseAddr("127.0.0.19")
	blocker := &proxytest.BanOrigin{}
	for a := first; !last.Less(a); a = a.Next() {
		blocker.Ban(a) // the site blocks every address the gateway has
	}
	open := &proxytest.BanOrigin{}
	srvA, srvB := httptest.NewServer(blocker), httptest.NewServer(open)
	t.Cleanup(srvA.Close)
	t.Cleanup(srvB.Close)

	clk := newIntegClock()
	gw, err := proxytest.StartGateway(proxytest.GatewayConfig{User: "acct", Pass: "pw", First: first, Last: last, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	exits, err := pool.ReadExits(strings.NewReader(gw.URL().String() + " label=rot rotate=request"))
	if err != nil {
		t.Fatal(err)
	}
	_, client := integNew(t, []*httptest.Server{srvA, srvB}, pool.WithExits(exits...), pool.WithClock(clk))

	for i := range 2 * pool.BlockRateMinAnswers {
		res := integGet(client, srvA.URL)
		if res.status == http.StatusOK {
			t.Fatalf("request %d to the blocking site served", i)
		}
	}
	if got := blocker.Blocks(); got != pool.BlockRateMinAnswers {
		t.Errorf("blocking site saw %d requests, want %d: the gateway backs off once most of its answers there are blocks, and sends nothing more", got, pool.BlockRateMinAnswers)
	}
	if res := integGet(client, srvA.URL); !errors.Is(res.err, pool.ErrNoHealthyExit) {
		t.Errorf("request to the blocking site while backed off: %v, want ErrNoHealthyExit", res.err)
	}
	for range 5 {
		integMustGet(t, client, srvB.URL)
	}
	if addrs := open.Addrs(); len(addrs) != 5 {
		t.Errorf("other site saw %d addresses for 5 requests (%v), want 5: it is still served, a new address each time", len(addrs), addrs)
	}
}
