package statuspage_test

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

// chromiumPath finds Debian's Chromium ($CHROMIUM overrides). Without one the browser tests skip,
// except under CI=true, where they fail: `make deps` installs the chromium package.
func chromiumPath(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("CHROMIUM"), "chromium", "/usr/bin/chromium", "chromium-browser"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH or at /usr/bin/chromium (set $CHROMIUM, or apt-get install chromium; `make deps` does)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser starts a headless Chromium for the test and returns a tab's context, bounded to a
// minute. Chromedp gives it a temporary user-data dir and removes it when the test ends. The
// browser resolves no host name but 127.0.0.1 and uses no proxy: a page that needed anything
// from elsewhere (a CDN) would break, and nothing leaves the machine.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.WindowSize(1440, 900),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancelTab()
		cancelAlloc() // waits for the browser to exit
	})
	// Start the browser on a context without a deadline (a deadline on the first Run would bound
	// the browser's life, not the action), then bound everything after.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Passwords of the browser test's exits: none may reach the page.
var browserSecrets = []string{"s3cret-alpha", "s3cret-bravo", "s3cret-charlie", "s3cret-delta", "s3cret-echo"}

// browserPool is a real pool on a fake clock, its breakers moved by picks and reports:
//
//	alice (a redacted URL label)  parked: the proxy rejected its credentials (proxy_auth)
//	bob                           degraded: shop.example rate-limits it (429, Retry-After 30s), pace cut
//	dc-carol (a chosen label)     healthy
//	dave (host:port:user:pass)    healthy (the live-update step parks it: proxy_refused)
//	erin (socks5h)                degraded: search.example serves it WAF challenges (blocked)
//	down.example                  its guard OPEN: it fails through bob, carol and dave alike
type browserPool struct {
	t     *testing.T
	p     *pool.Pool
	clk   *clock.Fake
	label map[string]string // short name → the exit's label
}

func newBrowserPool(t *testing.T) *browserPool {
	t.Helper()
	exits := map[string]*pool.Exit{
		"alice": pool.MustParseExit("http://alice:s3cret-alpha@127.0.0.1:9001"),
		"bob":   pool.MustParseExit("http://bob:s3cret-bravo@127.0.0.1:9002"),
		"carol": pool.MustParseExit("http://carol:s3cret-charlie@127.0.0.1:9003").WithLabel("dc-carol"),
		"dave":  pool.MustParseExit("127.0.0.1:9004:dave-session-0042:s3cret-delta").WithTier(1),
		"erin":  pool.MustParseExit("socks5h://erin:s3cret-echo@127.0.0.1:9005"),
	}
	bp := &browserPool{t: t, clk: clock.NewFake(t0), label: map[string]string{}}
	var all []*pool.Exit
	for name, e := range exits {
		bp.label[name] = e.Label()
		all = append(all, e)
	}
	p, err := pool.New(pool.WithClock(bp.clk), pool.WithSeed(1), pool.WithInlineSweep(), pool.WithExits(all...),
		pool.WithRateLimits(ratelimit.Limits{FailFast: true})) // no limits, but 429s cut a pair's pace; never wait
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	bp.p = p
	return bp
}

// report picks exit name for origin and reports v on the lease, half a second after the last one
// (so a pair whose pace a 429 cut has its next token).
func (bp *browserPool) report(name, origin string, v pool.Verdict) {
	bp.t.Helper()
	bp.clk.Advance(500 * time.Millisecond)
	l, err := bp.p.Pick(context.Background(), pool.Request{Origin: origin, Exit: bp.label[name]})
	if err != nil {
		bp.t.Fatalf("Pick(%s, %s): %v", name, origin, err)
	}
	l.Report(v)
}

func (bp *browserPool) setUp() {
	ok := pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}
	for _, name := range []string{"bob", "carol", "dave", "erin"} {
		for _, o := range []string{"shop.example", "news.example", "search.example"} {
			bp.report(name, o, ok)
		}
	}
	bp.report("alice", "shop.example", pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth})
	// A 429 without Retry-After cuts the pair's pace (AIMD, limits being configured); one with it
	// opens the pair for its 30 s.
	bp.report("bob", "shop.example", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited})
	bp.report("bob", "shop.example", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: 30 * time.Second})
	// A block trips its pair at once (breaker.Failure.Decisive).
	bp.report("erin", "search.example", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked})
	for _, name := range []string{"carol", "dave"} {
		bp.report(name, "news.example", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true})
	}
	// down.example fails through three exits at once: its guard blames the origin, not them.
	for _, name := range []string{"bob", "carol", "dave"} {
		bp.report(name, "down.example", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOriginError})
	}
}

// rendered is what the test reads from the page's DOM.
type rendered struct {
	Overview map[string]int `json:"overview"`
	Columns  []string       `json:"columns"`
	Rows     []struct {
		Exit, Status, Name, Text string
		Cells                    []struct{ Class, Text string }
	} `json:"rows"`
	ExitHints map[string]string `json:"exitHints"`
	Rates     []string          `json:"rates"`
	Legend    string            `json:"legend"`
	Live      string            `json:"live"`
	Text      string            `json:"text"`
	HTML      string            `json:"html"`
}

