package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/examples/internal/exampletest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// needChromium skips the test when no Chromium is installed, and fails it under CI=true, where the
// Makefile's deps target installs Debian's chromium package.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := findChromium(""); err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%v; CI must install chromium (make deps)", err)
		}
		t.Skipf("%v; install Debian's chromium package to run this test", err)
	}
}

// TestRun runs the example as `go run ./examples/browser -seed 7` does, with a real headless
// Chromium, and checks what it claims: navigations through the healthy exits load (credentials
// given through the Fetch domain included), the exit whose proxy answers 407 ends parked, the
// challenge page is judged blocked for its (exit, site) pair only, the 429s open their pairs with
// the Retry-After, the dead exit's failures are connection-level, nothing reached a site without an
// exit and no password was printed.
func TestRun(t *testing.T) {
	needChromium(t)
	cfg := config{Rounds: 8, Attempts: 3, Seed: 7, Timeout: DefaultNavigationTimeout}
	var s summary
	text := exampletest.Output(t, secrets(), func(ctx context.Context, out io.Writer) (err error) {
		s, err = run(ctx, cfg, out)
		return err
	})
	t.Logf("output:\n%s", text)

	if len(s.Visits) != cfg.Rounds*3 {
		t.Errorf("visited %d pages, want %d", len(s.Visits), cfg.Rounds*3)
	}
	loaded := map[string]int{}           // pages loaded, by exit
	sites := map[string]map[string]int{} // sites an exit loaded a page of
	var blocked, limited, authBad, dead int
	for _, v := range s.Visits {
		if (v.Site == "news" || v.Site == "shop") && !v.Loaded {
			t.Errorf("visit %d (%s %s) did not load (refusal %v), want every news and shop page loaded", v.N, v.Site, v.Path, v.Err)
		}
		for i, a := range v.Attempts {
			where := "visit " + strconv.Itoa(v.N) + " attempt " + strconv.Itoa(i+1) + " (" + a.Exit + ", " + v.Site + ")"
			if a.Verdict.Outcome == pool.Success {
				if a.Status == 200 && !bytes.Contains(a.Body, []byte(carriedBy(a.Exit))) {
					t.Errorf("%s: the page says %q, want %q: the picked exit must carry the navigation", where, carrier(a.Body), carriedBy(a.Exit))
				}
				loaded[a.Exit]++
				if sites[a.Exit] == nil {
					sites[a.Exit] = map[string]int{}
				}
				sites[a.Exit][v.Site]++
			}
			switch {
			case a.Exit == "auth-bad":
				authBad++
				if a.Verdict.Outcome != pool.Permanent || a.Verdict.Scope != pool.ScopeExit || a.Verdict.Class != pool.ClassProxyAuth {
					t.Errorf("%s: verdict %+v, want permanent exit proxy_auth", where, a.Verdict)
				}
			case a.Exit == "dead":
				dead++
				if a.Verdict.Outcome != pool.Transient || !a.Verdict.ConnLevel || a.Err == nil ||
					!strings.Contains(a.Err.Error(), "ERR_PROXY_CONNECTION_FAILED") {
					t.Errorf("%s: verdict %+v, err %v; want transient, connection-level, ERR_PROXY_CONNECTION_FAILED", where, a.Verdict, a.Err)
				}
			case a.Verdict.Class == pool.ClassBlocked:
				blocked++
				if a.Exit != s.Challenged || v.Site != "shop" || a.Status != 403 || a.Verdict.Detector != "cloudflare" {
					t.Errorf("%s: blocked (status %d, detector %q), want blocked only for %s on shop, status 403, by cloudflare",
						where, a.Status, a.Verdict.Detector, s.Challenged)
				}
			case a.Verdict.Class == pool.ClassRateLimited:
				limited++
				if v.Site != "api" || a.Status != 429 || a.Verdict.Outcome != pool.Transient || a.Verdict.RetryAfter != apiRetryAfter*time.Second {
					t.Errorf("%s: status %d, verdict %+v; want a transient 429 from api with a %ds Retry-After", where, a.Status, a.Verdict, apiRetryAfter)
				}
			case a.Verdict.Outcome != pool.Success || (a.Status != 200 && a.Status != 404):
				t.Errorf("%s: status %d, verdict %+v, err %v; want a healthy exit's page to load", where, a.Status, a.Verdict, a.Err)
			}
		}
	}
	for _, e := range []string{"dc-1", "dc-2", "dc-3"} { // dc-2 and dc-3 need their credentials
		if loaded[e] == 0 {
			t.Errorf("%s loaded no page, want every healthy exit to carry some", e)
		}
	}
	if authBad == 0 || dead == 0 || blocked == 0 || limited == 0 {
		t.Fatalf("attempts: %d through auth-bad, %d through dead, %d blocked, %d rate-limited; want each at least once (seed %d)",
			authBad, dead, blocked, limited, cfg.Seed)
	}

	exits := map[string]breaker.Snapshot{}
	for _, e := range s.Snapshot.Exits {
		exits[e.Exit] = e.Breaker
	}
	if b := exits["auth-bad"]; b.State != breaker.Open || !b.Parked || b.LastFailure != string(pool.ClassProxyAuth) {
		t.Errorf("auth-bad's breaker = %s, parked %v, last %q; want open, parked, proxy_auth", b.State, b.Parked, b.LastFailure)
	}
	if b := exits[s.Challenged]; b.State != breaker.Closed {
		t.Errorf("the challenged exit %s's own breaker = %s, want closed: the challenge is the pair's", s.Challenged, b.State)
	}
	elsewhere := 0 // pages the challenged exit loaded from other sites
	for site, n := range sites[s.Challenged] {
		if site != "shop" {
			elsewhere += n
		}
	}
	if elsewhere == 0 {
		t.Errorf("the challenged exit %s loaded pages of %v, want pages of another site", s.Challenged, sites[s.Challenged])
	}
	var pairBlocked bool
	limitedPairs := 0
	for _, pr := range s.Snapshot.Pairs {
		site := s.Names[pr.Origin]
		switch pr.Breaker.LastFailure {
		case string(pool.ClassBlocked):
			if pr.Exit != s.Challenged || site != "shop" {
				t.Errorf("pair %s × %s failed as blocked, want only %s × shop", pr.Exit, site, s.Challenged)
			}
			pairBlocked = pr.Breaker.State != breaker.Closed
		case string(pool.ClassRateLimited):
			if site != "api" || pr.Breaker.State != breaker.Open {
				t.Errorf("pair %s × %s = %s after a 429, want an open api pair", pr.Exit, site, pr.Breaker.State)
			}
			limitedPairs++
		}
	}
	if !pairBlocked {
		t.Errorf("pair %s × shop is not open after its challenge pages; pairs: %+v", s.Challenged, s.Snapshot.Pairs)
	}
	if limitedPairs == 0 {
		t.Errorf("no api pair open after a 429; pairs: %+v", s.Snapshot.Pairs)
	}

	if s.Direct != 0 {
		t.Errorf("%d request(s) reached a site without an exit, want 0", s.Direct)
	}
	if s.Leaks != 0 {
		t.Errorf("%d printed line(s) held a password", s.Leaks)
	}
	for _, p := range secrets() {
		for _, v := range s.Visits {
			for _, a := range v.Attempts {
				if a.Err != nil && strings.Contains(a.Err.Error(), p) {
					t.Errorf("visit %d's error %q holds a password", v.N, a.Err)
				}
			}
		}
	}
	for _, want := range []string{"which exit carried what", "breakers at the end", "0 request(s) reached a site without an exit"} {
		if !strings.Contains(text, want) {
			t.Errorf("the output lacks %q", want)
		}
	}
}

