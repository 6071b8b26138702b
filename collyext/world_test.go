package collyext_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// site is a local origin of linked pages, /page/0 … /page/N-1, reachable from /page/0. It tells
// which proxy carried each request (proxytest.Registry) and misbehaves for some: a 429 with
// Retry-After for "capped", a Cloudflare challenge served with 200 for "waf", a body cut short for
// "cut". Every other request gets the page, with servedVia naming the proxy that carried it.
type site struct {
	t      *testing.T
	n      int
	reg    *proxytest.Registry
	srv    *httptest.Server
	handle func(w http.ResponseWriter, r *http.Request, via string) bool // optional: true if it answered

	mu          sync.Mutex
	served      map[string]int // successful page loads per path
	failures    map[string]int // misbehaviours per proxy name
	noCookie    []string       // page paths requested after /page/0 was served without its cookie
	cookieSet   bool
	sawReqID    bool // a request arrived carrying collyext.RequestHeader
	unknownVias int  // requests no proxy carried
}

const servedVia = "X-Served-Via"

func newSite(t *testing.T, n int, tlsOrigin bool) *site {
	t.Helper()
	s := &site{t: t, n: n, reg: &proxytest.Registry{}, served: map[string]int{}, failures: map[string]int{}}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if tlsOrigin {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	t.Cleanup(s.srv.Close)
	return s
}

func (s *site) url(i int) string { return fmt.Sprintf("%s/page/%d", s.srv.URL, i) }

// origin is the origin key the transport gives the site.
func (s *site) origin() string {
	u, _ := url.Parse(s.srv.URL)
	return transport.OriginHost(u)
}

func (s *site) serve(w http.ResponseWriter, r *http.Request) {
	via, ok := s.reg.Lookup(r)
	s.mu.Lock()
	if r.Header.Get("X-Proxybreaker-Request") != "" {
		s.sawReqID = true
	}
	if !ok {
		s.unknownVias++
	}
	s.mu.Unlock()
	if s.handle != nil && s.handle(w, r, via) {
		return
	}
	switch via {
	case "capped":
		s.fail(via)
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "slow down")
		return
	case "waf":
		s.fail(via)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cf-Mitigated", "challenge")
		io.WriteString(w, `<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>
<a href="/page/0">not a real link</a><script src="/cdn-cgi/challenge-platform/h/b/orchestrate/jsch/v1"></script></body></html>`)
		return
	case "cut":
		s.fail(via)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Length", "100000") // past the classifier's peek: the body dies mid-read
		io.WriteString(w, strings.Repeat("<p>lorem ipsum</p>\n", 200))
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/page/"))
	if err != nil || i < 0 || i >= s.n {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	if i == 0 {
		s.cookieSet = true
	} else if c, err := r.Cookie("session"); s.cookieSet && (err != nil || c.Value != "s1") {
		s.noCookie = append(s.noCookie, r.URL.Path)
	}
	s.served[r.URL.Path]++
	s.mu.Unlock()
	if i == 0 {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/"})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set(servedVia, via)
	w.Header().Set("X-Proxybreaker-Exit", "spoofed-by-origin") // the extension must replace it
	fmt.Fprintf(w, "<!DOCTYPE html><html><head><title>page %d</title></head><body><h1>page %d</h1>\n", i, i)
	for _, j := range []int{2*i + 1, 2*i + 2, i + 1, 0} {
		if j < s.n {
			fmt.Fprintf(w, "<a href=\"/page/%d\">page %d</a>\n", j, j)
		}
	}
	// Padding: a real page is larger than a challenge interstitial.
	fmt.Fprintf(w, "<p>%s</p></body></html>\n", strings.Repeat("content ", 5000))
}

// failed returns how often the site misjudged requests via the named proxy.
func (s *site) failed(via string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failures[via]
}

// pagesServed returns how many page loads the site served in all.
func (s *site) pagesServed() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.served {
		n += c
	}
	return n
}

// sawRequestID reports whether a request reached the site carrying collyext.RequestHeader.
func (s *site) sawRequestID() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sawReqID
}

func (s *site) fail(via string) {
	s.mu.Lock()
	s.failures[via]++
	s.mu.Unlock()
}

// crawlExits are the exits of the crawl tests: three healthy ones and one failing in each way the
// core classifies (the site adds the origin's judgements of capped, waf and cut).
var crawlExits = []testkit.ExitSpec{
	{Name: "ok-1"}, {Name: "ok-2"}, {Name: "ok-3"},
	{Name: "auth", User: "bob", WrongPass: true},
	{Name: "dead", Dead: true},
	{Name: "hang", Hang: true},
	{Name: "capped"},
	{Name: "waf"},
	{Name: "cut"},
}

// event is one transport event, in the order the recorder saw them.
type event struct {
	started *transport.AttemptInfo
	result  *transport.AttemptResult
	change  *pool.StateChange
}

// recorder is an Observer that keeps every event in order. It is safe for concurrent use.
type recorder struct {
	transport.NopObserver
	mu     sync.Mutex
	events []event
}

func (o *recorder) AttemptStarted(ctx context.Context, a transport.AttemptInfo) context.Context {
	o.add(event{started: &a})
	return ctx
}

func (o *recorder) AttemptFinished(_ context.Context, r transport.AttemptResult) {
	o.add(event{result: &r})
}

func (o *recorder) StateChanged(c pool.StateChange) { o.add(event{change: &c}) }

func (o *recorder) add(e event) {
	o.mu.Lock()
	o.events = append(o.events, e)
	o.mu.Unlock()
}

func (o *recorder) all() []event {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]event(nil), o.events...)
}
