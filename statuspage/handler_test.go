package statuspage_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// fixed is a Source that always shows the same snapshot.
type fixed pool.Snapshot

func (f fixed) Snapshot() pool.Snapshot { return pool.Snapshot(f) }

func open(next time.Duration, parked bool, trips uint32, failure string) breaker.Snapshot {
	return breaker.Snapshot{State: breaker.Open, Parked: parked, Trips: trips, Level: 1, NextProbe: t0.Add(next),
		LastFailure: failure, LastFailureAt: t0.Add(-time.Second), LastCause: breaker.CauseFailures}
}

// snapshot is a pool with a healthy exit, a parked one, an OPEN one, pairs in every state and an
// unhealthy origin; its labels try to inject HTML.
var snapshot = pool.Snapshot{
	At: t0,
	Exits: []pool.ExitStatus{
		{Exit: "a-healthy", Tier: 0, Weight: 1},
		{Exit: "b-open", Tier: 0, Weight: 1, Breaker: open(30*time.Second, false, 2, "timeout")},
		{Exit: "c-<b>parked</b>", Tier: 1, Weight: 1, Breaker: open(15*time.Minute, true, 1, "proxy_auth")},
	},
	Pairs: []pool.PairStatus{
		{Exit: "a-healthy", Origin: "news.example", Breaker: breaker.Snapshot{State: breaker.Closed, FailuresInWindow: 1}},
		{Exit: "a-healthy", Origin: "shop.example", Rate: 0.25, Breaker: open(20*time.Second, false, 1, "rate_limited")},
		{Exit: "b-open", Origin: "shop.example", Breaker: breaker.Snapshot{State: breaker.HalfOpen, ProbesInFlight: 1, Trips: 3}},
		{Exit: "c-<b>parked</b>", Origin: "news.example", Breaker: breaker.Snapshot{State: breaker.Closed}},
	},
	Origins: []pool.OriginStatus{
		{Origin: "news.example", Breaker: breaker.Snapshot{}},
		{Origin: "down.example<script>", Breaker: open(10*time.Second, false, 1, "timeout")},
	},
}

func serve(t *testing.T, h http.Handler, method, target string, header http.Header) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func newHandler(t *testing.T, opts ...statuspage.Option) *statuspage.Handler {
	t.Helper()
	h, err := statuspage.New(fixed(snapshot), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestJSON(t *testing.T) {
	h := newHandler(t)
	resp := serve(t, h, http.MethodGet, "/?format=json", nil)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json", ct)
	}
	var got statuspage.Table
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	var exits, pairs, origins []string
	for _, e := range got.Exits {
		exits = append(exits, e.Exit)
	}
	for _, p := range got.Pairs {
		pairs = append(pairs, p.Exit+"×"+p.Origin)
	}
	for _, o := range got.Origins {
		origins = append(origins, o.Origin)
	}
	for _, c := range []struct{ what, got, want string }{
		{"exits", strings.Join(exits, " "), "c-<b>parked</b> b-open a-healthy"},
		{"pairs", strings.Join(pairs, " "), "c-<b>parked</b>×news.example a-healthy×shop.example b-open×shop.example a-healthy×news.example"},
		{"origins", strings.Join(origins, " "), "down.example<script> news.example"},
	} {
		if c.got != c.want {
			t.Errorf("%s in order = %s, want %s", c.what, c.got, c.want)
		}
	}
	// a-healthy's own breaker is CLOSED but its pair for shop.example is OPEN: degraded. b-open is
	// OPEN (cooling), c-… parked: both down.
	want := statuspage.Summary{Exits: 3, ExitsParked: 1, ExitsOpen: 2, PairsTracked: 4, PairsOpen: 1, PairsHalfOpen: 1, OriginsOpen: 1,
		ExitsHealthy: 0, ExitsDegraded: 1, ExitsDown: 2, ExitsCooling: 1, ExitsProbing: 0, Origins: 3, OriginsHalfOpen: 0}
	if got.Summary != want {
		t.Errorf("summary = %+v, want %+v", got.Summary, want)
	}
	parked := got.Exits[0]
	if !parked.Parked || parked.State != breaker.Open || parked.NextProbeIn != 900 || !parked.NextProbe.Equal(t0.Add(15*time.Minute)) ||
		parked.LastFailure != "proxy_auth" || parked.Trips != 1 {
		t.Errorf("parked exit row = %+v", parked)
	}
	if !got.Pairs[0].ExitParked || got.Pairs[1].ExitParked {
		t.Errorf("ExitParked of the first two pairs = %v, %v, want true, false", got.Pairs[0].ExitParked, got.Pairs[1].ExitParked)
	}
	if hp := got.Pairs[2]; hp.State != breaker.HalfOpen || hp.NextProbeIn != 0 || !hp.NextProbe.IsZero() || hp.ProbesInFlight != 1 {
		t.Errorf("half-open pair row = %+v", hp)
	}
}

func TestNegotiation(t *testing.T) {
	h := newHandler(t)
	for _, tc := range []struct {
		target, accept, want string
	}{
		{"/", "", "text/html; charset=utf-8"},
		{"/", "text/html,application/xhtml+xml,*/*;q=0.8", "text/html; charset=utf-8"},
		{"/", "application/json", "application/json"},
		{"/", "application/json, text/html;q=0.5", "application/json"},
		{"/", "text/html, application/json;q=0.9", "text/html; charset=utf-8"},
		{"/", "application/json;q=0", "text/html; charset=utf-8"},
		{"/?format=json", "text/html", "application/json"},
		{"/?format=html", "application/json", "text/html; charset=utf-8"},
	} {
		hdr := http.Header{}
		if tc.accept != "" {
			hdr.Set("Accept", tc.accept)
		}
		resp := serve(t, h, http.MethodGet, tc.target, hdr)
		if ct := resp.Header.Get("Content-Type"); ct != tc.want {
			t.Errorf("GET %s, Accept %q: Content-Type = %q, want %q", tc.target, tc.accept, ct, tc.want)
		}
		if v := resp.Header.Get("Vary"); v != "Accept" {
			t.Errorf("GET %s: Vary = %q, want Accept", tc.target, v)
		}
	}
}

func TestHTML(t *testing.T) {
	h := newHandler(t, statuspage.WithTitle("pool <one>"), statuspage.WithRefresh(5*time.Second))
	resp := serve(t, h, http.MethodGet, "/", nil)
	body, _ := io.ReadAll(resp.Body)
	page := string(body)
	for _, want := range []string{
		"<title>pool &lt;one&gt;</title>",
		`<noscript><meta http-equiv="refresh" content="5"></noscript>`, // without JavaScript
		`data-refresh-ms="5000"`,                                       // the live script's period
		"c-&lt;b&gt;parked&lt;/b&gt;",
		"down.example&lt;script&gt;",
		"<td>parked</td>",
		"in 15m0s (12:15:00 UTC)",
		"proxy_auth",
		"rate_limited",
		"0.25/s",
		`<td class="num rate">—</td>`, // a pair with no rate: no limit
		`id="ov-exits" data-n="3"`, `id="ov-healthy" data-n="0"`, `id="ov-degraded" data-n="1"`, `id="ov-down" data-n="2"`,
		statuspage.HintFor(pool.ClassProxyAuth),
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, bad := range []string{"<b>parked</b>", "down.example<script>", `<td class="num rate"></td>`} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains unescaped %q", bad)
		}
	}
	if i, j := strings.Index(page, "c-&lt;b&gt;parked"), strings.Index(page, "a-healthy"); i < 0 || j < 0 || i > j {
		t.Errorf("the parked exit is not listed before the healthy one")
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q", csp)
	}
}

