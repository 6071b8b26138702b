package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// The example's exits: two healthy proxies, one that rejects the exit's password (407: parked) and
// one where nothing listens (connection refused: parked).
var exitSpecs = []struct {
	name, user, pass, wrongPass string
	dead                        bool
}{
	{name: "dc-1", user: "dc1", pass: "dc1-0tel-s3cret"},
	{name: "dc-2"},
	{name: "auth-bad", user: "bob", pass: "bob-right-pw", wrongPass: "bob-wr0ng-pw"},
	{name: "dead", dead: true},
}

// secrets returns every password the example's proxies and exits hold: none may be exported.
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

// The example's origins and how they answer, whichever exit carries the request.
const (
	originShop  = "shop"  // 200
	originBusy  = "busy"  // 429 with Retry-After: every pair opens, then requests are refused
	originFlaky = "flaky" // 503 through every exit: the origin guard trips
)

// busyRetryAfter is the Retry-After busy sends, in seconds.
const busyRetryAfter = 30

// world is the proxies, the origins and the exits that point at the proxies, all on 127.0.0.1.
type world struct {
	proxies []*proxytest.Proxy
	exits   []*pool.Exit
	origins map[string]*httptest.Server // by name
	names   map[string]string           // origin name by origin key
}

// startWorld starts the proxies and origins. On error it closes whatever it started.
func startWorld() (w *world, err error) {
	w = &world{origins: map[string]*httptest.Server{}, names: map[string]string{}}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	reg := &proxytest.Registry{}
	for _, name := range []string{originShop, originBusy, originFlaky} {
		srv := httptest.NewServer(originHandler(name))
		w.origins[name] = srv
		u, _ := url.Parse(srv.URL)
		w.names[transport.OriginHost(u)] = name
	}
	for _, sp := range exitSpecs {
		var u *url.URL
		if sp.dead {
			addr, err := proxytest.ClosedAddr()
			if err != nil {
				return nil, err
			}
			u = &url.URL{Scheme: "http", Host: addr}
		} else {
			p, err := proxytest.Start(proxytest.Config{Name: sp.name, Registry: reg, User: sp.user, Pass: sp.pass})
			if err != nil {
				return nil, fmt.Errorf("proxy %s: %w", sp.name, err)
			}
			w.proxies = append(w.proxies, p)
			u = p.URL()
			if sp.wrongPass != "" {
				u = p.URLWithCredentials(sp.user, sp.wrongPass)
			}
		}
		e, err := pool.NewExit(u)
		if err != nil {
			return nil, err
		}
		w.exits = append(w.exits, e.WithLabel(sp.name))
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

// url returns the URL of a page on the named origin.
func (w *world) url(name string) string { return w.origins[name].URL + "/page" }

// originName is the metric label of an origin key: the origin's name ("shop") rather than its
// 127.0.0.1:PORT, and "other" for anything else.
func (w *world) originName(key string) string {
	if n, ok := w.names[key]; ok {
		return n
	}
	return "other"
}

// close stops the origins and the proxies.
func (w *world) close() error {
	var errs []error
	for _, o := range w.origins {
		o.Close()
	}
	for _, p := range w.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