const readPage = `(() => {
	const ov = {};
	for (const el of document.querySelectorAll('#overview [data-n]')) ov[el.id] = Number(el.dataset.n);
	const rows = [...document.querySelectorAll('#grid tbody tr')].map(tr => ({
		Exit: tr.dataset.exit, Status: tr.dataset.status, Name: tr.querySelector('th').innerText, Text: tr.innerText,
		Cells: [...tr.querySelectorAll('td.cell')].map(td => ({Class: td.className, Text: td.innerText})),
	}));
	const exitHints = {};
	for (const tr of document.querySelectorAll('#exits tr[data-exit]')) exitHints[tr.dataset.exit] = tr.querySelector('td.hint').innerText;
	return {
		overview: ov,
		columns: [...document.querySelectorAll('#grid th.origin')].map(th => th.firstChild.textContent),
		rows: rows,
		exitHints: exitHints,
		rates: [...document.querySelectorAll('#pairs td.rate')].map(td => td.innerText),
		legend: document.getElementById('legend').innerText,
		live: document.getElementById('live-status').innerText,
		text: document.body.innerText,
		html: document.documentElement.outerHTML,
	};
})()`

// TestBrowser loads the page of a real pool in headless Chromium and checks what an operator sees:
// counts that add up and match the snapshot, the grid's states, the hint for a parked exit, the
// rate column, no password; then changes the pool and waits for the page to follow, without a
// reload.
func TestBrowser(t *testing.T) {
	ctx := browser(t)
	bp := newBrowserPool(t)
	bp.setUp()
	h, err := statuspage.New(bp.p, statuspage.WithTitle("proxybreaker: browser test"), statuspage.WithRefresh(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible("#overview")); err != nil {
		t.Fatal(err)
	}
	page, err := chromedp.Run(ctx, chromedp.Evaluate[rendered](readPage))
	if err != nil {
		t.Fatal(err)
	}

	// The overview adds up and says what the snapshot says.
	sum := h.Table().Summary
	ov := page.Overview
	for _, c := range []struct {
		id        string
		got, want int
	}{
		{"ov-exits", ov["ov-exits"], 5}, {"ov-healthy", ov["ov-healthy"], 2}, {"ov-degraded", ov["ov-degraded"], 2},
		{"ov-down", ov["ov-down"], 1}, {"ov-parked", ov["ov-parked"], 1}, {"ov-pairs-open", ov["ov-pairs-open"], 2},
		{"ov-origins-open", ov["ov-origins-open"], 1},
		{"ov-exits = snapshot", ov["ov-exits"], sum.Exits}, {"ov-healthy = snapshot", ov["ov-healthy"], sum.ExitsHealthy},
		{"ov-degraded = snapshot", ov["ov-degraded"], sum.ExitsDegraded}, {"ov-down = snapshot", ov["ov-down"], sum.ExitsDown},
		{"ov-pairs-open = snapshot", ov["ov-pairs-open"], sum.PairsOpen}, {"ov-origins-open = snapshot", ov["ov-origins-open"], sum.OriginsOpen},
		{"healthy + degraded + down", ov["ov-healthy"] + ov["ov-degraded"] + ov["ov-down"], ov["ov-exits"]},
		{"parked + cooling + probing", ov["ov-parked"] + ov["ov-cooling"] + ov["ov-probing"], ov["ov-down"]},
	} {
		if c.got != c.want {
			t.Errorf("overview %s = %d, want %d", c.id, c.got, c.want)
		}
	}

	// The grid: the parked exit first, by its compact name, with its hint; bob's rate-limited pair.
	if len(page.Rows) != 5 || page.Rows[0].Exit != bp.label["alice"] {
		t.Fatalf("grid rows = %+v, want 5 with alice's first", page.Rows)
	}
	alice := page.Rows[0]
	if alice.Status != statuspage.StatusDown || alice.Name != "alice@127.0.0.1:9001" ||
		!strings.Contains(alice.Text, "parked") || !strings.Contains(alice.Text, "proxy_auth") {
		t.Errorf("alice's row = %+v, want down, named alice@127.0.0.1:9001, parked, proxy_auth", alice)
	}
	authHint := statuspage.HintFor(pool.ClassProxyAuth)
	if !strings.Contains(alice.Text, authHint) || page.ExitHints[bp.label["alice"]] != authHint {
		t.Errorf("proxy_auth hint %q: grid row %q, exits table %q", authHint, alice.Text, page.ExitHints[bp.label["alice"]])
	}
	shop := -1
	for i, c := range page.Columns {
		if c == "shop.example" {
			shop = i
		}
	}
	if shop < 0 {
		t.Fatalf("grid columns = %q, want shop.example among them", page.Columns)
	}
	states := map[string]string{}
	for _, r := range page.Rows {
		states[r.Exit] = r.Status
		if r.Exit == bp.label["bob"] {
			c := r.Cells[shop]
			if !strings.Contains(c.Class, "open") || !strings.Contains(c.Text, "rate_limited") || !strings.Contains(c.Text, "/s") {
				t.Errorf("bob × shop.example cell = %+v, want open, rate_limited, a rate", c)
			}
		}
	}
	for name, want := range map[string]string{"bob": "degraded", "carol": "healthy", "dave": "healthy", "erin": "degraded"} {
		if states[bp.label[name]] != want {
			t.Errorf("grid status of %s = %q, want %q", name, states[bp.label[name]], want)
		}
	}

	// The rate column is never empty: a rate, or "—" for no limit, which the legend explains.
	limited := 0
	for _, r := range page.Rates {
		switch {
		case r == "—":
		case strings.HasSuffix(r, "/s"):
			limited++
		default:
			t.Errorf("rate cell %q, want a rate or —", r)
		}
	}
	if limited == 0 || len(page.Rates) < 3 || !strings.Contains(page.Legend, "rate —") || !strings.Contains(page.Legend, "no limit") {
		t.Errorf("rates %q (%d limited), legend %q: want a limited pair, others —, explained", page.Rates, limited, page.Legend)
	}

	// No password anywhere, rendered or in the markup.
	for _, s := range browserSecrets {
		if strings.Contains(page.Text, s) || strings.Contains(page.HTML, s) {
			t.Errorf("the page shows password %q", s)
		}
	}

	// Live: park dave in the pool; the page follows without a reload (the marker survives).
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.noReload = "still here"`)); err != nil {
		t.Fatal(err)
	}
	bp.report("dave", "news.example", pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyRefused})
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById('ov-down').dataset.n === "2"`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the page did not show the second exit down: %v", err)
	}
	after, err := chromedp.Run(ctx, chromedp.Evaluate[rendered](readPage))
	if err != nil {
		t.Fatal(err)
	}
	marker, err := chromedp.Run(ctx, chromedp.Evaluate[string](`window.noReload || ""`))
	if err != nil || marker != "still here" {
		t.Errorf("window marker after the update = %q, %v: the page reloaded", marker, err)
	}
	if got := after.Overview; got["ov-healthy"]+got["ov-degraded"]+got["ov-down"] != got["ov-exits"] || got["ov-healthy"] != 1 {
		t.Errorf("overview after parking dave = %v, want 1 healthy and counts that add up", got)
	}
	if refused := statuspage.HintFor(pool.ClassProxyRefused); !strings.Contains(after.Text, refused) {
		t.Errorf("after parking dave, the page lacks the proxy_refused hint %q", refused)
	}
	if !strings.HasPrefix(after.Live, "live: updated") {
		t.Errorf("live status = %q, want it to say it updated", after.Live)
	}

	if path := os.Getenv("STATUSPAGE_SCREENSHOT"); path != "" {
		// For a person to look at: STATUSPAGE_SCREENSHOT=/tmp/statuspage.png go test -run TestBrowser
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err == nil {
			err = os.WriteFile(path, png, 0o644)
		}
		if err != nil {
			t.Errorf("screenshot: %v", err)
		}
	}

	// Sortable: by name, and the live updates keep the order asked for.
	// The click is one script: live updates re-render the grid, and a node chromedp.Click resolved
	// may be gone by the time it is clicked ("Could not find node with given id").
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`document.querySelector('#grid a[href="?sort=name"]').click()`),
		chromedp.WaitVisible(`#grid .sort b`)); err != nil {
		t.Fatal(err)
	}
	bp.report("erin", "news.example", pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyDNS})
	byName, err := chromedp.Run(ctx, chromedp.Poll[[]string](`(() => {
		if (document.getElementById('ov-down').dataset.n !== "3") return false;
		return [...document.querySelectorAll('#grid tbody th.exit')].map(th => th.innerText);
	})()`, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		t.Fatalf("after sorting by name, the page did not show the third exit down: %v", err)
	}
	if want := "alice@127.0.0.1:9001 bob@127.0.0.1:9002 dave-session-0042@127.0.0.1:9004 dc-carol socks5h://erin@127.0.0.1:9005"; strings.Join(byName, " ") != want {
		t.Errorf("rows sorted by name = %q, want %s", byName, want)
	}

}

// TestBrowserStaleNotice: when the server stops answering, the page says it is not updating
// instead of showing old numbers as if they were live.
func TestBrowserStaleNotice(t *testing.T) {
	ctx := browser(t)
	bp := newBrowserPool(t)
	h, err := statuspage.New(bp.p, statuspage.WithRefresh(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible("#overview")); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	status, err := chromedp.Run(ctx, chromedp.Poll[string](`(() => { const s = document.getElementById('live-status'); return s.className === 'stale' && s.innerText; })()`,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(30*time.Second)))
	if err != nil {
		t.Fatalf("no stale notice after the server went away: %v", err)
	}
	if !strings.HasPrefix(status, "not updating") {
		t.Errorf("live status = %q, want it to start with \"not updating\"", status)
	}
}