func TestMethods(t *testing.T) {
	h := newHandler(t)
	head := serve(t, h, http.MethodHead, "/?format=json", nil)
	body, _ := io.ReadAll(head.Body)
	if head.StatusCode != http.StatusOK || len(body) != 0 || head.Header.Get("Content-Length") == "0" {
		t.Errorf("HEAD = %d, %d body bytes, Content-Length %q; want 200, none, the GET's length", head.StatusCode, len(body), head.Header.Get("Content-Length"))
	}
	post := serve(t, h, http.MethodPost, "/", nil)
	if post.StatusCode != http.StatusMethodNotAllowed || post.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST = %d, Allow %q; want 405, GET, HEAD", post.StatusCode, post.Header.Get("Allow"))
	}
}

func TestMaxPairs(t *testing.T) {
	h := newHandler(t, statuspage.WithMaxPairs(2))
	tab := h.Table()
	if len(tab.Pairs) != 2 || tab.Summary.PairsOmitted != 2 || tab.Summary.PairsTracked != 4 {
		t.Fatalf("WithMaxPairs(2): %d rows, %d omitted, %d tracked; want 2, 2, 4", len(tab.Pairs), tab.Summary.PairsOmitted, tab.Summary.PairsTracked)
	}
	if tab.Pairs[0].Exit != "c-<b>parked</b>" || tab.Pairs[1].Origin != "shop.example" {
		t.Errorf("kept rows = %+v, want the parked exit's pair and the OPEN pair", tab.Pairs)
	}
	page := serve(t, h, http.MethodGet, "/", nil)
	body, _ := io.ReadAll(page.Body)
	if !strings.Contains(string(body), "2 more pairs") {
		t.Errorf("page does not say pairs were left out")
	}
}

func TestNewRejects(t *testing.T) {
	if _, err := statuspage.New(nil); err == nil {
		t.Errorf("New(nil) = nil error")
	}
	if _, err := statuspage.New(fixed(snapshot), statuspage.WithRefresh(-time.Second)); err == nil {
		t.Errorf("WithRefresh(-1s) = nil error")
	}
}

func newFuzzHandler() (*statuspage.Handler, error) { return statuspage.New(fixed(snapshot)) }
