package main

import (
	"fmt"
	"io"
	"net/http"

	"github.com/proxybreaker/proxybreaker/examples/internal/world"
)

// exitSpecs are the example's exits: two healthy proxies, one that rejects the exit's password
// (407: parked) and one where nothing listens (connection refused: parked).
var exitSpecs = []world.ExitSpec{
	{Name: "dc-1", User: "dc1", Pass: "dc1-0tel-s3cret"},
	{Name: "dc-2"},
	{Name: "auth-bad", User: "bob", Pass: "bob-right-pw", WrongPass: "bob-wr0ng-pw"},
	{Name: "dead", Dead: true},
}

// secrets returns every password the example's proxies and exits hold: none may be exported.
func secrets() []string { return world.Secrets(exitSpecs) }

// The example's origins and how they answer, whichever exit carries the request.
const (
	originShop  = "shop"  // 200
	originBusy  = "busy"  // 429 with Retry-After: every pair opens, then requests are refused
	originFlaky = "flaky" // 503 through every exit: the origin guard trips
)

// busyRetryAfter is the Retry-After busy sends, in seconds.
const busyRetryAfter = 30

// startWorld starts the origins, then the proxies. On error it closes whatever it started.
func startWorld() (*world.World, error) {
	w := world.New()
	for _, name := range []string{originShop, originBusy, originFlaky} {
		w.AddSite(name, originHandler(name))
	}
	if _, err := w.StartExits(exitSpecs...); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func originHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		switch name {
		case originBusy:
			w.Header().Set("Retry-After", fmt.Sprint(busyRetryAfter))
			w.WriteHeader(http.StatusTooManyRequests)
		case originFlaky:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		io.WriteString(w, name+"\n")
	})
}

// pageURL returns the URL of a page on the named origin.
func pageURL(w *world.World, name string) string { return w.Site(name).URL + "/page" }

// originLabel is the metric label of an origin key: the origin's name ("shop") rather than its
// 127.0.0.1:PORT, and "other" for anything else.
func originLabel(w *world.World) func(key string) string {
	return func(key string) string {
		if w.IsSite(key) {
			return w.SiteName(key)
		}
		return "other"
	}
}
