package main

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/proxybreaker/proxybreaker/examples/internal/world"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

// The rate cap shop puts on the res-capped exit.
const (
	capProxy      = "res-capped"
	capLimit      = 5
	capWindow     = 10 * time.Second
	capRetryAfter = 3 // seconds, in the 429's Retry-After
)

// exitSpecs are the demo's exits, in the order the table lists them. Tier 0 is preferred; tier 1
// serves an origin only while no tier-0 exit is ready for it.
var exitSpecs = []world.ExitSpec{
	{Name: "dc-1", User: "dc1", Pass: "dc1-Tr0ub4dor&3", Role: "healthy, with credentials"},
	{Name: "dc-2", Role: "healthy"},
	{Name: "dc-3", Role: "healthy"},
	{Name: "res-capped", User: "res", Pass: "res-c0rrect-h0rse",
		Role: fmt.Sprintf("healthy, but shop allows it %d requests per %v, then 429 Retry-After: %d", capLimit, capWindow, capRetryAfter)},
	{Name: "auth-bad", User: "bob", Pass: "bob-right-pw", WrongPass: "bob-wr0ng-pw", Role: "wrong password: the proxy answers 407"},
	{Name: "dead", Dead: true, Role: "nothing listens there: connection refused"},
	{Name: "hang", Hang: true, Role: "accepts connections, never answers"},
	{Name: "res-1", Tier: 1, User: "res1", Pass: "res1-b4ttery-st4ple", Role: "healthy fallback (tier 1)"},
}

// secrets returns every password the demo's proxies and exits hold: none may ever be printed.
func secrets() []string { return world.Secrets(exitSpecs) }

// scene is everything the demo runs on 127.0.0.1 — the proxies, the exits that point at them and
// the origins — and what the origins saw.
type scene struct {
	*world.World
	origins []*origin // in table order
}

// startWorld starts the origins, then the proxies. On error it closes whatever it started.
func startWorld() (*scene, error) {
	w := &scene{World: world.New()}
	capped := &rateCap{proxy: capProxy, limit: capLimit, window: capWindow}
	w.addOrigin("shop", false, capped)
	w.addOrigin("news", true, nil)
	w.addOrigin("api", false, nil)
	if _, err := w.StartExits(exitSpecs...); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func (w *scene) addOrigin(name string, secure bool, c *rateCap) {
	o := &origin{reg: w.Registry, cap: c, served: map[string]int{}}
	if secure {
		o.Site = w.AddTLSSite(name, o)
		o.proto = "HTTPS, HTTP/2 inside a CONNECT tunnel"
	} else {
		o.Site = w.AddSite(name, o)
		o.proto = "plain HTTP/1.1, forwarded by the proxy"
	}
	w.origins = append(w.origins, o)
}

// origin is a small web site. It learns from the Registry which proxy carried each request and
// counts it.
type origin struct {
	*world.Site
	proto string
	reg   *proxytest.Registry
	cap   *rateCap // nil: no rate cap

	mu     sync.Mutex
	served map[string]int // by proxy name; "" for a connection no proxy made
}

func (o *origin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	via, _ := o.reg.Lookup(r)
	if o.cap != nil && via == o.cap.proxy && !o.cap.allow(time.Now()) {
		w.Header().Set("Retry-After", fmt.Sprint(capRetryAfter))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "too many requests from your address: come back later\n")
		return
	}
	o.mu.Lock()
	o.served[via]++
	o.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, "<!doctype html><title>%s</title><h1>%s%s</h1><p>Served over %s.</p>\n",
		o.Name, o.Name, r.URL.Path, r.Proto)
}

// servedBy returns how many pages the origin served through each proxy.
func (o *origin) servedBy() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := make(map[string]int, len(o.served))
	for k, v := range o.served {
		m[k] = v
	}
	return m
}

// rateCap allows one proxy limit requests per rolling window; only requests it allowed count.
type rateCap struct {
	proxy  string
	limit  int
	window time.Duration

	mu     sync.Mutex
	served []time.Time
}

func (c *rateCap) allow(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	keep := c.served[:0]
	for _, t := range c.served {
		if now.Sub(t) < c.window {
			keep = append(keep, t)
		}
	}
	c.served = keep
	if len(c.served) >= c.limit {
		return false
	}
	c.served = append(c.served, now)
	return true
}
