package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/proxybreaker/proxybreaker/examples/internal/world"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

// The site's judgements of two exits, by proxy name.
const (
	cappedProxy = "res-capped" // answered 429 with Retry-After
	wafProxy    = "res-waf"    // answered a challenge page, served with 200
)

// exitSpecs are the example's exits and the trouble each has.
var exitSpecs = []world.ExitSpec{
	{Name: "dc-1", Role: "healthy"},
	{Name: "dc-2", Role: "healthy"},
	{Name: "dc-3", User: "dc3", Pass: "right-dc3", Role: "healthy, with credentials"},
	{Name: "auth-bad", User: "bob", Pass: "right-bob", WrongPass: "wrong-bob", Role: "wrong password: the proxy answers 407"},
	{Name: "dead", Dead: true, Role: "nothing listens there: connection refused"},
	{Name: "hang", Hang: true, Role: "accepts connections, never answers"},
	{Name: cappedProxy, Role: "the site answers it 429 Retry-After: 30"},
	{Name: wafProxy, Role: "the site answers it a Cloudflare challenge page, with status 200"},
}

// startWorld starts the site, then the proxies. On error it closes whatever it started.
func startWorld(pages int) (*world.World, *world.Site, error) {
	w := world.New()
	site := w.AddSite("site", siteHandler(w.Registry, pages))
	if _, err := w.StartExits(exitSpecs...); err != nil {
		w.Close()
		return nil, nil, err
	}
	return w, site, nil
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
