package collyext_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"
	"go.uber.org/goleak"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/collyext"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

const (
	crawlPages       = 100
	crawlParallelism = 4
)

// A real Colly collector crawls a local site of linked pages through real local proxies, most of
// them failing in one of the ways the core classifies: a 407, a refused connection, a proxy that
// hangs (caught by a short header timeout), a 429 with Retry-After the origin sends for one
// proxy, a challenge page it serves with 200 for another, a body it cuts short for a third.
// Every page is loaded exactly once, through a healthy exit, whose label the response carries;
// no request goes through an exit after it was parked; the cookie jar keeps working.
func TestCrawl(t *testing.T) {
	for _, tc := range []struct {
		name      string
		async     bool
		tlsOrigin bool
	}{
		{"sync/http", false, false},
		{"async/http", true, false},
		{"async/https", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ignore := goleak.IgnoreCurrent()
			t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // runs last: after the proxies and servers close
			crawl(t, tc.async, tc.tlsOrigin)
		})
	}
}

func crawl(t *testing.T, async, tlsOrigin bool) {
	s := newSite(t, crawlPages, tlsOrigin)
	w := testkit.StartWorld(t, s.reg, crawlExits...)
	rec := &recorder{}
	tr := w.Transport(t, s.srv, nil, transport.WithHeaderTimeout(500*time.Millisecond), transport.WithObserver(rec))

	c := colly.NewCollector(colly.Async(async))
	if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: crawlParallelism}); err != nil {
		t.Fatal(err)
	}
	ext, err := collyext.Attach(c, tr, collyext.Settings{Retries: 10, MinDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatalf("Attach = %v", err)
	}
	var (
		mu       sync.Mutex
		loaded   = map[string]int{}
		lost     []string
		mismatch []string
	)
	// Colly's own "visited?" check is check-then-act (IsVisited, then Visited): two async pages
	// linking to the same URL can both pass it. Async visits are serialised here so that "exactly
	// once" tests this package, not that race. (A sync Visit fetches, and visits the page's links,
	// before it returns: no race, and a lock would deadlock on the recursion.)
	var visitMu sync.Mutex
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		if async {
			visitMu.Lock()
			defer visitMu.Unlock()
		}
		e.Request.Visit(e.Attr("href"))
	})
	c.OnResponse(func(r *colly.Response) {
		mu.Lock()
		defer mu.Unlock()
		loaded[r.Request.URL.Path]++
		exit, via := collyext.Exit(r), r.Headers.Get(servedVia)
		if exit == "" || exit != via || r.Request.ProxyURL != exit || !slices.Contains([]string{"ok-1", "ok-2", "ok-3"}, exit) {
			mismatch = append(mismatch, fmt.Sprintf("%s: Exit %q, ProxyURL %q, origin saw %q", r.Request.URL.Path, exit, r.Request.ProxyURL, via))
		}
	})
	c.OnError(ext.RetryOnError(func(r *colly.Response, err error) {
		mu.Lock()
		lost = append(lost, fmt.Sprintf("%s (status %d via %q): %v", r.Request.URL, r.StatusCode, collyext.Exit(r), err))
		mu.Unlock()
	}))

	start := time.Now()
	if err := c.Visit(s.url(0)); err != nil && async {
		t.Fatalf("Visit = %v", err)
	} else if err != nil {
		// A sync collector's Visit returns the first fetch's error even when its re-queue, run
		// inside OnError, loaded the page.
		t.Logf("Visit = %v", err)
	}
	c.Wait()
	t.Logf("crawled %d pages in %v", len(loaded), time.Since(start))

	s.mu.Lock()
	defer s.mu.Unlock()
	if len(lost) > 0 {
		t.Errorf("%d requests given up:\n%v", len(lost), lost)
	}
	for i := range crawlPages {
		path := fmt.Sprintf("/page/%d", i)
		if loaded[path] != 1 || s.served[path] != 1 {
			t.Errorf("%s: collector loaded it %d times, origin served it %d times; want once each", path, loaded[path], s.served[path])
		}
	}
	if len(mismatch) > 0 {
		t.Errorf("responses that do not name the exit that served them:\n%v", mismatch)
	}
	if len(s.noCookie) > 0 {
		t.Errorf("pages requested without the session cookie the jar holds: %v", s.noCookie)
	}
	if s.sawReqID {
		t.Errorf("the origin saw %s: the extension must remove it", collyext.RequestHeader)
	}
	if s.unknownVias > 0 {
		t.Errorf("the origin answered %d requests no proxy carried", s.unknownVias)
	}
	if n := ext.Tracked(); n != 0 {
		t.Errorf("Tracked() = %d after the crawl, want 0", n)
	}

	// Every failing exit was tried, and classified as the core says.
	events := rec.all()
	classes := map[string]map[pool.Class]int{}
	for _, e := range events {
		if e.result != nil {
			l := e.result.Exit.Label()
			if classes[l] == nil {
				classes[l] = map[pool.Class]int{}
			}
			classes[l][e.result.Verdict.Class]++
		}
	}
	t.Logf("verdicts by exit: %v", classes)
	for exit, class := range map[string]pool.Class{
		"auth": pool.ClassProxyAuth, "dead": pool.ClassProxyRefused, "hang": pool.ClassTimeout,
		"capped": pool.ClassRateLimited, "waf": pool.ClassBlocked, "cut": pool.ClassBodyRead,
	} {
		if classes[exit][class] == 0 {
			t.Errorf("exit %s: verdicts %v, want at least one %s", exit, classes[exit], class)
		}
	}

	// No request goes through a parked exit after it was parked.
	checkParked(t, events, async, tr.Pool().Snapshot(), w.Proxies)
}

