package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// exitSpec is one proxy exit of the example and the trouble it has.
type exitSpec struct {
	name      string
	user      string // the proxy demands user:pass
	pass      string // the password the proxy expects
	wrongPass string // the password the exit dials with instead, if not pass
	dead      bool   // nothing listens where the exit points
	role      string
}

var exitSpecs = []exitSpec{
	{name: "dc-1", role: "healthy"},
	{name: "dc-2", user: "dc2", pass: "pw-dc2-0f4e", role: "healthy, with credentials (given through the Fetch domain)"},
	{name: "dc-3", user: "dc3", pass: "pw-dc3-77a1", role: "healthy, with credentials"},
	{name: "auth-bad", user: "eve", pass: "pw-eve-right", wrongPass: "pw-eve-wrong", role: "wrong password: the proxy answers 407"},
	{name: "dead", dead: true, role: "nothing listens there"},
}

// secrets are the passwords of the world, none of which may ever be printed.
func secrets() []string {
	var s []string
	for _, sp := range exitSpecs {
		for _, p := range []string{sp.pass, sp.wrongPass} {
			if p != "" {
				s = append(s, p)
			}
		}
	}
	return s
}

// apiBudget is how many pages the api origin serves each exit before it answers 429.
const apiBudget = 2

// apiRetryAfter is the Retry-After the api origin sends with its 429s, in seconds.
const apiRetryAfter = 30

// origin is one web site of the world.
type origin struct {
	name string
	role string
	srv  *httptest.Server
	key  string // its origin key, as the pool sees it
}

// world is everything the example runs on 127.0.0.1: the proxies, the exits that point at them and
// three web sites that tell, through a proxytest.Registry, which proxy carried each request.
type world struct {
	reg     *proxytest.Registry
	proxies []*proxytest.Proxy
	exits   []*pool.Exit // labelled, in exitSpecs order
	origins []*origin    // news, api, shop
	byKey   map[string]*origin

	mu         sync.Mutex
	apiServed  map[string]int // pages api served, by proxy
	challenged string         // the proxy shop challenges: the first one it saw
	direct     int            // requests that reached an origin through no proxy
}

// startWorld starts the sites and the proxies. On error it closes whatever it started.
func startWorld() (w *world, err error) {
	w = &world{reg: &proxytest.Registry{}, byKey: map[string]*origin{}, apiServed: map[string]int{}}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	for _, o := range []*origin{
		{name: "news", role: "stories; one of them is gone (404)", srv: httptest.NewServer(http.HandlerFunc(w.news))},
		{name: "api", role: fmt.Sprintf("%d pages per exit, then 429 Retry-After: %d", apiBudget, apiRetryAfter), srv: httptest.NewServer(http.HandlerFunc(w.api))},
		{name: "shop", role: "answers the first exit it sees with a Cloudflare-like challenge (403)", srv: httptest.NewServer(http.HandlerFunc(w.shop))},
	} {
		u, err := url.Parse(o.srv.URL)
		if err != nil {
			o.srv.Close()
			return nil, err
		}
		o.key = transport.OriginHost(u)
		w.origins = append(w.origins, o)
		w.byKey[o.key] = o
	}

	urls := make([]*url.URL, len(exitSpecs))
	for i, sp := range exitSpecs {
		if sp.dead {
			continue
		}
		p, err := proxytest.Start(proxytest.Config{Name: sp.name, Registry: w.reg, User: sp.user, Pass: sp.pass})
		if err != nil {
			return nil, err
		}
		w.proxies = append(w.proxies, p)
		urls[i] = p.URL()
		if sp.wrongPass != "" {
			urls[i] = p.URLWithCredentials(sp.user, sp.wrongPass)
		}
	}
	for i, sp := range exitSpecs {
		if sp.dead { // last, so that no proxy above is handed the same port
			addr, err := proxytest.ClosedAddr()
			if err != nil {
				return nil, err
			}
			urls[i] = &url.URL{Scheme: "http", Host: addr}
		}
		e, err := pool.NewExit(urls[i])
		if err != nil {
			return nil, err
		}
		w.exits = append(w.exits, e.WithLabel(sp.name))
	}
	return w, nil
}

