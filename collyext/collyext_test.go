package collyext_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gocolly/colly/v2"
	"github.com/gocolly/colly/v2/proxy"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/collyext"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

// failures collects what RetryOnError gives up on.
type failures struct {
	mu   sync.Mutex
	errs []error
	resp []*colly.Response
}

func (f *failures) giveUp(r *colly.Response, err error) {
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.resp = append(f.resp, r)
	f.mu.Unlock()
}

func (f *failures) get() ([]error, []*colly.Response) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]error(nil), f.errs...), append([]*colly.Response(nil), f.resp...)
}

// setup starts s's exits, a transport over a pool of them (configured by popts and opts) and a
// sync collector attached to it, with RetryOnError reporting to the returned failures.
func setup(t *testing.T, s *site, specs []testkit.ExitSpec, set collyext.Settings, popts []pool.Option, opts ...transport.Option) (*colly.Collector, *collyext.Extension, *failures) {
	t.Helper()
	tr := testkit.StartWorld(t, s.reg, specs...).Transport(t, s.srv, popts, opts...)
	c := colly.NewCollector()
	ext, err := collyext.Attach(c, tr, set)
	if err != nil {
		t.Fatalf("Attach = %v", err)
	}
	f := &failures{}
	c.OnError(ext.RetryOnError(f.giveUp))
	return c, ext, f
}

func TestAttachValidates(t *testing.T) {
	p, err := pool.New(pool.WithExits(pool.MustParseExit("http://10.0.0.1:3128")))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	tests := []struct {
		c    *colly.Collector
		tr   *transport.Transport
		s    collyext.Settings
		want string
	}{
		{nil, tr, collyext.Settings{}, "nil collector"},
		{colly.NewCollector(), nil, collyext.Settings{}, "nil transport"},
		{colly.NewCollector(), tr, collyext.Settings{MinDelay: -1}, "MinDelay"},
		{colly.NewCollector(), tr, collyext.Settings{MaxDelay: -1}, "MaxDelay"},
		{colly.NewCollector(), tr, collyext.Settings{MinDelay: time.Second, MaxDelay: time.Millisecond}, "shorter than MinDelay"},
		{colly.NewCollector(), tr, collyext.Settings{MaxTracked: -1}, "MaxTracked"},
	}
	for i, tt := range tests {
		if _, err := collyext.Attach(tt.c, tt.tr, tt.s); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%d: Attach(%+v) = %v, want an error saying %q", i, tt.s, err, tt.want)
		}
	}
	ext, err := collyext.Attach(colly.NewCollector(), tr, collyext.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	s := ext.Settings()
	if s.Retries != collyext.DefaultRetries || s.MinDelay != collyext.DefaultMinDelay || s.MaxDelay != collyext.DefaultMaxDelay ||
		s.MaxTracked != collyext.DefaultMaxTracked || s.Clock != p.Clock() || s.Rand == nil || ext.Transport() != tr {
		t.Errorf("Settings() = %+v, want the defaults (the pool's clock)", s)
	}
}

// SetProxyFunc after Attach would route around the pool: every request fails instead, and the
// proxy it names sees nothing.
func TestSetProxyFuncAfterAttachFails(t *testing.T) {
	for _, name := range []string{"SetProxyFunc", "SetProxy"} {
		t.Run(name, func(t *testing.T) {
			s := newSite(t, 3, false)
			c, _, f := setup(t, s, []testkit.ExitSpec{{Name: "ok-1"}, {Name: "other"}}, collyext.Settings{}, nil)
			bypass := testkit.StartWorld(t, s.reg, testkit.ExitSpec{Name: "bypass"}).Proxies["bypass"]
			if name == "SetProxy" {
				if err := c.SetProxy(bypass.URL().String()); err != nil {
					t.Fatal(err)
				}
			} else {
				rr, err := proxy.RoundRobinProxySwitcher(bypass.URL().String())
				if err != nil {
					t.Fatal(err)
				}
				c.SetProxyFunc(rr)
			}
			err := c.Visit(s.url(0))
			if !errors.Is(err, collyext.ErrProxyFuncSet) {
				t.Errorf("Visit = %v, want ErrProxyFuncSet", err)
			}
			errs, _ := f.get()
			if len(errs) != 1 || !errors.Is(errs[0], collyext.ErrProxyFuncSet) {
				t.Errorf("given up with %v, want ErrProxyFuncSet once", errs)
			}
			if n := bypass.Requests() + bypass.Connects(); n != 0 {
				t.Errorf("the SetProxyFunc proxy carried %d requests, want none", n)
			}
			if n := s.pagesServed(); n != 0 {
				t.Errorf("origin served %d pages, want none", n)
			}
		})
	}
}

