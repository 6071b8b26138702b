package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// exitSpec describes one proxy exit of the demo and the trouble it has.
type exitSpec struct {
	name string
	tier int
	// user and pass are the credentials the proxy demands (none when user is empty); the exit
	// dials with them, or with wrongPass when it is set.
	user, pass, wrongPass string
	hang                  bool // the proxy accepts connections and never answers
	dead                  bool // nothing listens where the exit points
	role                  string
}

// The rate cap shop puts on the res-capped exit.
const (
	capProxy      = "res-capped"
	capLimit      = 5
	capWindow     = 10 * time.Second
	capRetryAfter = 3 // seconds, in the 429's Retry-After
)

// exitSpecs are the demo's exits, in the order the table lists them. Tier 0 is preferred; tier 1
// serves an origin only while no tier-0 exit is ready for it.
var exitSpecs = []exitSpec{
	{name: "dc-1", user: "dc1", pass: "dc1-Tr0ub4dor&3", role: "healthy, with credentials"},
	{name: "dc-2", role: "healthy"},
	{name: "dc-3", role: "healthy"},
	{name: "res-capped", user: "res", pass: "res-c0rrect-h0rse",
		role: fmt.Sprintf("healthy, but shop allows it %d requests per %v, then 429 Retry-After: %d", capLimit, capWindow, capRetryAfter)},
	{name: "auth-bad", user: "bob", pass: "bob-right-pw", wrongPass: "bob-wr0ng-pw", role: "wrong password: the proxy answers 407"},
	{name: "dead", dead: true, role: "nothing listens there: connection refused"},
	{name: "hang", hang: true, role: "accepts connections, never answers"},
	{name: "res-1", tier: 1, user: "res1", pass: "res1-b4ttery-st4ple", role: "healthy fallback (tier 1)"},
}

// secrets returns every password the demo's proxies and exits hold: none may ever be printed.
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

// world is everything the demo runs on 127.0.0.1: the proxies, the origins and the exits that
// point at the proxies.
type world struct {
	reg      *proxytest.Registry
	proxies  []*proxytest.Proxy
	exits    []*pool.Exit // labelled, in exitSpecs order
	redacted []string     // each exit's URL as the library prints it when unlabelled
	origins  []*origin
	byKey    map[string]*origin // by origin key, as the transport names origins
	roots    *x509.CertPool     // trusts the HTTPS origin
	proxyAt  map[string]string  // proxy name by listening address
}

// startWorld starts the proxies and origins. On error it closes whatever it started.
func startWorld() (w *world, err error) {
	w = &world{
		reg: &proxytest.Registry{}, byKey: map[string]*origin{}, proxyAt: map[string]string{},
		roots: x509.NewCertPool(),
	}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	urls := make([]*url.URL, len(exitSpecs))
	for i, sp := range exitSpecs {
		if !sp.dead {
			if urls[i], err = w.startProxy(sp); err != nil {
				return nil, err
			}
		}
	}
	capped := &rateCap{proxy: capProxy, limit: capLimit, window: capWindow}
	w.addOrigin("shop", false, capped)
	w.addOrigin("news", true, nil)
	w.addOrigin("api", false, nil)
	for i, sp := range exitSpecs {
		if sp.dead {
			// Last, so that none of the demo's own listeners can be handed this port.
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
		w.redacted = append(w.redacted, e.Label())
		w.exits = append(w.exits, e.WithLabel(sp.name).WithTier(sp.tier))
	}
	return w, nil
}

// startProxy starts sp's proxy and returns the URL its exit dials.
func (w *world) startProxy(sp exitSpec) (*url.URL, error) {
	p, err := proxytest.Start(proxytest.Config{
		Name: sp.name, Registry: w.reg, User: sp.user, Pass: sp.pass, Hang: sp.hang,
	})
	if err != nil {
		return nil, fmt.Errorf("proxy %s: %w", sp.name, err)
	}
	w.proxies = append(w.proxies, p)
	w.proxyAt[p.Addr()] = sp.name
	if sp.wrongPass != "" {
		return p.URLWithCredentials(sp.user, sp.wrongPass), nil
	}
	return p.URL(), nil
}

func (w *world) addOrigin(name string, secure bool, c *rateCap) {
	o := &origin{name: name, reg: w.reg, cap: c, served: map[string]int{}}
	if secure {
		o.srv = httptest.NewUnstartedServer(o)
		o.srv.EnableHTTP2 = true
		o.srv.StartTLS()
		o.proto = "HTTPS, HTTP/2 inside a CONNECT tunnel"
		w.roots.AddCert(o.srv.Certificate())
	} else {
		o.srv = httptest.NewServer(o)
		o.proto = "plain HTTP/1.1, forwarded by the proxy"
	}
	u, _ := url.Parse(o.srv.URL)
	o.key = transport.OriginHost(u)
	w.origins = append(w.origins, o)
	w.byKey[o.key] = o
}

// originName names an origin key ("127.0.0.1:40123") as the demo calls it ("shop").
func (w *world) originName(key string) string {
	if o := w.byKey[key]; o != nil {
		return o.name
	}
	return key
}

// baseTemplate is the transport's default template, trusting the HTTPS origin's certificate.
func (w *world) baseTemplate() *http.Transport {
	t := transport.DefaultBaseTemplate()
	t.TLSClientConfig = &tls.Config{RootCAs: w.roots}
	return t
}

// close stops the origins and proxies; every goroutine they started has ended when it returns.
func (w *world) close() error {
	var errs []error
	for _, o := range w.origins {
		o.srv.Close()
	}
	for _, p := range w.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// origin is a small web site. It learns from the Registry which proxy carried each request and
// counts it.
type origin struct {
	name  string
	proto string
	key   string
	srv   *httptest.Server
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
		o.name, o.name, r.URL.Path, r.Proto)
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