// TestRunWithoutChromium: a -chromium that does not exist is an error that says so, before
// anything starts.
func TestRunWithoutChromium(t *testing.T) {
	exampletest.CheckLeaks(t)
	cfg := config{Rounds: 1, Attempts: 1, Timeout: time.Second, Chromium: "/nonexistent/chromium"}
	_, err := run(context.Background(), cfg, &bytes.Buffer{})
	if !errors.Is(err, errNoChromium) || !strings.Contains(err.Error(), "/nonexistent/chromium") {
		t.Errorf("run(%+v) = %v, want errNoChromium naming the path", cfg, err)
	}
}

// carrier returns the sentence of a page that names the proxy that carried it.
func carrier(body []byte) string {
	if i := bytes.Index(body, []byte("carried by ")); i >= 0 {
		if j := bytes.IndexByte(body[i:], '.'); j >= 0 {
			return string(body[i : i+j+1])
		}
	}
	return ""
}

// TestNavigateConcurrently: navigations from several goroutines share one browser and never each
// other's proxy: every page was carried by the exit its own lease picked, credentials included.
func TestNavigateConcurrently(t *testing.T) {
	needChromium(t)
	exampletest.CheckLeaks(t)
	execPath, err := findChromium("")
	if err != nil {
		t.Fatal(err)
	}
	w, err := startWorld()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b, err := startBrowser(context.Background(), execPath, browserStartTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer b.stop()
	p, err := pool.New(pool.WithExits(w.Exits[:3]...)) // dc-1, and dc-2 and dc-3 with credentials
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	n, err := NewNavigator(p, b.ctx, NavigatorConfig{})
	if err != nil {
		t.Fatal(err)
	}

	const workers, each = 3, 3
	results := make(chan Result, workers*each)
	errs := make(chan error, workers*each)
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				res, err := n.Navigate(context.Background(), fmt.Sprintf("%s/story/%d", w.origins[0].URL, 10+g*each+i), nil)
				if err != nil {
					errs <- err
					continue
				}
				results <- res
			}
		}()
	}
	wg.Wait()
	close(results)
	close(errs)
	for err := range errs {
		t.Errorf("Navigate = %v, want no error", err)
	}
	got := 0
	for res := range results {
		got++
		if res.Verdict.Outcome != pool.Success || res.Status != 200 || !bytes.Contains(res.Body, []byte(carriedBy(res.Exit))) {
			t.Errorf("Navigate(%s) through %s = status %d, verdict %+v, page %q; want 200, success, %q",
				res.URL, res.Exit, res.Status, res.Verdict, carrier(res.Body), carriedBy(res.Exit))
		}
	}
	if got != workers*each {
		t.Errorf("%d navigations, want %d", got, workers*each)
	}
	if d := w.directRequests(); d != 0 {
		t.Errorf("%d request(s) reached the site without an exit, want 0", d)
	}
}