// The collector's own request timeout keeps working, and is the caller's: not re-queued, not
// counted against the exit.
func TestAttachKeepsRequestTimeout(t *testing.T) {
	s := newSite(t, 3, false)
	release := make(chan struct{})
	defer close(release)
	var slow atomic.Int32
	s.handle = func(w http.ResponseWriter, r *http.Request, via string) bool {
		if r.URL.Path != "/slow" {
			return false
		}
		slow.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return true
	}
	tr := testkit.StartWorld(t, s.reg, testkit.ExitSpec{Name: "ok-1"}).Transport(t, s.srv, nil, transport.WithHeaderTimeout(5*time.Second))
	c := colly.NewCollector()
	c.SetRequestTimeout(250 * time.Millisecond)
	ext, err := collyext.Attach(c, tr, collyext.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	f := &failures{}
	c.OnError(ext.RetryOnError(f.giveUp))
	// Had the request timeout not ended it, the 5 s header timeout would have, counted against the
	// exit: the breakers' clean slate below tells the two apart.
	c.Visit(s.srv.URL + "/slow")
	errs, resp := f.get()
	var te interface{ Timeout() bool }
	if len(errs) != 1 || !errors.As(errs[0], &te) || !te.Timeout() {
		t.Fatalf("given up with %v, want one timeout", errs)
	}
	if got := collyext.Exit(resp[0]); got != "ok-1" {
		t.Errorf("Exit(timed-out response) = %q, want ok-1 (from the error)", got)
	}
	if n := slow.Load(); n != 1 {
		t.Errorf("origin saw /slow %d times, want once: the caller's timeout is not re-queued", n)
	}
	snap := tr.Pool().Snapshot()
	for _, e := range snap.Exits {
		if e.Breaker.FailuresInWindow != 0 || e.Breaker.State != breaker.Closed {
			t.Errorf("exit %s: %+v, want no failure counted", e.Exit, e.Breaker)
		}
	}
	for _, p := range snap.Pairs {
		if p.Breaker.FailuresInWindow != 0 {
			t.Errorf("pair %s %s: %+v, want no failure counted", p.Exit, p.Origin, p.Breaker)
		}
	}
	if n := ext.Tracked(); n != 0 {
		t.Errorf("Tracked() = %d, want 0", n)
	}
}

// Outcomes a retry cannot fix go to the give-up callback at once, with colly's error.
func TestRetryOnErrorLeavesOriginAnswers(t *testing.T) {
	s := newSite(t, 3, false)
	var hits sync.Map
	s.handle = func(w http.ResponseWriter, r *http.Request, via string) bool {
		n, _ := hits.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		switch r.URL.Path {
		case "/bug":
			w.WriteHeader(http.StatusInternalServerError)
			return true
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
			return true
		}
		return false
	}
	c, ext, f := setup(t, s, []testkit.ExitSpec{{Name: "ok-1"}, {Name: "ok-2"}}, collyext.Settings{}, nil)
	for _, path := range []string{"/bug", "/missing"} {
		c.Visit(s.srv.URL + path)
		if n, _ := hits.Load(path); n.(*atomic.Int32).Load() != 1 {
			t.Errorf("origin saw %s %d times, want once", path, n.(*atomic.Int32).Load())
		}
	}
	errs, resp := f.get()
	if len(errs) != 2 || resp[0].StatusCode != 500 || resp[1].StatusCode != 404 {
		t.Fatalf("given up with %v, want the 500 and the 404", errs)
	}
	for i, err := range errs {
		var gu *collyext.GiveUpError
		if errors.As(err, &gu) {
			t.Errorf("give-up %d = %v, want colly's own error, not a GiveUpError", i, err)
		}
		if collyext.Exit(resp[i]) == "" {
			t.Errorf("give-up %d: Exit = \"\", want the exit that carried it", i)
		}
	}
	if n := ext.Tracked(); n != 0 {
		t.Errorf("Tracked() = %d, want 0", n)
	}
}

// A request that fails through every exit is re-queued Retries times, then given up with a
// GiveUpError listing its failures.
func TestRetryOnErrorStopsAtRetries(t *testing.T) {
	s := newSite(t, 3, false)
	var hits atomic.Int32
	s.handle = func(w http.ResponseWriter, r *http.Request, via string) bool {
		hits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable) // soft: six of them trip a pair
		return true
	}
	c, ext, f := setup(t, s, []testkit.ExitSpec{{Name: "a"}, {Name: "b"}}, collyext.Settings{Retries: 2, MinDelay: time.Millisecond}, nil)
	c.Visit(s.url(0))
	errs, resp := f.get()
	var gu *collyext.GiveUpError
	if len(errs) != 1 || !errors.As(errs[0], &gu) {
		t.Fatalf("given up with %v, want one GiveUpError", errs)
	}
	if gu.Requeued != 2 || len(gu.Failures) != 3 || gu.Wait != 0 || !strings.Contains(gu.Error(), "as many as Settings.Retries allows") ||
		errors.Is(gu, retry.ErrBudgetSpent) {
		t.Errorf("GiveUpError = %v (%+v), want 2 re-queues, 3 failures, Settings.Retries reached", gu, gu)
	}
	var re *retry.ResponseError
	if !errors.As(errs[0], &re) || re.StatusCode != 503 || re.Verdict.Class != pool.ClassOrigin5xx {
		t.Errorf("errors.As(GiveUpError, *retry.ResponseError) = %+v, want the 503", re)
	}
	if n := hits.Load(); n != 3 {
		t.Errorf("origin saw %d requests, want 3", n)
	}
	if resp[0].StatusCode != 503 {
		t.Errorf("given-up response status = %d, want 503", resp[0].StatusCode)
	}
	if n := ext.Tracked(); n != 0 {
		t.Errorf("Tracked() = %d, want 0", n)
	}
}