func (w *world) close() {
	for _, p := range w.proxies {
		p.Close()
	}
	for _, o := range w.origins {
		o.srv.Close()
	}
}

// originName names an origin key for people: "news" rather than 127.0.0.1:41155.
func (w *world) originName(key string) string {
	if o, ok := w.byKey[key]; ok {
		return o.name
	}
	return key
}

// via returns the proxy that carried r, counting requests that came straight from a client. It
// reports false for those, and for the browser's own requests (favicons), which the sites answer
// 404 without judging anyone.
func (w *world) via(rw http.ResponseWriter, r *http.Request) (string, bool) {
	name, ok := w.reg.Lookup(r)
	if !ok {
		w.mu.Lock()
		w.direct++
		w.mu.Unlock()
		http.Error(rw, "direct connections are not part of this example", http.StatusForbidden)
		return "", false
	}
	if r.URL.Path == "/favicon.ico" {
		http.NotFound(rw, r)
		return "", false
	}
	return name, true
}

// news serves /story/N; story 3 is gone.
func (w *world) news(rw http.ResponseWriter, r *http.Request) {
	via, ok := w.via(rw, r)
	if !ok {
		return
	}
	if r.URL.Path == "/story/3" {
		http.Error(rw, "this story was removed", http.StatusNotFound)
		return
	}
	page(rw, "news", r.URL.Path, via)
}

// api serves apiBudget pages to each proxy, then answers it 429 with a Retry-After.
func (w *world) api(rw http.ResponseWriter, r *http.Request) {
	via, ok := w.via(rw, r)
	if !ok {
		return
	}
	w.mu.Lock()
	w.apiServed[via]++
	over := w.apiServed[via] > apiBudget
	w.mu.Unlock()
	if over {
		rw.Header().Set("Retry-After", fmt.Sprint(apiRetryAfter))
		http.Error(rw, "rate limit exceeded for your IP", http.StatusTooManyRequests)
		return
	}
	page(rw, "api", r.URL.Path, via)
}

// shop challenges the first proxy it sees, every time, as a bot manager that distrusts one IP range.
func (w *world) shop(rw http.ResponseWriter, r *http.Request) {
	via, ok := w.via(rw, r)
	if !ok {
		return
	}
	w.mu.Lock()
	if w.challenged == "" {
		w.challenged = via
	}
	challenge := via == w.challenged
	w.mu.Unlock()
	if !challenge {
		page(rw, "shop", r.URL.Path, via)
		return
	}
	h := rw.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Server", "cloudflare")
	h.Set("Cf-Mitigated", "challenge")
	h.Set("Cf-Ray", "8f1e2d3c4b5a6978-AMS")
	rw.WriteHeader(http.StatusForbidden)
	io.WriteString(rw, `<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>
<meta http-equiv="refresh" content="390"></head><body><div class="main-wrapper" role="main">
<noscript>Enable JavaScript and cookies to continue</noscript>
<script>(function(){window._cf_chl_opt={cvId:'3',cZone:'shop.example',cType:'managed'};
var a=document.createElement('script');a.src='/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1?ray=8f1e2d3c4b5a6978';
document.getElementsByTagName('head')[0].appendChild(a);}());</script></div></body></html>
`)
}

// page writes a small HTML page that names the proxy that carried it.
func page(rw http.ResponseWriter, site, path, via string) {
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(rw, "<!DOCTYPE html><html><head><title>%s %s</title></head><body><h1>%s</h1>\n<p>%s</p>\n<p>%s</p></body></html>\n",
		site, path, path, carriedBy(via), strings.Repeat("All the news that fits. ", 40))
}

// carriedBy is how a page names the proxy that carried it.
func carriedBy(proxy string) string { return "carried by " + proxy + "." }

// challengedProxy returns the proxy shop challenges, "" before it saw one.
func (w *world) challengedProxy() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.challenged
}

// directRequests returns how many requests reached a site through no proxy.
func (w *world) directRequests() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.direct
}
