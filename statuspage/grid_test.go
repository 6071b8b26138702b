package statuspage_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

var (
	closed   = breaker.Snapshot{State: breaker.Closed}
	halfOpen = breaker.Snapshot{State: breaker.HalfOpen, ProbesInFlight: 1, Trips: 1}
)

// TestSummaryAddsUp: each exit gets one status from its own breaker and its pairs', and the
// counts add up: exits = healthy + degraded + down, down = parked + cooling + probing.
func TestSummaryAddsUp(t *testing.T) {
	exits := []struct {
		label  string
		own    breaker.Snapshot
		pairs  []breaker.Snapshot
		status string
	}{
		{"fresh", closed, nil, statuspage.StatusHealthy},
		{"counting", closed, []breaker.Snapshot{{State: breaker.Closed, FailuresInWindow: 2}}, statuspage.StatusHealthy},
		{"one-pair-open", closed, []breaker.Snapshot{open(time.Minute, false, 1, "blocked"), closed}, statuspage.StatusDegraded},
		{"one-pair-probing", closed, []breaker.Snapshot{halfOpen}, statuspage.StatusDegraded},
		{"pair-parked", closed, []breaker.Snapshot{open(time.Hour, true, 1, "proxy_connect")}, statuspage.StatusDegraded},
		{"cooling", open(time.Minute, false, 1, "timeout"), nil, statuspage.StatusDown},
		{"cooling-with-pairs", open(time.Minute, false, 1, "timeout"), []breaker.Snapshot{open(time.Minute, false, 1, "timeout")}, statuspage.StatusDown},
		{"probing", halfOpen, nil, statuspage.StatusDown},
		{"parked", open(time.Hour, true, 1, "proxy_auth"), []breaker.Snapshot{closed}, statuspage.StatusDown},
		{"parked-probing", breaker.Snapshot{State: breaker.HalfOpen, Parked: true}, nil, statuspage.StatusDown},
	}
	s := pool.Snapshot{At: t0}
	for _, e := range exits {
		s.Exits = append(s.Exits, pool.ExitStatus{Exit: e.label, Weight: 1, Breaker: e.own})
		for i, p := range e.pairs {
			s.Pairs = append(s.Pairs, pool.PairStatus{Exit: e.label, Origin: fmt.Sprintf("o%d.example", i), Breaker: p})
		}
	}
	tab := statuspage.BuildTable(s, -1)
	got := map[string]string{}
	for _, e := range tab.Exits {
		got[e.Exit] = e.Status
	}
	for i, e := range exits {
		if got[e.label] != e.status {
			t.Errorf("step %d: status of %s = %q, want %q", i, e.label, got[e.label], e.status)
		}
	}
	sum := tab.Summary
	want := statuspage.Summary{Exits: 10, ExitsHealthy: 2, ExitsDegraded: 3, ExitsDown: 5, ExitsParked: 2, ExitsCooling: 2, ExitsProbing: 1,
		ExitsOpen: 3, PairsTracked: 7, PairsOpen: 3, PairsHalfOpen: 1, Origins: 2}
	if sum != want {
		t.Errorf("summary = %+v, want %+v", sum, want)
	}
	if sum.ExitsHealthy+sum.ExitsDegraded+sum.ExitsDown != sum.Exits || sum.ExitsParked+sum.ExitsCooling+sum.ExitsProbing != sum.ExitsDown {
		t.Errorf("summary does not add up: %+v", sum)
	}
	// Down exits first, the parked ones first among them; healthy exits last.
	if first, last := tab.Exits[0], tab.Exits[len(tab.Exits)-1]; !first.Parked || last.Status != statuspage.StatusHealthy {
		t.Errorf("exit order: first %s (%s), last %s (%s); want a parked one first and a healthy one last", first.Exit, first.Status, last.Exit, last.Status)
	}
}