// After a 429 with Retry-After through the only exit, the re-queue waits for the soonest probe —
// the Retry-After — measured on a fake clock, and the page then loads.
func TestRetryOnErrorWaitsForSoonestProbe(t *testing.T) {
	const step = 50 * time.Millisecond
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clock.NewFake(t0)
	s := newSite(t, 1, false)
	var (
		answered atomic.Bool
		mu       sync.Mutex
		at       []time.Time
	)
	s.handle = func(w http.ResponseWriter, r *http.Request, via string) bool {
		mu.Lock()
		at = append(at, clk.Now())
		mu.Unlock()
		if !answered.Swap(true) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusTooManyRequests)
			return true
		}
		return false
	}
	// The extension waits on the pool's clock by default. The transport's header timeout and body
	// pace rule would run on it too, a timer pending for every attempt in flight and every body being
	// read, which DriveClock would fire: they are off, and no exit here hangs or trickles.
	c, ext, f := setup(t, s, []testkit.ExitSpec{{Name: "a"}}, collyext.Settings{MinDelay: 10 * time.Millisecond},
		[]pool.Option{pool.WithClock(clk), pool.WithPairSettings(breaker.Settings{BaseCooldown: time.Second, Jitter: -1})},
		transport.WithHeaderTimeout(-1), transport.WithBodyPace(transport.NoBodyPace))
	var loaded []string
	c.OnResponse(func(r *colly.Response) { loaded = append(loaded, collyext.Exit(r)) })
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Visit(s.url(0))
	}()
	testkit.DriveClock(t, clk, step, done)
	if errs, _ := f.get(); len(errs) != 0 {
		t.Fatalf("given up with %v", errs)
	}
	if len(loaded) != 1 || loaded[0] != "a" {
		t.Fatalf("loaded %v, want the page once via a", loaded)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) != 2 {
		t.Fatalf("origin saw %d requests, want the 429 and the retry", len(at))
	}
	// First re-queue after the backoff (5–10ms): no exit ready, 7s to the soonest probe. Second
	// re-queue waits those 7s (plus at most a step of the fake clock).
	if got, want := at[1].Sub(at[0]), 7*time.Second; got < want || got > want+2*step {
		t.Errorf("the retry reached the origin %v after the 429, want %v", got, want)
	}
	if n := ext.Tracked(); n != 0 {
		t.Errorf("Tracked() = %d, want 0", n)
	}
}

