package proxyd

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/transport"
)

// adminOf starts w's admin handler on a loopback httptest server.
func adminOf(t *testing.T, w *world, c AdminConfig) *httptest.Server {
	t.Helper()
	h, err := w.s.Admin(c)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func post(t *testing.T, u, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestReportBySessionOpensThePair: an HTTPS client that saw a CAPTCHA inside its tunnel reports it
// by the proxy username it used (no Proxy-Status reaches it); the daemon maps the session to the
// exit that carried it, the pair opens at once, the live tunnel on it is closed, and the session's
// next request leaves through the other exit. A report that carries a password is refused.
func TestReportBySessionOpensThePair(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "a"}, exitSpec{label: "b"})
	admin := adminOf(t, w, AdminConfig{})
	srv, _ := w.origin(true)
	c := w.client("me-session-s9:x", rootsOf(srv), nil)
	_, body, _ := get(t, c, srv.URL+"/page")
	first := strings.TrimPrefix(body, "hello from ")
	// A tunnel of the same session, still open when the report comes.
	req := "CONNECT " + strings.TrimPrefix(srv.URL, "https://") + " HTTP/1.1\r\nProxy-Authorization: Basic " + basic("me-session-s9", "x") + "\r\n\r\n"
	conn := w.dialDaemon()
	io.WriteString(conn, req)
	br := newReader(conn)
	if resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %v %v", resp, err)
	}
	waitFor(t, "the tunnel to register", func() bool { return w.s.tunnels.len() == 1 })

	if code, body := post(t, admin.URL+"/api/report", `{"site":"`+srv.URL+`","username":"me-session-s9:x","verdict":"captcha"}`); code != 400 || !strings.Contains(body, "never its password") || strings.Contains(body, "s9") {
		t.Errorf("a report with a password: %d %q, want 400 refusing it without the session id", code, body)
	}
	code, out := post(t, admin.URL+"/api/report", `{"site":"`+srv.URL+`/page","username":"me-session-s9","verdict":"captcha"}`)
	var res ReportResult
	if err := json.Unmarshal([]byte(out), &res); code != 200 || err != nil {
		t.Fatalf("report: %d %q %v", code, out, err)
	}
	if !res.Applied || res.Exit != first || res.PairState != "open" || res.Verdict.Class != "blocked" || res.Verdict.Detector != "client" {
		t.Errorf("report result %+v, want applied on %s, pair OPEN, blocked by client", res, first)
	}
	if !closedByDaemon(conn, br) {
		t.Error("the session's live tunnel on the reported pair stayed open")
	}
	_, body, _ = get(t, c, srv.URL+"/page")
	if next := strings.TrimPrefix(body, "hello from "); next == first {
		t.Errorf("after the report the session still left through %s", first)
	}
	// Reported again: the pair is open, nothing changes, and the answer says so.
	code, out = post(t, admin.URL+"/api/report", `{"site":"`+srv.URL+`","exit":"`+first+`","verdict":"blocked"}`)
	if json.Unmarshal([]byte(out), &res); code != 200 || res.Applied || res.Reason == "" {
		t.Errorf("a report on an open pair: %d %+v, want not applied with a reason", code, res)
	}
	for _, c := range []struct{ body, want string }{
		{`{"site":"x.test","exit":"nope","verdict":"blocked"}`, "no exit labelled"},
		{`{"site":"x.test","exit":"a","verdict":"meh"}`, "want blocked, captcha"},
		{`{"site":"x.test","username":"me-session-zz","verdict":"blocked"}`, "no exit carried that session"},
		{`{"site":"x.test","exit":"a","verdict":"blocked","password":"pw"}`, "unknown field"},
	} {
		if code, body := post(t, admin.URL+"/api/report", c.body); code < 400 || !strings.Contains(body, c.want) || strings.Contains(body, "pw\"") {
			t.Errorf("report %s: %d %q, want an error containing %q", c.body, code, body, c.want)
		}
	}
}

