package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// exitSpec is one proxy exit of the example and the trouble it has.
type exitSpec struct {
	name      string
	user      string // the proxy demands user:right
	wrongPass bool   // the exit dials with a wrong password
	dead      bool   // nothing listens where the exit points
	hang      bool   // the proxy accepts connections and never answers
	role      string
}

// The site's judgements of two exits, by proxy name.
const (
	cappedProxy = "res-capped" // answered 429 with Retry-After
	wafProxy    = "res-waf"    // answered a challenge page, served with 200
)

var exitSpecs = []exitSpec{
	{name: "dc-1", role: "healthy"},
	{name: "dc-2", role: "healthy"},
	{name: "dc-3", user: "dc3", role: "healthy, with credentials"},
	{name: "auth-bad", user: "bob", wrongPass: true, role: "wrong password: the proxy answers 407"},
	{name: "dead", dead: true, role: "nothing listens there: connection refused"},
	{name: "hang", hang: true, role: "accepts connections, never answers"},
	{name: cappedProxy, role: "the site answers it 429 Retry-After: 30"},
	{name: wafProxy, role: "the site answers it a Cloudflare challenge page, with status 200"},
}

// world is everything the example runs on 127.0.0.1.
type world struct {
	reg     *proxytest.Registry
	proxies []*proxytest.Proxy
	site    *httptest.Server
	exits   []*pool.Exit
}

// startWorld starts the site and the proxies. On error it closes whatever it started.
func startWorld(pages int) (w *world, err error) {
	w = &world{reg: &proxytest.Registry{}}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	w.site = httptest.NewServer(siteHandler(w.reg, pages))
	urls := make([]*url.URL, len(exitSpecs))
	for i, sp := range exitSpecs {
		if sp.dead {
			continue
		}
		cfg := proxytest.Config{Name: sp.name, Registry: w.reg, Hang: sp.hang}
		if sp.user != "" {
			cfg.User, cfg.Pass = sp.user, "right-"+sp.user
		}
		p, err := proxytest.Start(cfg)
		if err != nil {
			return nil, err
		}
		w.proxies = append(w.proxies, p)
		urls[i] = p.URL()
		if sp.wrongPass {
			urls[i] = p.URLWithCredentials(sp.user, "wrong-"+sp.user)
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
	if w.site != nil {
		w.site.Close()
	}
}

// siteHandler serves /page/0 … /page/N-1, each linking to a few others, and misjudges two proxies.
func siteHandler(reg *proxytest.Registry, pages int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		via, _ := reg.Lookup(r)
		switch via {
		case cappedProxy:
			w.Header().Set("Retry-After", "30")
			http.Error(w, "too many requests from your IP", http.StatusTooManyRequests)
			return
		case wafProxy:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Header().Set("Cf-Mitigated", "challenge")
			io.WriteString(w, `<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>
<script src="/cdn-cgi/challenge-platform/h/b/orchestrate/jsch/v1"></script></body></html>`)
			return
		}
		i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/page/"))
		if err != nil || i < 0 || i >= pages {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!DOCTYPE html><html><head><title>page %d</title></head><body><h1>page %d</h1>\n", i, i)
		for _, j := range []int{2*i + 1, 2*i + 2, i + 1, 0} {
			if j < pages {
				fmt.Fprintf(w, "<a href=\"/page/%d\">page %d</a>\n", j, j)
			}
		}
		fmt.Fprintf(w, "<p>%s</p></body></html>\n", strings.Repeat("Lorem ipsum dolor sit amet. ", 2000))
	})
}