// hangingProxy listens on 127.0.0.1, accepts connections and never answers them, and sends on
// accepted as each one arrives (dropping the news when nobody listens).
func hangingProxy(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 1)
	done := make(chan struct{})
	var conns []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String(), ch
}

// TestNavigateHangingExit: an exit that never answers is blamed when the navigation's own timeout
// passes (a connection-level timeout), and nobody is when the caller gives up first.
func TestNavigateHangingExit(t *testing.T) {
	needChromium(t)
	addr, accepted := hangingProxy(t)
	exampletest.CheckLeaks(t)
	execPath, err := findChromium("")
	if err != nil {
		t.Fatal(err)
	}
	w, err := startWorld()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	b, err := startBrowser(context.Background(), execPath, browserStartTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer b.stop()
	p, err := pool.New(pool.WithExits(pool.MustParseExit("http://" + addr).WithLabel("hang")))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	page := w.origins[0].URL + "/story/1"

	n, err := NewNavigator(p, b.ctx, NavigatorConfig{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	res, err := n.Navigate(context.Background(), page, nil)
	want := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
	if err != nil || res.Verdict != want || res.Err == nil || !strings.Contains(res.Err.Error(), "no page within 1s") {
		t.Errorf("Navigate through a hanging exit = %+v, %v; want verdict %+v and a timeout error", res, err, want)
	}
	if pr := p.Snapshot().Pairs; len(pr) != 1 || pr[0].Breaker.FailuresInWindow != 1 {
		t.Errorf("pairs after the timeout = %+v, want the hanging exit's pair with 1 failure", pr)
	}

	// The caller gives up once the browser is waiting on the proxy; the navigation's own timeout is
	// far away.
	n, err = NewNavigator(p, b.ctx, NavigatorConfig{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
drain:
	for { // the first navigation's connections
		select {
		case <-accepted:
		default:
			break drain
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-accepted: // this navigation's browser context is waiting on the proxy
		case <-ctx.Done():
		}
		cancel()
	}()
	res, err = n.Navigate(ctx, page, nil)
	cancel()
	if want := (pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}); err != nil || res.Verdict != want {
		t.Errorf("Navigate cancelled by the caller = %+v, %v; want verdict %+v", res, err, want)
	}
	if pr := p.Snapshot().Pairs; len(pr) != 1 || pr[0].Breaker.FailuresInWindow != 1 {
		t.Errorf("pairs after the cancellation = %+v, want still 1 failure", pr)
	}
}

// TestHelp: -h says what the example shows and how it is run, not a bare "Usage of" and the
// temporary binary's path.
func TestHelp(t *testing.T) {
	exampletest.CheckHelp(t, command(new(config)))
}