// manyOrigins is a pool of nExits exits that has tracked pairs for nOrigins origins: every exit
// has a closed pair for every fifth origin; exit e07 is parked; e03's pair for o0500 is OPEN; the
// guard of o0999 is OPEN.
func manyOrigins(nExits, nOrigins int) pool.Snapshot {
	s := pool.Snapshot{At: t0}
	for i := range nExits {
		e := pool.ExitStatus{Exit: fmt.Sprintf("e%02d", i), Weight: 1}
		if i == 7 {
			e.Breaker = open(time.Hour, true, 1, "proxy_auth")
		}
		s.Exits = append(s.Exits, e)
		for o := 0; o < nOrigins; o += 5 {
			s.Pairs = append(s.Pairs, pool.PairStatus{Exit: e.Exit, Origin: fmt.Sprintf("o%04d", o), Breaker: breaker.Snapshot{FailuresInWindow: 1}})
		}
	}
	s.Pairs = append(s.Pairs, pool.PairStatus{Exit: "e03", Origin: "o0500", Rate: 0.5, Breaker: open(time.Minute, false, 1, "rate_limited")})
	s.Pairs = append(s.Pairs, pool.PairStatus{Exit: "e04", Origin: "o0501", Breaker: open(time.Minute, false, 1, "blocked")})
	for o := range nOrigins {
		g := pool.OriginStatus{Origin: fmt.Sprintf("o%04d", o)}
		if o == 999 {
			g.Breaker = open(10*time.Second, false, 1, "origin_5xx")
		}
		s.Origins = append(s.Origins, g)
	}
	return s
}