// When nothing will be ready within MaxDelay, the request is given up at once, saying how long.
func TestRetryOnErrorGivesUpBeyondMaxDelay(t *testing.T) {
	s := newSite(t, 1, false)
	s.handle = func(w http.ResponseWriter, r *http.Request, via string) bool {
		w.Header().Set("Retry-After", "120")
		w.WriteHeader(http.StatusTooManyRequests)
		return true
	}
	c, _, f := setup(t, s, []testkit.ExitSpec{{Name: "a"}}, collyext.Settings{MinDelay: time.Millisecond, MaxDelay: time.Minute},
		[]pool.Option{pool.WithPairSettings(breaker.Settings{Jitter: -1})})
	// At once: after one re-queue (which found no exit), not after waiting out the 2 min.
	c.Visit(s.url(0))
	errs, _ := f.get()
	var gu *collyext.GiveUpError
	var nh *pool.NoHealthyExitError
	if len(errs) != 1 || !errors.As(errs[0], &gu) || !errors.As(errs[0], &nh) {
		t.Fatalf("given up with %v, want a GiveUpError wrapping a NoHealthyExitError", errs)
	}
	if gu.Wait < 119*time.Second || gu.Requeued != 1 || !strings.Contains(gu.Error(), "longer than MaxDelay 1m0s") {
		t.Errorf("GiveUpError = %v, want a wait of 2m after one re-queue", gu)
	}
}

