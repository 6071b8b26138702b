package collyext_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/proxybreaker/proxybreaker/collyext"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// exampleSite stands in for the exits' proxies and the site behind them: dc-1's IP is
// rate-limited (429), dc-2 gets the pages.
type exampleSite struct{}

func (exampleSite) RoundTrip(req *http.Request) (*http.Response, error) {
	exit, ok := transport.ExitFromContext(req.Context())
	if !ok {
		return nil, errors.New("no exit: refusing to go direct")
	}
	rec := httptest.NewRecorder()
	switch {
	case exit.Label() == "dc-1":
		rec.Header().Set("Retry-After", "60")
		rec.WriteHeader(http.StatusTooManyRequests)
	case req.URL.Path == "/":
		rec.Header().Set("Content-Type", "text/html")
		io.WriteString(rec, `<a href="/a">a</a> <a href="/b">b</a>`)
	default:
		rec.Header().Set("Content-Type", "text/html")
		io.WriteString(rec, "leaf")
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}

// A collector crawls through two exits; pages that meet the rate-limited one are re-queued
// through the other, and each response names the exit that carried it.
func ExampleAttach() {
	p, err := pool.New(pool.WithExits(
		pool.MustParseExit("http://10.0.0.1:3128").WithLabel("dc-1"),
		pool.MustParseExit("http://10.0.0.2:3128").WithLabel("dc-2"),
	))
	if err != nil {
		fmt.Println(err)
		return
	}
	tr, err := transport.New(p, transport.WithBase(exampleSite{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()

	c := colly.NewCollector()
	ext, err := collyext.Attach(c, tr, collyext.Settings{MinDelay: time.Millisecond})
	if err != nil {
		fmt.Println(err)
		return
	}
	c.OnHTML("a[href]", func(e *colly.HTMLElement) { e.Request.Visit(e.Attr("href")) })
	c.OnResponse(func(r *colly.Response) {
		fmt.Println(r.Request.URL.Path, r.StatusCode, "via", collyext.Exit(r))
	})
	c.OnError(ext.RetryOnError(func(r *colly.Response, err error) {
		fmt.Println("lost", r.Request.URL.Path, err)
	}))
	c.Visit("http://shop.example/")
	fmt.Println(strings.Repeat("-", 3), ext.Tracked(), "requests pending")
	// Output:
	// / 200 via dc-2
	// /a 200 via dc-2
	// /b 200 via dc-2
	// --- 0 requests pending
}