// TestGridBounded: a thousand origins make a dozen columns and "and 988 more", the most active
// first; the rows kept are the exits in the most trouble whatever the sort.
func TestGridBounded(t *testing.T) {
	h, err := statuspage.New(fixed(manyOrigins(20, 1000)), statuspage.WithGrid(3, 12))
	if err != nil {
		t.Fatal(err)
	}
	for _, sort := range []string{"", "name", "bogus"} {
		resp := serve(t, h, http.MethodGet, "/?format=json&sort="+sort, nil)
		var tab statuspage.Table
		if err := json.NewDecoder(resp.Body).Decode(&tab); err != nil {
			t.Fatal(err)
		}
		g := tab.Grid
		if len(g.Origins) != 12 || g.OriginsOmitted != 988 {
			t.Fatalf("sort %q: %d columns, %d omitted; want 12, 988", sort, len(g.Origins), g.OriginsOmitted)
		}
		// The guard-open origin, then the one with an OPEN pair (o0500 before o0501 by name), then
		// the most tracked pairs.
		if g.Origins[0].Origin != "o0999" || g.Origins[1].Origin != "o0500" || g.Origins[2].Origin != "o0501" || g.Origins[3].PairsTracked != 20 {
			t.Errorf("sort %q: first columns = %+v", sort, g.Origins[:4])
		}
		var rows []string
		for _, r := range g.Rows {
			rows = append(rows, r.Exit)
			if len(r.Cells) != len(g.Origins) {
				t.Errorf("sort %q: row %s has %d cells, want %d", sort, r.Exit, len(r.Cells), len(g.Origins))
			}
		}
		wantRows, wantSort := "e07 e03 e04", statuspage.SortStatus // parked, then degraded
		if sort == "name" {
			wantRows, wantSort = "e03 e04 e07", statuspage.SortName
		}
		if strings.Join(rows, " ") != wantRows || g.Sort != wantSort {
			t.Errorf("sort %q: rows %v, sort %q; want %s, %q", sort, rows, g.Sort, wantRows, wantSort)
		}
		if g.ExitsOmitted != 17 || g.ExitsOmittedUnhealthy != 0 {
			t.Errorf("sort %q: exits omitted %d (%d unhealthy), want 17 (0)", sort, g.ExitsOmitted, g.ExitsOmittedUnhealthy)
		}
		for _, r := range g.Rows {
			if r.Exit == "e03" {
				if c := r.Cells[1]; !c.Tracked || c.State != breaker.Open || c.LastFailure != "rate_limited" || c.Rate != 0.5 {
					t.Errorf("sort %q: cell e03 × o0500 = %+v", sort, c)
				}
				if c := r.Cells[0]; c.Tracked {
					t.Errorf("sort %q: cell e03 × o0999 = %+v, want untracked", sort, c)
				}
			}
		}
	}

	body := get(t, h, "/")
	if n := strings.Count(body, `<th class="origin `); n != 12 {
		t.Errorf("page has %d origin columns, want 12", n)
	}
	for _, want := range []string{"and 988 more", "and 17 more exits (0 not healthy)"} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestGridOtherTrouble: trouble in an origin beyond the columns is counted on the exit's row, so
// bounding the columns hides no OPEN pair.
func TestGridOtherTrouble(t *testing.T) {
	s := pool.Snapshot{At: t0, Exits: []pool.ExitStatus{{Exit: "x"}, {Exit: "y"}}, Pairs: []pool.PairStatus{
		{Exit: "x", Origin: "a.example", Breaker: open(time.Minute, false, 1, "blocked")},
		{Exit: "x", Origin: "b.example", Breaker: open(time.Minute, false, 1, "blocked")},
		{Exit: "y", Origin: "b.example", Breaker: halfOpen},
		{Exit: "y", Origin: "c.example", Breaker: open(time.Minute, false, 1, "blocked")},
	}}
	h, err := statuspage.New(fixed(s), statuspage.WithGrid(-1, 1))
	if err != nil {
		t.Fatal(err)
	}
	g := h.Table().Grid
	if len(g.Origins) != 1 || g.Origins[0].Origin != "b.example" || g.OriginsOmitted != 2 {
		t.Fatalf("columns = %+v, %d omitted; want b.example (two pairs in trouble), 2 omitted", g.Origins, g.OriginsOmitted)
	}
	other := map[string]int{}
	for _, r := range g.Rows {
		other[r.Exit] = r.OtherTrouble
	}
	if other["x"] != 1 || other["y"] != 1 {
		t.Errorf("other trouble = %v, want x:1 y:1", other)
	}
	if n := strings.Count(get(t, h, "/"), "1 in trouble"); n != 2 {
		t.Errorf("page shows the trouble beyond the columns %d times, want 2", n)
	}
}

// TestDisplayNames: labels show compactly, unique, and with no password even when a hand-made
// label holds one.
func TestDisplayNames(t *testing.T) {
	long := "http://customer-acme-cc-us-city-denver-sessid-0123456789abcdef:xxxxx@pr.example.net:7777"
	s := pool.Snapshot{At: t0, Exits: []pool.ExitStatus{
		{Exit: pool.MustParseExit("http://user:pw@dc1.example:8080").Label()},
		{Exit: pool.MustParseExit("socks5h://u:pw@127.0.0.1:1080").Label()},
		{Exit: "dc-1"},
		{Exit: long},
		{Exit: "http://a:xxxxx@h.example:1"}, // collides with the next once compacted
		{Exit: "http://a@h.example:1"},
		{Exit: "http://hand:hunter2@made.example:3128"}, // a label chosen by hand, with a password
	}}
	tab := statuspage.BuildTable(s, -1)
	got := map[string]string{}
	for _, e := range tab.Exits {
		got[e.Exit] = e.Display
	}
	for _, tc := range []struct{ label, want string }{
		{"http://user:xxxxx@dc1.example:8080", "user@dc1.example:8080"},
		{"socks5h://u:xxxxx@127.0.0.1:1080", "socks5h://u@127.0.0.1:1080"},
		{"dc-1", "dc-1"},
		{long, "custom…3456789abcdef@pr.example.net:7777"}, // the session id and host:port kept
		{"http://a:xxxxx@h.example:1", "http://a:xxxxx@h.example:1"},
		{"http://a@h.example:1", "http://a@h.example:1"},
		{"http://hand:hunter2@made.example:3128", "hand@made.example:3128"},
	} {
		if got[tc.label] != tc.want {
			t.Errorf("display of %q = %q, want %q", tc.label, got[tc.label], tc.want)
		}
	}
	if n := len([]rune(got[long])); n != 40 {
		t.Errorf("display of the long label has %d runes, want 40", n)
	}
	h, err := statuspage.New(fixed(s))
	if err != nil {
		t.Fatal(err)
	}
	if body := get(t, h, "/"); strings.Contains(body, "hunter2") {
		t.Errorf("the page shows the password of a hand-made label")
	}
}

// TestRateColumn: a pair's rate shows as requests a second; no rate, or an infinite one, as "—"
// (no limit), and the JSON still encodes.
func TestRateColumn(t *testing.T) {
	s := pool.Snapshot{At: t0, Exits: []pool.ExitStatus{{Exit: "x"}}, Pairs: []pool.PairStatus{
		{Exit: "x", Origin: "a.example", Rate: 2, Breaker: closed},
		{Exit: "x", Origin: "b.example", Breaker: closed},
		{Exit: "x", Origin: "c.example", Rate: math.Inf(1), Breaker: closed},
	}}
	h, err := statuspage.New(fixed(s))
	if err != nil {
		t.Fatal(err)
	}
	resp := serve(t, h, http.MethodGet, "/?format=json", nil)
	var tab statuspage.Table
	if err := json.NewDecoder(resp.Body).Decode(&tab); err != nil {
		t.Fatalf("JSON with an infinite rate: %v", err)
	}
	rates := regexp.MustCompile(`<td class="num rate">([^<]*)</td>`).FindAllStringSubmatch(get(t, h, "/"), -1)
	var cells []string
	for _, m := range rates {
		cells = append(cells, m[1])
	}
	if strings.Join(cells, " ") != "2/s — —" {
		t.Errorf("rate cells = %q, want [2/s — —]", cells)
	}
}

// TestActions: the failure classes holding breakers out, the most exits down first, with hints.
func TestActions(t *testing.T) {
	tab := statuspage.BuildTable(snapshot, -1)
	var got []string
	for _, a := range tab.Actions {
		got = append(got, fmt.Sprintf("%s:%d/%d/%d", a.Class, a.Exits, a.Pairs, a.Origins))
		if a.Hint != statuspage.HintFor(pool.Class(a.Class)) || a.Hint == "" {
			t.Errorf("action %s: hint %q", a.Class, a.Hint)
		}
	}
	if want := "timeout:1/0/1 proxy_auth:1/0/0 rate_limited:0/1/0"; strings.Join(got, " ") != want {
		t.Errorf("actions = %s, want %s", strings.Join(got, " "), want)
	}
	if ex := tab.Actions[1].Examples; len(ex) != 1 || ex[0] != "c-<b>parked</b>" {
		t.Errorf("proxy_auth examples = %q", ex)
	}
	calm := statuspage.BuildTable(pool.Snapshot{At: t0, Exits: []pool.ExitStatus{{Exit: "x"}}}, -1)
	if len(calm.Actions) != 0 {
		t.Errorf("a calm pool's actions = %+v, want none", calm.Actions)
	}
}

// TestPageSelfContained: the only script is the inline one the Content-Security-Policy names by
// hash; nothing is loaded from elsewhere.
func TestPageSelfContained(t *testing.T) {
	h := newHandler(t)
	resp := serve(t, h, http.MethodGet, "/", nil)
	b, _ := io.ReadAll(resp.Body)
	body := string(b)
	scripts := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindAllStringSubmatch(body, -1)
	if len(scripts) != 1 {
		t.Fatalf("page has %d inline scripts, want 1", len(scripts))
	}
	sum := sha256.Sum256([]byte(scripts[0][1]))
	csp := resp.Header.Get("Content-Security-Policy")
	if want := "script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"; !strings.Contains(csp, want) {
		t.Errorf("Content-Security-Policy = %q, want it to hold %q", csp, want)
	}
	for _, bad := range []string{"<script src", "<link", "<img", "@import", "https://", "url("} {
		if strings.Contains(body, bad) {
			t.Errorf("page holds %q: an external asset", bad)
		}
	}
	static, err := statuspage.New(fixed(snapshot), statuspage.WithRefresh(0))
	if err != nil {
		t.Fatal(err)
	}
	if body := get(t, static, "/"); strings.Contains(body, "http-equiv") || !strings.Contains(body, `data-refresh-ms="0"`) {
		t.Errorf("WithRefresh(0): the page still refreshes itself")
	}
}

func get(t *testing.T, h http.Handler, target string) string {
	t.Helper()
	resp := serve(t, h, http.MethodGet, target, nil)
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