// With ParseHTTPErrorResponse, a failed response (429) would reach OnResponse as content: it is
// aborted after its headers and re-queued instead.
func TestParseHTTPErrorResponseAbortsFailures(t *testing.T) {
	s := newSite(t, 1, false)
	tr := testkit.StartWorld(t, s.reg, testkit.ExitSpec{Name: "capped"}, testkit.ExitSpec{Name: "ok-1"}).Transport(t, s.srv, nil)
	c := colly.NewCollector(colly.ParseHTTPErrorResponse())
	ext, err := collyext.Attach(c, tr, collyext.Settings{MinDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f := &failures{}
	c.OnError(ext.RetryOnError(f.giveUp))
	var statuses []int
	c.OnResponse(func(r *colly.Response) { statuses = append(statuses, r.StatusCode) })
	for i := 0; s.failed("capped") == 0; i++ { // picks are random: until one meets capped
		if i == 64 {
			t.Fatal("64 visits never went through capped")
		}
		statuses = nil
		c.AllowURLRevisit = true
		c.Visit(s.url(0))
		if len(statuses) != 1 || statuses[0] != 200 {
			t.Fatalf("OnResponse saw %v, want one 200", statuses)
		}
	}
	if errs, _ := f.get(); len(errs) != 0 {
		t.Errorf("given up with %v", errs)
	}
}

// A clone shares the transport; Hook gives it the extension's callbacks.
func TestHookClone(t *testing.T) {
	s := newSite(t, 10, false)
	c, ext, f := setup(t, s, []testkit.ExitSpec{{Name: "ok-1"}, {Name: "waf"}}, collyext.Settings{MinDelay: time.Millisecond}, nil)
	clone := c.Clone()
	ext.Hook(clone)
	clone.OnError(ext.RetryOnError(f.giveUp))
	var loaded atomic.Int32
	clone.OnResponse(func(r *colly.Response) {
		if collyext.Exit(r) != "ok-1" {
			t.Errorf("%s via %q, want ok-1", r.Request.URL, collyext.Exit(r))
		}
		loaded.Add(1)
	})
	clone.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	clone.Visit(s.url(0))
	clone.Wait()
	if errs, _ := f.get(); len(errs) != 0 || loaded.Load() != 10 {
		t.Errorf("clone loaded %d pages, gave up %v; want 10, none", loaded.Load(), errs)
	}
	if s.sawRequestID() {
		t.Errorf("the origin saw %s", collyext.RequestHeader)
	}
}

// byRetries groups the transport's attempts by the *pool.Retries their context carried: one group
// per logical request, if the extension keeps one Retries per request.
type byRetries struct {
	transport.NopObserver
	mu     sync.Mutex
	order  []*pool.Retries
	exits  map[*pool.Retries][]string
	failed map[*pool.Retries][]string
}

func (o *byRetries) AttemptFinished(ctx context.Context, r transport.AttemptResult) {
	rs := transport.RetriesFromContext(ctx)
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.exits[rs]; !ok {
		o.order = append(o.order, rs)
	}
	o.exits[rs] = append(o.exits[rs], r.Exit.Label())
	if d := retry.DecideVerdict(r.Verdict); d.Retry {
		o.failed[rs] = append(o.failed[rs], r.Exit.Label())
	}
}

// Each logical request keeps one *pool.Retries across its re-queues: the pool reads it to send
// each re-queue through an exit that has not failed the request, and the extension records the
// request's failed attempts in it.
func TestRetriesPerLogicalRequest(t *testing.T) {
	s := newSite(t, 12, false)
	w := testkit.StartWorld(t, s.reg, testkit.ExitSpec{Name: "ok-1"}, testkit.ExitSpec{Name: "ok-2"}, testkit.ExitSpec{Name: "capped"},
		testkit.ExitSpec{Name: "waf"}, testkit.ExitSpec{Name: "auth", User: "bob", WrongPass: true})
	obs := &byRetries{exits: map[*pool.Retries][]string{}, failed: map[*pool.Retries][]string{}}
	tr := w.Transport(t, s.srv, nil, transport.WithObserver(obs))
	c := colly.NewCollector()
	ext, err := collyext.Attach(c, tr, collyext.Settings{MinDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f := &failures{}
	c.OnError(ext.RetryOnError(f.giveUp))
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	c.Visit(s.url(0))
	if errs, _ := f.get(); len(errs) != 0 {
		t.Fatalf("given up with %v", errs)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.order) != 12 {
		t.Errorf("attempts carried %d distinct Retries, want 12: one per page", len(obs.order))
	}
	requeued := 0
	for i, rs := range obs.order {
		tried := obs.exits[rs]
		if rs == nil {
			t.Fatalf("request %d: attempts through %v carried no Retries", i, tried)
		}
		if len(tried) > 1 {
			requeued++
		}
		if last := tried[len(tried)-1]; !strings.HasPrefix(last, "ok-") {
			t.Errorf("request %d went through %v, want it to end at a healthy exit", i, tried)
		}
		if len(slices.Compact(slices.Sorted(slices.Values(tried)))) != len(tried) {
			t.Errorf("request %d went through %v: an exit twice", i, tried)
		}
		var recorded []string
		for _, fa := range rs.Failures() {
			recorded = append(recorded, fa.Exit)
		}
		if fmt.Sprint(recorded) != fmt.Sprint(obs.failed[rs]) {
			t.Errorf("request %d: Retries.Failures() via %v, want the failed attempts %v", i, recorded, obs.failed[rs])
		}
	}
	if requeued == 0 {
		t.Errorf("no request was re-queued: the failing exits were never picked")
	}
}

// GiveUpError lists the failed attempts in pool.FormatGiveUp's words, the same as
// retry.GiveUpError, and errors.As and errors.Is see through it, and through colly's wrapping.
func TestGiveUpErrorMessage(t *testing.T) {
	auth := pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	nh := &url.Error{Op: "Get", URL: "http://shop.example/", Err: &pool.NoHealthyExitError{Origin: "shop.example", Exits: 2, RetryIn: 15 * time.Minute}}
	fs := []pool.FailedAttempt{
		{Exit: "a", Verdict: auth, Err: &retry.ResponseError{Exit: "a", StatusCode: 407, Verdict: auth}},
		{Exit: "b", Verdict: auth, Err: &transport.AttemptError{Exit: "b", Verdict: auth, Err: &transport.ProxyConnectError{Exit: "b", StatusCode: 407}}},
	}
	gu := &collyext.GiveUpError{Method: "GET", URL: "http://shop.example/", Requeued: 2, Wait: 15 * time.Minute, MaxDelay: time.Minute,
		Failures: fs, Err: nh}
	described := strings.TrimPrefix(pool.FormatGiveUp("", fs, nil), "; ")
	want := "collyext: giving up on GET http://shop.example/, re-queued 2 times: nothing ready for 15m0s, longer than MaxDelay 1m0s; " +
		described + ": " + nh.Error()
	if got := gu.Error(); got != want {
		t.Errorf("GiveUpError.Error() =\n%q, want\n%q", got, want)
	}
	if !strings.Contains(want, "failed attempts: proxy_auth via a, proxy_auth via b (every exit tried failed for good") {
		t.Errorf("GiveUpError.Error() = %q, want the failures listed", want)
	}
	// The retry package's give-up lists them in the same words.
	rgu := &retry.GiveUpError{Origin: "shop.example", Wait: 15 * time.Minute, MaxWait: time.Minute, Failures: fs, Err: nh}
	if !strings.Contains(rgu.Error(), "; "+described+": ") {
		t.Errorf("retry.GiveUpError.Error() = %q, want it to list %q too", rgu.Error(), described)
	}
	spent := &collyext.GiveUpError{Method: "GET", URL: "http://shop.example/", Requeued: 4}
	if got, want := spent.Error(), "collyext: giving up on GET http://shop.example/, re-queued 4 times: as many as Settings.Retries allows"; got != want {
		t.Errorf("GiveUpError.Error() = %q, want %q", got, want)
	}
	var (
		gotGU  *collyext.GiveUpError
		gotNH  *pool.NoHealthyExitError
		gotRE  *retry.ResponseError
		gotAE  *transport.AttemptError
		gotPCE *transport.ProxyConnectError
	)
	err := fmt.Errorf("lost http://shop.example/: %w", gu)
	if !errors.As(err, &gotGU) || !errors.As(err, &gotNH) || !errors.As(err, &gotRE) || !errors.As(err, &gotAE) ||
		!errors.As(err, &gotPCE) || !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Errorf("errors.As through GiveUpError: GiveUpError %v, NoHealthyExitError %v, ResponseError %v, AttemptError %v, ProxyConnectError %v",
			gotGU, gotNH, gotRE, gotAE, gotPCE)
	}
	if gotRE.Exit != "a" || gotPCE.Exit != "b" {
		t.Errorf("errors.As found ResponseError via %s, ProxyConnectError via %s; want a, b", gotRE.Exit, gotPCE.Exit)
	}
}
