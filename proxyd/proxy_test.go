package proxyd

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestPlainHTTPThroughAnExit: an absolute-URI request goes through an exit of the pool; the
// response names the exit and the verdict in Proxy-Status; the options header and the client's
// proxy credentials never reach the origin, and nothing the daemon adds tells the origin it passed
// a proxy.
func TestPlainHTTPThroughAnExit(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "a"}, exitSpec{label: "b"})
	srv, seen := w.origin(false)
	c := w.client("me-session-s1:pw", nil, nil)
	code, body, ps := get(t, c, srv.URL+"/x", OptionsHeader, "country-us")
	// country-us matches no exit: the options header is read, and refused by name.
	if code != 400 || !strings.Contains(body, "country=us") || len(ps) != 1 || !strings.Contains(ps[0], "error=") {
		t.Fatalf("GET with an options header no exit matches: %d %q %q, want 400 naming country=us with a Proxy-Status error", code, body, ps)
	}
	code, body, ps = get(t, c, srv.URL+"/x", OptionsHeader, "")
	if code != 200 || !strings.HasPrefix(body, "hello from ") {
		t.Fatalf("GET = %d %q, want 200 from an exit", code, body)
	}
	exit := strings.TrimPrefix(body, "hello from ")
	want := `proxybreakerd; next-hop="` + exit + `"; received-status=200; details="success ok"`
	if len(ps) != 1 || ps[0] != want {
		t.Errorf("Proxy-Status = %q, want [%q]", ps, want)
	}
	for _, h := range *seen {
		for _, k := range []string{"Proxy-Authorization", OptionsHeader, "X-Forwarded-For", "Via", "Forwarded"} {
			if h.Get(k) != "" {
				t.Errorf("the origin saw %s: %q", k, h.Get(k))
			}
		}
	}
	// The session sticks: ten more requests of session s1 leave through the same exit.
	for range 10 {
		if _, body, _ := get(t, c, srv.URL+"/y"); body != "hello from "+exit {
			t.Fatalf("session s1 moved: %q, want hello from %s", body, exit)
		}
	}
	if l, ok := w.s.ExitOfSession("s1", w.s.OriginOf(srv.URL)); !ok || l != exit {
		t.Errorf("ExitOfSession(s1) = %q, %v; want %q", l, ok, exit)
	}
}

// TestConnectTunnelCarriesTLS: an HTTPS request through the daemon opens a CONNECT tunnel through
// an exit; the CONNECT reply names the exit in Proxy-Status, and the tunnel is judged a success
// with its bytes counted on the exit.
func TestConnectTunnelCarriesTLS(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "a"})
	srv, _ := w.origin(true)
	var ps []string
	c := w.client("", rootsOf(srv), &ps)
	code, body, _ := get(t, c, srv.URL+"/secure")
	if code != 200 || body != "hello from a" {
		t.Fatalf("GET https = %d %q, want 200 hello from a", code, body)
	}
	want := `proxybreakerd; next-hop="a"; received-status=200; details="tunnel open; judged by its first bytes"`
	if len(ps) != 1 || ps[0] != want {
		t.Errorf("CONNECT Proxy-Status = %q, want [%q]", ps, want)
	}
	waitFor(t, "the tunnel to end", func() bool { return w.s.tunnels.len() == 0 })
	if n := w.s.verdictCount("success", "ok"); n != 1 {
		t.Errorf("tunnel success verdicts = %d, want 1", n)
	}
	snap := w.s.pool.Snapshot()
	if b := snap.Exits[0].Bytes; b.Sent == 0 || b.Received == 0 {
		t.Errorf("exit a moved %+v, want bytes both ways counted", b)
	}
	if got := w.proxies["a"].Connects(); got != 1 {
		t.Errorf("exit a saw %d CONNECTs, want 1", got)
	}
}

// TestSOCKS5ThroughTheTunnelPath: SOCKS5 clients (no auth, and username/password carrying options)
// reach HTTP and HTTPS origins through the same tunnel path, by IPv4 address and by name.
func TestSOCKS5ThroughTheTunnelPath(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "a"}, exitSpec{label: "b", cfg: proxytest.Config{SOCKS5: true}})
	plain, _ := w.origin(false)
	secure, _ := w.origin(true)
	for _, user := range []string{"", "acct-exit-b:x"} {
		c := w.socksClient(user, rootsOf(secure))
		for _, u := range []string{plain.URL + "/p", secure.URL + "/s", strings.Replace(plain.URL, "127.0.0.1", "localhost", 1) + "/n"} {
			code, body, _ := get(t, c, u)
			if code != 200 || !strings.HasPrefix(body, "hello from ") {
				t.Errorf("socks5 %q GET %s = %d %q, want 200 from an exit", user, u, code, body)
			}
			if user != "" && body != "hello from b" {
				t.Errorf("socks5 with exit-b: %q, want hello from b", body)
			}
		}
	}
	waitFor(t, "the tunnels to end", func() bool { return w.s.tunnels.len() == 0 })
	if n := w.s.verdictCount("success", "ok"); n != 6 {
		t.Errorf("tunnel success verdicts = %d, want 6", n)
	}
}

// TestPlainHTTPBanRoutedAround: an origin that answers 429 with Retry-After to one exit and serves
// the other: the client gets the 429 once, its Proxy-Status naming the exit and the verdict, and
// the pair rests — every later request for that site leaves through the other exit — while the
// banned exit still serves another site. A dead exit answers 502 with its error.
func TestPlainHTTPBanRoutedAround(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "a"}, exitSpec{label: "b"})
	site := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if name, _ := w.reg.Lookup(r); name == "a" {
			rw.Header().Set("Retry-After", "120")
			rw.WriteHeader(http.StatusTooManyRequests)
			return
		}
		io.WriteString(rw, "served")
	}))
	t.Cleanup(site.Close)
	other, _ := w.origin(false)
	c := w.client("", nil, nil)
	limited := 0
	for range 20 {
		code, body, ps := get(t, c, site.URL)
		switch {
		case code == 429:
			limited++
			want := `proxybreakerd; next-hop="a"; received-status=429; details="transient pair rate_limited retry-after=2m0s"`
			if len(ps) != 1 || ps[0] != want {
				t.Errorf("429 Proxy-Status = %q, want %q", ps, want)
			}
		case code != 200 || body != "served":
			t.Errorf("GET = %d %q", code, body)
		}
	}
	if limited != 1 {
		t.Errorf("the client met the 429 %d times, want once", limited)
	}
	seen := map[string]bool{}
	for range 20 {
		_, body, _ := get(t, c, other.URL)
		seen[strings.TrimPrefix(body, "hello from ")] = true
	}
	if !seen["a"] {
		t.Errorf("exit a served no request of another site (%v): its ban is for the one site only", seen)
	}

	closed, err := proxytest.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.s.pool.Add(pool.MustParseExit("http://" + closed).WithLabel("down")); err != nil {
		t.Fatal(err)
	}
	code, body, ps := get(t, w.client("me-exit-down:x", nil, nil), other.URL)
	if code != 502 || len(ps) != 1 || ps[0] != `proxybreakerd; error=connection_refused; next-hop="down"; details="via down: permanent exit proxy_refused"` {
		t.Errorf("through a dead exit: %d %q %q, want 502 connection_refused", code, body, ps)
	}
}
