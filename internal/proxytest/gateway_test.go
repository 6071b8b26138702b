package proxytest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

// fakeNow is a settable time for a gateway's SessionTTL.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) now() time.Time { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeNow) add(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.t = f.t.Add(d)
}

func startGateway(t *testing.T, gc proxytest.GatewayConfig) *proxytest.Gateway {
	t.Helper()
	g, err := proxytest.StartGateway(gc)
	if err != nil {
		t.Fatalf("StartGateway = %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// via sends GET target through proxy u and returns the status, the body and the response.
func via(t *testing.T, u *url.URL, target string) (int, string, *http.Response) {
	t.Helper()
	tr := &http.Transport{Proxy: http.ProxyURL(u), DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(target)
	if err != nil {
		t.Fatalf("GET %s via gateway: %v", target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp
}

func TestGatewaySessionsHaveTheirOwnAddresses(t *testing.T) {
	g := startGateway(t, proxytest.GatewayConfig{User: "acct", Pass: "s3cret", AddrHeader: "X-Exit-IP"})
	origin := httptest.NewServer(&proxytest.BanOrigin{})
	defer origin.Close()

	_, a1, resp := via(t, g.SessionURL("aaa"), origin.URL)
	_, a2, _ := via(t, g.SessionURL("aaa"), origin.URL)
	_, b1, _ := via(t, g.SessionURL("bbb"), origin.URL)
	if a1 != a2 {
		t.Errorf("session aaa seen from %s then %s, want one address", a1, a2)
	}
	if a1 == b1 {
		t.Errorf("sessions aaa and bbb both seen from %s, want distinct addresses", a1)
	}
	if got := resp.Header.Get("X-Exit-IP"); got != a1 {
		t.Errorf("X-Exit-IP = %q, want the address the origin saw, %s", got, a1)
	}
	if got, _ := g.SessionAddr("aaa"); got.String() != a1 {
		t.Errorf("SessionAddr(aaa) = %v, want %s", got, a1)
	}
	addr := netip.MustParseAddr(a1)
	if addr.Less(proxytest.DefaultGatewayFirst) || proxytest.DefaultGatewayLast.Less(addr) {
		t.Errorf("session address %v outside the default range", addr)
	}
	// Without a session, every request gets a new address.
	_, r1, _ := via(t, g.URL(), origin.URL)
	_, r2, _ := via(t, g.URL(), origin.URL)
	if r1 == r2 || r1 == a1 || r1 == b1 {
		t.Errorf("rotating requests seen from %s and %s (sessions %s, %s), want fresh addresses", r1, r2, a1, b1)
	}
	if got := g.Assigned(); got != 4 {
		t.Errorf("Assigned() = %d, want 4 (two sessions, two single requests)", got)
	}
}

func TestGatewayRecyclesSessionsAfterTTL(t *testing.T) {
	clk := &fakeNow{t: time.Unix(1000, 0)}
	g := startGateway(t, proxytest.GatewayConfig{User: "acct", Pass: "pw", SessionTTL: time.Minute, Now: clk.now})
	origin := httptest.NewServer(&proxytest.BanOrigin{})
	defer origin.Close()
	_, first, _ := via(t, g.SessionURL("s1"), origin.URL)
	clk.add(59 * time.Second)
	if _, again, _ := via(t, g.SessionURL("s1"), origin.URL); again != first {
		t.Errorf("at 59s session s1 seen from %s, want %s still", again, first)
	}
	clk.add(time.Second)
	if _, later, _ := via(t, g.SessionURL("s1"), origin.URL); later == first {
		t.Errorf("at the TTL session s1 still seen from %s, want a new address", later)
	}
}

func TestGatewayTunnelReportsAddress(t *testing.T) {
	g := startGateway(t, proxytest.GatewayConfig{User: "acct", Pass: "pw", AddrHeader: "X-Exit-IP"})
	origin := httptest.NewTLSServer(&proxytest.BanOrigin{})
	defer origin.Close()
	tr := origin.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(g.SessionURL("tls1"))
	var reported string
	tr.OnProxyConnectResponse = func(_ context.Context, _ *url.URL, _ *http.Request, resp *http.Response) error {
		reported = resp.Header.Get("X-Exit-IP")
		return nil
	}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(origin.URL)
	if err != nil {
		t.Fatalf("GET over CONNECT: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if reported == "" || reported != string(b) {
		t.Errorf("CONNECT reply reported %q, origin saw %q: want the same address", reported, b)
	}
}

func TestGatewayAnswers407(t *testing.T) {
	g := startGateway(t, proxytest.GatewayConfig{User: "acct", Pass: "pw"})
	origin := httptest.NewServer(&proxytest.BanOrigin{})
	defer origin.Close()
	for _, u := range []*url.URL{
		g.URLWithCredentials("acct", "wrong"),
		g.URLWithCredentials("other-session-x", "pw"),
		g.URLWithCredentials("acct-session", "pw"),
		g.URLWithCredentials("acct-session--country-us", "pw"),
		g.URLWithCredentials("acctx", "pw"),
	} {
		if code, _, _ := via(t, u, origin.URL); code != http.StatusProxyAuthRequired {
			t.Errorf("user %q: status %d, want 407", u.User.Username(), code)
		}
	}
	if code, _, _ := via(t, g.URLWithCredentials("acct-session-x-country-us", "pw"), origin.URL); code != http.StatusOK {
		t.Errorf("session with a country: status %d, want 200", code)
	}
}

func TestGatewayRefusesConnections(t *testing.T) {
	g := startGateway(t, proxytest.GatewayConfig{User: "acct", Pass: "pw"})
	origin := httptest.NewServer(&proxytest.BanOrigin{})
	defer origin.Close()
	g.Refuse()
	tr := &http.Transport{Proxy: http.ProxyURL(g.URL())}
	_, err := (&http.Client{Transport: tr}).Get(origin.URL)
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("GET via a refusing gateway: %v, want ECONNREFUSED", err)
	}
	if err := g.Resume(); err != nil {
		t.Fatalf("Resume() = %v", err)
	}
	if code, _, _ := via(t, g.URL(), origin.URL); code != http.StatusOK {
		t.Errorf("after Resume: status %d, want 200", code)
	}
}

func TestBanOriginBansByClientAddress(t *testing.T) {
	g := startGateway(t, proxytest.GatewayConfig{User: "acct", Pass: "pw"})
	bo := &proxytest.BanOrigin{BanAfter: 2}
	origin := httptest.NewServer(bo)
	defer origin.Close()
	via(t, g.SessionURL("s"), origin.URL)
	via(t, g.SessionURL("s"), origin.URL)
	code, _, resp := via(t, g.SessionURL("s"), origin.URL)
	if code != http.StatusForbidden || resp.Header.Get("Cf-Mitigated") != "challenge" {
		t.Errorf("third request of a session: %d %v, want a 403 block page", code, resp.Header)
	}
	if code, _, _ := via(t, g.SessionURL("t"), origin.URL); code != http.StatusOK {
		t.Errorf("another session: status %d, want 200 (bans are per address)", code)
	}
	addr, _ := g.SessionAddr("s")
	if bo.Served(addr) != 2 || bo.Blocks() != 1 {
		t.Errorf("Served(%v) = %d, Blocks() = %d, want 2 and 1", addr, bo.Served(addr), bo.Blocks())
	}
}

func TestBanOriginTimedBans(t *testing.T) {
	clk := &fakeNow{t: time.Unix(1000, 0)}
	bo := &proxytest.BanOrigin{BanAfter: 1, BanFor: 20 * time.Second, Now: clk.now}
	origin := httptest.NewServer(bo)
	defer origin.Close()
	g := startGateway(t, proxytest.GatewayConfig{User: "acct", Pass: "pw"})
	status := func() int { code, _, _ := via(t, g.SessionURL("s"), origin.URL); return code }
	if got := status(); got != http.StatusOK {
		t.Fatalf("first request: %d, want 200", got)
	}
	clk.add(19 * time.Second)
	if got := status(); got != http.StatusForbidden {
		t.Errorf("19 s into the ban: %d, want 403", got)
	}
	clk.add(time.Second)
	if got := status(); got != http.StatusOK {
		t.Errorf("at the ban's end: %d, want 200", got)
	}
	if got := status(); got != http.StatusForbidden {
		t.Errorf("after one more request: %d, want a new ban", got)
	}
}