// TestAdminEndpoints: health, readiness (state loaded, an exit able to serve), Prometheus metrics
// with otelbreaker's instruments and the daemon's, the status page with its ban override, stats,
// and pprof only behind its flag.
func TestAdminEndpoints(t *testing.T) {
	tel, err := NewTelemetry()
	if err != nil {
		t.Fatal(err)
	}
	w := newWorldWith(t, Config{AllowPrivate: true}, "", []transport.Option{tel.TransportOption()}, exitSpec{label: "a"})
	if err := tel.Register(w.s); err != nil {
		t.Fatal(err)
	}
	loaded := false
	admin := adminOf(t, w, AdminConfig{Metrics: tel.Handler, Loaded: func() bool { return loaded }})
	fetch := func(path string) (int, string) {
		resp, err := http.Get(admin.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := fetch("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, body := fetch("/readyz"); code != 503 || !strings.Contains(body, "state not loaded") {
		t.Errorf("/readyz before loading = %d %q, want 503", code, body)
	}
	loaded = true
	if code, _ := fetch("/readyz"); code != 200 {
		t.Errorf("/readyz = %d, want 200", code)
	}
	srv, _ := w.origin(true)
	if code, _, _ := get(t, w.client("", rootsOf(srv), nil), srv.URL); code != 200 {
		t.Fatal("fetch through the daemon failed")
	}
	plain, _ := w.origin(false)
	get(t, w.client("", nil, nil), plain.URL)
	waitFor(t, "the tunnel to end", func() bool { return w.s.tunnels.len() == 0 })
	code, body := fetch("/metrics")
	for _, want := range []string{"proxybreakerd_tunnels_total{", `event="opened"`, "proxybreakerd_tunnel_verdicts_total{", "proxybreaker_attempts_total{", "proxybreaker_breaker_state"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}
	if code, body := post(t, admin.URL+"/status", `{"action":"ban","exit":"a","for":"10m","reason":"ops"}`); code != 204 {
		t.Errorf("POST /status ban = %d %q, want 204", code, body)
	}
	if st := w.s.pool.Snapshot().Exits[0].Breaker.State; st != breaker.Open {
		t.Errorf("exit a after the ban is %v, want OPEN", st)
	}
	if code, body := fetch("/readyz"); code != 503 || !strings.Contains(body, "all 1 exits are open") {
		t.Errorf("/readyz with every exit banned = %d %q, want 503", code, body)
	}
	if code, body := fetch("/status?format=json"); code != 200 || !strings.Contains(body, `"exit": "a"`) {
		t.Errorf("/status JSON = %d %q", code, body)
	}
	if code, body := fetch("/api/stats"); code != 200 || !strings.Contains(body, `"tunnels_opened":1`) {
		t.Errorf("/api/stats = %d %q", code, body)
	}
	if code, _ := fetch("/debug/pprof/"); code != 404 {
		t.Errorf("/debug/pprof/ without the flag = %d, want 404", code)
	}
	withPprof := adminOf(t, w, AdminConfig{Pprof: true})
	resp, err := http.Get(withPprof.URL + "/debug/pprof/")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("/debug/pprof/ with the flag: %v %v", resp, err)
	}
	resp.Body.Close()
}

// TestRedactionScan: after traffic that succeeds and fails through exits with credentials, with a
// listener password and a client session id, none of them appears in the log (debug level
// included), the metrics, the status page (HTML and JSON), the stats, or any answer's headers and
// body.
func TestRedactionScan(t *testing.T) {
	tel, err := NewTelemetry()
	if err != nil {
		t.Fatal(err)
	}
	logger, logged := testLogger()
	w := newWorldWith(t, Config{AllowPrivate: true, Credentials: []Credential{{"alice", "listener-pw-1"}}, Logger: logger, FirstByteTimeout: 200 * time.Millisecond},
		"", []transport.Option{tel.TransportOption()},
		exitSpec{label: "", cfg: proxytest.Config{User: "exituser", Pass: "exit-pw-2"}},
		exitSpec{label: "", cfg: proxytest.Config{User: "exituser", Pass: "exit-pw-3"}, wrongPass: true},
		exitSpec{label: "", cfg: proxytest.Config{SOCKS5: true, User: "socksuser", Pass: "exit-pw-4"}})
	if err := tel.Register(w.s); err != nil {
		t.Fatal(err)
	}
	admin := adminOf(t, w, AdminConfig{Metrics: tel.Handler})
	secrets := []string{"listener-pw-1", "exit-pw-2", "exit-pw-3", "exit-pw-4", "sessid77"}
	var seen strings.Builder
	plain, _ := w.origin(false)
	secure, _ := w.origin(true)
	for range 6 {
		for _, u := range []string{plain.URL, secure.URL} {
			c := w.client("alice-session-sessid77:listener-pw-1", rootsOf(secure), nil)
			if resp, err := c.Get(u); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				fmt.Fprintf(&seen, "%v %s\n", resp.Header, b)
			} else {
				seen.WriteString(err.Error() + "\n")
			}
		}
	}
	stall := rawOrigin(t, silent)
	c := w.dialDaemon()
	io.WriteString(c, "CONNECT "+stall+" HTTP/1.1\r\nProxy-Authorization: Basic "+basic("alice-session-sessid77", "listener-pw-1")+"\r\n\r\nping") // pipelined: the stall timer starts
	b, _ := io.ReadAll(io.LimitReader(c, 1<<16))
	seen.Write(b)
	post(t, admin.URL+"/api/report", `{"site":"`+plain.URL+`","username":"alice-session-sessid77","verdict":"blocked"}`)
	for _, path := range []string{"/metrics", "/status", "/status?format=json", "/api/stats"} {
		resp, err := http.Get(admin.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Fprintf(&seen, "%s: %s\n", path, b)
	}
	all := seen.String() + logged()
	for _, s := range secrets {
		if strings.Contains(all, s) {
			t.Errorf("%q appears in the daemon's output", s)
		}
	}
	if !strings.Contains(all, "proxybreakerd_tunnels_total") {
		t.Error("the scan read no metrics")
	}
}

// TestBanAndReleaseAPI: /api/ban takes the site as a URL and bans the pair of its origin key;
// /api/release closes it again; a bad duration or an unknown exit is a 400 that says so.
func TestBanAndReleaseAPI(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "", exitSpec{label: "a"})
	admin := adminOf(t, w, AdminConfig{})
	code, body := post(t, admin.URL+"/api/ban", `{"exit":"a","site":"https://Shop.example/cart?x=1","for":"15m","reason":"ops"}`)
	if code != 200 || !strings.Contains(body, `"origin":"shop.example"`) {
		t.Fatalf("ban: %d %q", code, body)
	}
	pairs := w.s.pool.Snapshot().Pairs
	if len(pairs) != 1 || pairs[0].Origin != "shop.example" || pairs[0].Breaker.State != breaker.Open {
		t.Errorf("after the ban: %+v, want shop.example OPEN", pairs)
	}
	if code, body := post(t, admin.URL+"/api/release", `{"exit":"a","site":"shop.example"}`); code != 200 {
		t.Errorf("release: %d %q", code, body)
	}
	if st := w.s.pool.Snapshot().Pairs; len(st) == 1 && st[0].Breaker.State != breaker.Closed {
		t.Errorf("after the release: %v, want CLOSED", st[0].Breaker.State)
	}
	for _, c := range []struct{ path, body, want string }{
		{"/api/ban", `{"exit":"a","for":"soon"}`, "want a Go duration"},
		{"/api/ban", `{"exit":"zz","for":"1m"}`, "no exit labelled"},
		{"/api/release", `{"exit":"a","password":"x"}`, "unknown field"},
	} {
		if code, body := post(t, admin.URL+c.path, c.body); code != 400 || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %q, want 400 containing %q", c.path, c.body, code, body, c.want)
		}
	}
}
