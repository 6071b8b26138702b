package proxyd

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestTunnelRedialsPastABannedEgressIP: a provider gateway reports each session's egress IP on
// its CONNECT reply (egress-header=). A tunnel whose session is given an IP the pool holds banned
// for the site is closed unused and dialled again through a fresh session, so the origin never
// sees that IP; when every IP the gateway hands out is banned, the CONNECT is refused after
// pool.MaxEgressRedials re-dials, and the origin saw nothing of them.
func TestTunnelRedialsPastABannedEgressIP(t *testing.T) {
	bo := &proxytest.BanOrigin{}
	srv := httptest.NewUnstartedServer(bo)
	// The gateway connects to the origin before it answers the CONNECT: a rejected tunnel is a
	// TLS handshake the origin never completes, not worth a log line.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	first, second := netip.MustParseAddr("127.0.0.10"), netip.MustParseAddr("127.0.0.11")
	gw, err := proxytest.StartGateway(proxytest.GatewayConfig{User: "acct", Pass: "pw", AddrHeader: "X-Egress-IP", First: first, Last: second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	exits, err := pool.ReadExits(strings.NewReader(gw.Template() + " label=gw sessions=1 egress-header=X-Egress-IP"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(pool.WithExits(exits...), pool.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t}
	s := w.serve(p, Config{AllowPrivate: true}, "")
	target := strings.TrimPrefix(srv.URL, "https://")
	origin := s.cfg.OriginKey(&url.URL{Scheme: "https", Host: target})

	// The site banned the gateway's first IP (as a block through a session that left from it
	// tells the pool).
	ban := func(ip netip.Addr) {
		t.Helper()
		l, err := p.Pick(context.Background(), pool.Request{Origin: origin})
		if err != nil {
			t.Fatal(err)
		}
		l.SetEgress(ip)
		l.Report(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Scope: pool.ScopePair})
	}
	ban(first)
	c := w.client("", rootsOf(srv), nil)
	status, body, _ := get(t, c, srv.URL)
	if status != http.StatusOK || body != second.String() {
		t.Fatalf("through the gateway: %d %q, want 200 from %s", status, body, second)
	}
	if n := gw.Assigned(); n != 2 {
		t.Errorf("gateway assigned %d addresses, want 2 (the banned one, then the redial's)", n)
	}
	if n := bo.Served(first); n != 0 {
		t.Errorf("origin served the banned IP %d times, want 0", n)
	}
	if st := s.Stats(); st.TunnelsFailed != 0 || st.TunnelsOpened != 1 {
		t.Errorf("tunnels failed %d, opened %d; want 0 and 1 (a rejection is neither)", st.TunnelsFailed, st.TunnelsOpened)
	}

	// Now the second IP is banned too: every assignment is rejected, the CONNECT refused.
	ban(second)
	before := gw.Assigned()
	conn := w.dialDaemon()
	io.WriteString(conn, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	resp, err := http.ReadResponse(newReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("CONNECT with only banned IPs left: %d, want 502", resp.StatusCode)
	}
	if ps := resp.Header.Get("Proxy-Status"); !strings.Contains(ps, `next-hop="gw"`) || !strings.Contains(ps, "banned") {
		t.Errorf("Proxy-Status %q, want the gateway named and its IPs banned", ps)
	}
	if n := gw.Assigned() - before; n != pool.MaxEgressRedials+1 {
		t.Errorf("gateway assigned %d addresses for the CONNECT, want %d (one dial, %d re-dials)", n, pool.MaxEgressRedials+1, pool.MaxEgressRedials)
	}
	if n := bo.Served(first) + bo.Blocks(); n != 0 {
		t.Errorf("origin saw %d requests from banned IPs, want 0", n)
	}
}