// checkParked checks, from the transport's events, that no attempt went through an exit after
// its breaker was parked. Attempts are reported once their exit is picked: in an async crawl an
// attempt picked just before the park can be reported just after it, so there the check is that
// every attempt through a parked exit was in flight with the one that parked it — at most the
// collector's parallelism, a 407 or a refusal parks at once — and that no attempt was picked while
// its exit's breaker (or its pair's) was OPEN. In a sync crawl the order is exact.
func checkParked(t *testing.T, events []event, async bool, snap pool.Snapshot, proxies map[string]*proxytest.Proxy) {
	t.Helper()
	parkedAt := map[string]int{} // exit label → index of the event that parked it
	for i, e := range events {
		if c := e.change; c != nil && c.Scope == pool.ScopeExit && c.To == breaker.Open && c.Parked {
			if _, ok := parkedAt[c.Exit.Label()]; !ok {
				parkedAt[c.Exit.Label()] = i
			}
		}
	}
	for _, l := range []string{"auth", "dead"} {
		if _, ok := parkedAt[l]; !ok {
			t.Errorf("exit %s was never parked", l)
		}
	}
	for _, es := range snap.Exits {
		_, parked := parkedAt[es.Exit]
		if parked != (es.Breaker.Parked && es.Breaker.State == breaker.Open) {
			t.Errorf("Snapshot: exit %s is %s (parked %v); events say parked %v", es.Exit, es.Breaker.State, es.Breaker.Parked, parked)
		}
	}
	through, after := map[string]int{}, map[string]int{}
	for i, e := range events {
		a := e.started
		if a == nil {
			continue
		}
		l := a.Exit.Label()
		if a.ExitState == breaker.Open || a.PairState == breaker.Open {
			t.Errorf("event %d: attempt picked through %s while its exit was %s and its pair %s", i, l, a.ExitState, a.PairState)
		}
		if p, ok := parkedAt[l]; ok {
			through[l]++
			if i > p {
				after[l]++
			}
		}
	}
	for l := range parkedAt {
		if !async && after[l] > 0 {
			t.Errorf("exit %s: %d attempts after it was parked", l, after[l])
		}
		if through[l] < 1 || through[l] > crawlParallelism {
			t.Errorf("exit %s: %d attempts in all, want 1 to %d (those in flight when it was parked)", l, through[l], crawlParallelism)
		}
	}
	if p := proxies["auth"]; p != nil {
		if got := p.Rejected(); got != int64(through["auth"]) {
			t.Errorf("proxy auth refused %d requests, the transport sent it %d", got, through["auth"])
		}
	}
}
