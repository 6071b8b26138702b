package main

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/proxybreaker/proxybreaker/examples/internal/world"
)

// exitSpecs are the example's exits and the trouble each has.
var exitSpecs = []world.ExitSpec{
	{Name: "dc-1", Role: "healthy"},
	{Name: "dc-2", User: "dc2", Pass: "pw-dc2-0f4e", Role: "healthy, with credentials (given through the Fetch domain)"},
	{Name: "dc-3", User: "dc3", Pass: "pw-dc3-77a1", Role: "healthy, with credentials"},
	{Name: "auth-bad", User: "eve", Pass: "pw-eve-right", WrongPass: "pw-eve-wrong", Role: "wrong password: the proxy answers 407"},
	{Name: "dead", Dead: true, Role: "nothing listens there"},
}

// secrets are the passwords of the world, none of which may ever be printed.
func secrets() []string { return world.Secrets(exitSpecs) }

// apiBudget is how many pages the api origin serves each exit before it answers 429.
const apiBudget = 2

// apiRetryAfter is the Retry-After the api origin sends with its 429s, in seconds.
const apiRetryAfter = 30

// origin is one web site of the scene.
type origin struct {
	*world.Site
	role string
}

// scene is everything the example runs on 127.0.0.1 — the proxies, the exits that point at them
// and three web sites that tell, through the world's Registry, which proxy carried each request —
// and what the sites saw.
type scene struct {
	*world.World
	origins []*origin // news, api, shop

	mu         sync.Mutex
	apiServed  map[string]int // pages api served, by proxy
	challenged string         // the proxy shop challenges: the first one it saw
	direct     int            // requests that reached an origin through no proxy
}

// startWorld starts the sites, then the proxies. On error it closes whatever it started.
func startWorld() (*scene, error) {
	w := &scene{World: world.New(), apiServed: map[string]int{}}
	for _, o := range []struct {
		name, role string
		h          http.HandlerFunc
	}{
		{"news", "stories; one of them is gone (404)", w.news},
		{"api", fmt.Sprintf("%d pages per exit, then 429 Retry-After: %d", apiBudget, apiRetryAfter), w.api},
		{"shop", "answers the first exit it sees with a Cloudflare-like challenge (403)", w.shop},
	} {
		w.origins = append(w.origins, &origin{Site: w.AddSite(o.name, o.h), role: o.role})
	}
	if _, err := w.StartExits(exitSpecs...); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// via returns the proxy that carried r, counting requests that came straight from a client. It
// reports false for those, and for the browser's own requests (favicons), which the sites answer
// 404 without judging anyone.
func (w *scene) via(rw http.ResponseWriter, r *http.Request) (string, bool) {
	name, ok := w.Registry.Lookup(r)
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
func (w *scene) news(rw http.ResponseWriter, r *http.Request) {
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
func (w *scene) api(rw http.ResponseWriter, r *http.Request) {
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
func (w *scene) shop(rw http.ResponseWriter, r *http.Request) {
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
func (w *scene) challengedProxy() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.challenged
}

// directRequests returns how many requests reached a site through no proxy.
func (w *scene) directRequests() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.direct
}
