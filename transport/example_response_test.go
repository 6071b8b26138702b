package transport_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// A 407 from the proxy and a 429 from the site arrive as responses with a nil error, as net/http
// requires; ErrorFromResponse makes an error of those the transport counted against the exit, so
// that they take the error path, while the page and the site's own 404 stay responses.
func ExampleErrorFromResponse() {
	// A forward proxy on loopback that answers plain-HTTP requests itself: a proxy sees the full
	// URL. It rejects the credentials for news.example and relays a 429 for shop.example/search.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Host == "news.example":
			w.Header().Set("Proxy-Authenticate", `Basic realm="proxy"`)
			w.WriteHeader(http.StatusProxyAuthRequired)
		case r.URL.Path == "/search":
			w.Header().Set("Retry-After", "30")
			w.WriteHeader(http.StatusTooManyRequests)
		case r.URL.Path == "/missing":
			http.NotFound(w, r)
		default:
			fmt.Fprint(w, "the page")
		}
	}))
	defer proxy.Close()
	u, _ := url.Parse(proxy.URL)
	u.User = url.UserPassword("user", "secret")
	exit, err := pool.NewExit(u)
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := pool.New(pool.WithExits(exit.WithLabel("res-1")))
	if err != nil {
		fmt.Println(err)
		return
	}
	tr, err := transport.New(p)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	for _, target := range []string{
		"http://shop.example/items", "http://shop.example/missing", "http://shop.example/search", "http://news.example/",
	} {
		resp, err := client.Get(target)
		if err != nil {
			fmt.Println(err)
			continue
		}
		err = transport.ErrorFromResponse(resp)
		resp.Body.Close()
		var ae *transport.AttemptError
		switch {
		case errors.As(err, &ae):
			fmt.Printf("%d, the exit's failure (%v, %v): %v\n", resp.StatusCode, ae.Verdict.Outcome, ae.Verdict.Scope, err)
		default:
			fmt.Printf("%d, the exit did its job\n", resp.StatusCode)
		}
	}
	// Output:
	// 200, the exit did its job
	// 404, the exit did its job
	// 429, the exit's failure (transient, pair): transport: via res-1 to shop.example: rate_limited: 429 Too Many Requests, retry after 30s
	// 407, the exit's failure (permanent, exit): transport: via res-1 to news.example: proxy_auth: 407 Proxy Authentication Required
}
