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
	"github.com/proxybreaker/proxybreaker/transport"
)

// exampleBase stands in for the per-exit proxy transports: it answers every request itself,
// naming the exit the request was routed through.
type exampleBase func(exit *transport.Exit, req *http.Request) (status int, header http.Header, body string)

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
	tr, err := transport.New(
		transport.WithExits(transport.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("dc-1")),
		transport.WithBase(exampleBase(func(*transport.Exit, *http.Request) (int, http.Header, string) {
			return http.StatusTooManyRequests, http.Header{"Retry-After": {"60"}}, "slow down"
		})),
		transport.WithClock(clk),
		transport.WithBreakerSettings(breaker.Settings{Jitter: -1}), // exact windows, for the output
	)
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
	snap := tr.Pool().Snapshot()
	for _, p := range snap.Pairs {
		fmt.Println(p.Exit, p.Origin, p.Breaker.State, "for", p.Breaker.NextProbe.Sub(snap.At))
	}

	clk.Advance(15 * time.Second)
	_, err = client.Get("https://shop.example/cart")
	var nh *transport.NoHealthyExitError
	if errors.As(err, &nh) {
		fmt.Println(errors.Is(err, transport.ErrNoHealthyExit), nh.Origin, "retry in", nh.RetryIn)
	}
	fmt.Println(err)
	// Output:
	// 429 via dc-1
	// dc-1 shop.example open for 1m0s
	// true shop.example retry in 45s
	// Get "https://shop.example/cart": transport: no healthy exit for shop.example: 1 exits, none ready, soonest probe in 45s
}

// The exit that carried a response comes back on it, also through an http.Client with a Timeout.
func ExampleExitFromResponse() {
	tr, err := transport.New(
		transport.WithExits(transport.MustParseExit("http://10.0.0.7:8080").WithLabel("res-7")),
		transport.WithBase(exampleBase(func(exit *transport.Exit, _ *http.Request) (int, http.Header, string) {
			return http.StatusOK, nil, "hello"
		})),
	)
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

// A 407 from the proxy parks the exit for every origin; the other exit keeps serving. Labels are
// redacted URLs unless chosen, so snapshots never show a password.
func ExamplePool_Snapshot() {
	clk := clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	tr, err := transport.New(
		transport.WithExits(
			transport.MustParseExit("http://alice:hunter2@10.0.0.1:3128"),
			transport.MustParseExit("http://bob:swordfish@10.0.0.2:3128"),
		),
		transport.WithBase(exampleBase(func(exit *transport.Exit, _ *http.Request) (int, http.Header, string) {
			if strings.Contains(exit.Label(), "alice") {
				return http.StatusProxyAuthRequired, nil, ""
			}
			return http.StatusOK, nil, "ok"
		})),
		transport.WithClock(clk),
		transport.WithExitBreakerSettings(breaker.Settings{ParkFor: time.Hour, Jitter: -1}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}
	for range 64 { // picks are random: alice's exit is tried within a few requests
		if resp, err := client.Get("http://shop.example/"); err == nil {
			resp.Body.Close()
		}
	}
	snap := tr.Pool().Snapshot()
	for _, e := range snap.Exits {
		fmt.Printf("%s %s parked=%v\n", e.Exit, e.Breaker.State, e.Breaker.Parked)
	}
	// Output:
	// http://alice:xxxxx@10.0.0.1:3128 open parked=true
	// http://bob:xxxxx@10.0.0.2:3128 closed parked=false
}
