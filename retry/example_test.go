package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

// fakeExits stands in for the per-exit proxy transports: each exit answers with the status
// answer gives it (200 "hello" otherwise).
type fakeExits map[string]int

func (f fakeExits) RoundTrip(req *http.Request) (*http.Response, error) {
	exit, ok := transport.ExitFromContext(req.Context())
	if !ok {
		return nil, errors.New("no exit: refusing to go direct")
	}
	status, body := http.StatusOK, "hello"
	if s, ok := f[exit.Label()]; ok {
		status, body = s, http.StatusText(s)
	}
	h := http.Header{}
	if status == http.StatusTooManyRequests {
		h.Set("Retry-After", "60")
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: h,
		Body: io.NopCloser(strings.NewReader(body)), Request: req}, nil
}

// A go-retryablehttp client over the transport: the exit that answers 429 is left for another.
func Example() {
	pl, err := pool.New(pool.WithExits(
		pool.MustParseExit("http://10.0.0.1:3128").WithLabel("dc-1"),
		pool.MustParseExit("http://10.0.0.2:3128").WithLabel("dc-2"),
	))
	if err != nil {
		fmt.Println(err)
		return
	}
	tr, err := transport.New(pl, transport.WithBase(fakeExits{"dc-1": http.StatusTooManyRequests}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	p, err := retry.New(retry.Settings{Clock: pl.Clock()})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := retryablehttp.NewClient()
	client.Logger = nil
	client.HTTPClient = &http.Client{Transport: tr, Timeout: 30 * time.Second}
	client.CheckRetry, client.Backoff, client.PrepareRetry = p.CheckRetry, p.Backoff, p.PrepareRetry
	client.RetryWaitMin = time.Millisecond

	// One *pool.Retries per logical request: its retries avoid the exits that failed it.
	req, err := retryablehttp.NewRequestWithContext(transport.ContextWithRetries(context.Background()), "GET", "http://shop.example/", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "via", transport.ExitFromResponse(resp))
	// Output: 200 hello via dc-2
}

// When every exit is refused by its proxy (407), each is tried once and parked; the retries stop
// at once with a *GiveUpError, and errors.As finds the transport's error through the wrapping.
func ExampleGiveUpError() {
	pl, err := pool.New(
		pool.WithExits(
			pool.MustParseExit("http://10.0.0.1:3128").WithLabel("dc-1"),
			pool.MustParseExit("http://10.0.0.2:3128").WithLabel("dc-2"),
		),
		pool.WithExitSettings(breaker.Settings{ParkFor: time.Hour, Jitter: -1}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	tr, err := transport.New(pl, transport.WithBase(fakeExits{"dc-1": http.StatusProxyAuthRequired, "dc-2": http.StatusProxyAuthRequired}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer tr.Close()
	p, err := retry.New(retry.Settings{})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := retryablehttp.NewClient()
	client.Logger = nil
	client.HTTPClient = &http.Client{Transport: tr}
	client.CheckRetry, client.Backoff, client.PrepareRetry = p.CheckRetry, p.Backoff, p.PrepareRetry
	client.RetryWaitMin, client.RetryMax = time.Millisecond, 10

	req, _ := retryablehttp.NewRequestWithContext(transport.ContextWithRetries(context.Background()), "GET", "http://shop.example/", nil)
	_, err = client.Do(req)
	var giveUp *retry.GiveUpError
	var noExit *pool.NoHealthyExitError
	if errors.As(err, &giveUp) && errors.As(err, &noExit) {
		fmt.Println(len(giveUp.Failures), "failed attempts, all", giveUp.Failures[0].Verdict.Class)
		fmt.Println("no exit for", noExit.Origin, "until", noExit.RetryIn.Round(time.Minute))
	}
	// Output:
	// 2 failed attempts, all proxy_auth
	// no exit for shop.example until 1h0m0s
}
