package transport_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// exampleBase stands in for the per-exit proxy transports: it answers every request itself,
// naming the exit the request was routed through.
type exampleBase func(exit *pool.Exit, req *http.Request) (status int, header http.Header, body string)

func (f exampleBase) RoundTrip(req *http.Request) (*http.Response, error) {
	exit, ok := transport.ExitFromContext(req.Context())
	if !ok {
		return nil, errors.New("no exit: refusing to go direct")
	}
	status, header, body := f(exit, req)
	if header == nil {
		header = http.Header{}
	}
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header: header, Body: io.NopCloser(strings.NewReader(body)), Request: req,
	}, nil
}

// A 429 with Retry-After opens the (exit, origin) pair for that long; with no other exit ready,
// the next request fails closed and says when to come back.
func ExampleNew() {
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := pool.New(
		pool.WithExits(pool.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("dc-1")),
		pool.WithClock(clk),
		pool.WithPairSettings(breaker.Settings{Jitter: -1}), // exact windows, for the output
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	tr, err := transport.New(p, transport.WithBase(exampleBase(func(*pool.Exit, *http.Request) (int, http.Header, string) {
		return http.StatusTooManyRequests, http.Header{"Retry-After": {"60"}}, "slow down"
	})))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	resp, err := client.Get("https://shop.example/")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "via", transport.ExitFromResponse(resp))
	snap := p.Snapshot()
	for _, ps := range snap.Pairs {
		fmt.Println(ps.Exit, ps.Origin, ps.Breaker.State, "for", ps.Breaker.NextProbe.Sub(snap.At))
	}

	clk.Advance(15 * time.Second)
	_, err = client.Get("https://shop.example/cart")
	var nh *pool.NoHealthyExitError
	if errors.As(err, &nh) {
		fmt.Println(errors.Is(err, pool.ErrNoHealthyExit), nh.Origin, "retry in", nh.RetryIn)
	}
	fmt.Println(err)
	// Output:
	// 429 via dc-1
	// dc-1 shop.example open for 1m0s
	// true shop.example retry in 45s
	// Get "https://shop.example/cart": pool: no healthy exit for shop.example: 1 exits, none ready, soonest probe in 45s
}

// The exit that carried a response comes back on it, also through an http.Client with a Timeout.
func ExampleExitFromResponse() {
	p, err := pool.New(pool.WithExits(pool.MustParseExit("http://10.0.0.7:8080").WithLabel("res-7")))
	if err != nil {
		fmt.Println(err)
		return
	}
	tr, err := transport.New(p, transport.WithBase(exampleBase(func(exit *pool.Exit, _ *http.Request) (int, http.Header, string) {
		return http.StatusOK, nil, "hello"
	})))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := client.Get("http://example.com/")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("%s via %s\n", body, transport.ExitFromResponse(resp))
	// Output: hello via res-7
}

// Per-attempt middleware runs once per exit: here it signs each request with the exit's own
// token, so the origin sees which exit (and which account) it came through.
func ExampleWithExitMiddleware() {
	p, err := pool.New(pool.WithExits(pool.MustParseExit("http://10.0.0.9:3128").WithLabel("acct-9")))
	if err != nil {
		fmt.Println(err)
		return
	}
	sign := func(e *pool.Exit, next http.RoundTripper) http.RoundTripper {
		token := "token-for-" + e.Label() // built once per exit
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			req = req.Clone(req.Context()) // never modify the request you are given
			req.Header.Set("X-Account", token)
			return next.RoundTrip(req)
		})
	}
	tr, err := transport.New(p,
		transport.WithExitMiddleware(sign),
		transport.WithBase(exampleBase(func(_ *pool.Exit, req *http.Request) (int, http.Header, string) {
			return http.StatusOK, nil, "seen " + req.Header.Get("X-Account")
		})),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	resp, err := (&http.Client{Transport: tr}).Get("http://example.com/")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(string(body))
	// Output: seen token-for-acct-9
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
