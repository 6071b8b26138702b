package statuspage_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
	"github.com/proxybreaker/proxybreaker/transport"
)

// The status page of a real pool: one exit, parked after its proxy rejected the credentials.
func ExampleNew() {
	// A base that answers every request as a proxy rejecting its credentials would.
	base := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusProxyAuthRequired, Body: http.NoBody, Request: req}, nil
	})
	p, err := pool.New(pool.WithExits(pool.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("dc-1")))
	if err != nil {
		panic(err)
	}
	tr, err := transport.New(p, transport.WithBase(base))
	if err != nil {
		panic(err)
	}
	defer tr.Close()
	if resp, err := tr.RoundTrip(httptest.NewRequest(http.MethodGet, "https://shop.example/", nil)); err == nil {
		resp.Body.Close()
	}

	h, err := statuspage.New(p)
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/?format=json")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)

	t := h.Table()
	e := t.Exits[0]
	fmt.Println(resp.Header.Get("Content-Type"))
	fmt.Printf("%s: %s, parked %v, last failure %s, %d trip\n", e.Exit, e.State, e.Parked, e.LastFailure, e.Trips)
	// Output:
	// application/json
	// dc-1: open, parked true, last failure proxy_auth, 1 trip
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
