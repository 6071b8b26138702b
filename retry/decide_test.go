package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

func TestDecideVerdict(t *testing.T) {
	tests := []struct {
		v         pool.Verdict
		retry     bool
		wait      time.Duration
		retryWait time.Duration // Verdict.RetryAfter as passed on
	}{
		{pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}, false, 0, 0},
		{pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx}, false, 0, 0},
		{pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassOriginError}, false, 0, 0},
		{pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}, false, 0, 0},
		{pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginDNS}, false, 0, 0},
		{pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}, true, 0, 0},
		{pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: 7 * time.Second}, true, 0, 7 * time.Second},
		{pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: "cloudflare"}, true, 0, 0},
		{pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx, Soft: true}, true, 0, 0},
		{pool.Verdict{Outcome: pool.Transient, Scope: pool.ScopeOrigin, Class: "down", RetryAfter: 3 * time.Second}, true, 3 * time.Second, 3 * time.Second},
		{pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}, true, 0, 0},
		{pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyRefused}, true, 0, 0},
		{pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopePair, Class: "banned"}, true, 0, 0},
		{pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeOrigin, Class: "gone"}, false, 0, 0},
	}
	for i, tt := range tests {
		d := retry.DecideVerdict(tt.v)
		if d.Retry != tt.retry || d.Wait != tt.wait || d.Verdict.RetryAfter != tt.retryWait || d.Verdict != tt.v {
			t.Errorf("%d: DecideVerdict(%+v) = %+v, want Retry %v, Wait %v", i, tt.v, d, tt.retry, tt.wait)
		}
	}
}

// wrapped is err as an http.Client returns it.
func wrapped(err error) error { return &url.Error{Op: "Get", URL: "http://shop.example/", Err: err} }

func TestDecideError(t *testing.T) {
	ctxErr := &pool.ThrottledError{Origin: "shop.example", Scope: pool.ScopeOrigin, RetryIn: time.Second, Err: context.Canceled}
	tests := []struct {
		name   string
		err    error
		retry  bool
		wait   time.Duration
		class  pool.Class
		exit   string
		origin string
	}{
		{"timeout", wrapped(&transport.AttemptError{Exit: "dc-1", Origin: "shop.example",
			Verdict: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout}, Err: errors.New("timeout")}),
			true, 0, pool.ClassTimeout, "dc-1", "shop.example"},
		{"connect 407", wrapped(&transport.AttemptError{Exit: "dc-2", Origin: "shop.example",
			Verdict: pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth},
			Err:     &transport.ProxyConnectError{Exit: "dc-2", StatusCode: 407}}),
			true, 0, pool.ClassProxyAuth, "dc-2", "shop.example"},
		{"caller cancelled", wrapped(&transport.AttemptError{Exit: "dc-1", Origin: "shop.example",
			Verdict: pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}, Err: context.Canceled}),
			false, 0, pool.ClassCanceled, "dc-1", "shop.example"},
		{"no healthy exit", wrapped(&pool.NoHealthyExitError{Origin: "shop.example", Exits: 3, RetryIn: 45 * time.Second}),
			true, 45 * time.Second, pool.ClassNotAttempted, "", "shop.example"},
		{"empty pool", wrapped(&pool.NoHealthyExitError{Origin: "shop.example"}),
			false, 0, pool.ClassNotAttempted, "", "shop.example"},
		{"origin unhealthy", wrapped(&pool.OriginUnhealthyError{Origin: "shop.example", FailingExits: 3, RetryIn: 10 * time.Second}),
			true, 10 * time.Second, pool.ClassNotAttempted, "", "shop.example"},
		{"throttled", wrapped(&pool.ThrottledError{Origin: "shop.example", Scope: pool.ScopePair, RetryIn: 250 * time.Millisecond}),
			true, 250 * time.Millisecond, pool.ClassNotAttempted, "", "shop.example"},
		{"throttled, a probe sooner than the token", wrapped(&pool.ThrottledError{Origin: "shop.example", Scope: pool.ScopePair,
			RetryIn: 8 * time.Second, RoomIn: 2 * time.Second}),
			true, 2 * time.Second, pool.ClassNotAttempted, "", "shop.example"},
		{"no healthy exit, room known", wrapped(&pool.NoHealthyExitError{Origin: "shop.example", Exits: 3, RetryIn: 45 * time.Second, RoomIn: 30 * time.Second}),
			true, 30 * time.Second, pool.ClassNotAttempted, "", "shop.example"},
		{"throttled, caller gave up", wrapped(ctxErr), false, time.Second, pool.ClassNotAttempted, "", "shop.example"},
		{"closed transport", wrapped(transport.ErrClosed), false, 0, pool.ClassError, "", ""},
		{"redirect policy", wrapped(errors.New("stopped after 10 redirects")), false, 0, pool.ClassError, "", ""},
		{"context canceled", context.Canceled, false, 0, pool.ClassError, "", ""},
	}
	for _, tt := range tests {
		d := retry.Decide(nil, tt.err)
		if d.Retry != tt.retry || d.Wait != tt.wait || d.Verdict.Class != tt.class || d.Exit != tt.exit || d.Origin != tt.origin {
			t.Errorf("%s: Decide(nil, %v) = %+v, want Retry %v, Wait %v, Class %s, Exit %q, Origin %q",
				tt.name, tt.err, d, tt.retry, tt.wait, tt.class, tt.exit, tt.origin)
		}
	}
}

// A response that did not come through a Transport is judged by its status alone.
func TestDecideForeignResponse(t *testing.T) {
	req, _ := http.NewRequest("GET", "http://Shop.example:80/a", nil)
	tests := []struct {
		status int
		header http.Header
		retry  bool
		ra     time.Duration
	}{
		{200, nil, false, 0},
		{404, nil, false, 0},
		{500, nil, false, 0},
		{429, http.Header{"Retry-After": {"7"}}, true, 7 * time.Second},
		{503, http.Header{"Retry-After": {"bogus"}}, true, 0},
		{502, nil, true, 0},
		{504, nil, true, 0},
	}
	for i, tt := range tests {
		resp := &http.Response{StatusCode: tt.status, Header: tt.header, Body: io.NopCloser(strings.NewReader("")), Request: req}
		if resp.Header == nil {
			resp.Header = http.Header{}
		}
		d := retry.Decide(resp, nil)
		if d.Retry != tt.retry || d.Verdict.RetryAfter != tt.ra || d.Wait != 0 || d.Origin != "shop.example" {
			t.Errorf("%d: Decide(%d %v) = %+v, want Retry %v, RetryAfter %v, Wait 0, Origin shop.example", i, tt.status, tt.header, d, tt.retry, tt.ra)
		}
	}
	if d := retry.Decide(nil, nil); d.Retry {
		t.Errorf("Decide(nil, nil) = %+v, want no retry", d)
	}
}

func TestExponential(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		min, max time.Duration
		attempt  int
		u        float64
		want     time.Duration
	}{
		{100 * ms, 10 * time.Second, 0, 0, 50 * ms},
		{100 * ms, 10 * time.Second, 0, 0.5, 75 * ms},
		{100 * ms, 10 * time.Second, 0, 1, 100 * ms},
		{100 * ms, 10 * time.Second, 1, 0, 100 * ms},
		{100 * ms, 10 * time.Second, 3, 0, 400 * ms},
		{100 * ms, 10 * time.Second, 3, 1, 800 * ms},
		{100 * ms, 10 * time.Second, 7, 0, 5 * time.Second}, // 12.8 s capped at 10 s
		{100 * ms, 10 * time.Second, 1 << 30, 0, 5 * time.Second},
		{100 * ms, 10 * time.Second, -3, 0, 50 * ms},
		{100 * ms, time.Duration(math.MaxInt64), 80, 1, time.Duration(math.MaxInt64)},
		{3 * time.Second, time.Second, 0, 0, 500 * ms}, // min above max: max
		{0, time.Second, 4, 0.5, 0},
		{ms, 0, 4, 0.5, 0},
		{100 * ms, time.Second, 0, -1, 50 * ms},
		{100 * ms, time.Second, 0, math.NaN(), 50 * ms},
	}
	for i, tt := range tests {
		got := retry.Exponential(tt.min, tt.max, tt.attempt, tt.u)
		if got != tt.want {
			t.Errorf("%d: Exponential(%v, %v, %d, %v) = %v, want %v", i, tt.min, tt.max, tt.attempt, tt.u, got, tt.want)
		}
		if tt.max > 0 && got > tt.max {
			t.Errorf("%d: Exponential(%v, %v, %d, %v) = %v, more than max", i, tt.min, tt.max, tt.attempt, tt.u, got)
		}
	}
}

func TestErrorMessages(t *testing.T) {
	re := &retry.ResponseError{Exit: "dc-1", Origin: "shop.example", StatusCode: 429,
		Verdict: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: 7 * time.Second}}
	if got, want := re.Error(), "retry: via dc-1 to shop.example: 429 Too Many Requests: rate_limited, retry after 7s"; got != want {
		t.Errorf("ResponseError.Error() = %q, want %q", got, want)
	}
	nh := wrapped(&pool.NoHealthyExitError{Origin: "shop.example", Exits: 2, RetryIn: 15 * time.Minute})
	auth := pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	ge := &retry.GiveUpError{Origin: "shop.example", Wait: 15 * time.Minute, MaxWait: 30 * time.Second, Err: nh,
		Failures: []pool.FailedAttempt{
			{Exit: "a", Verdict: auth, Err: &retry.ResponseError{Exit: "a", StatusCode: 407, Verdict: auth}},
			{Exit: "b", Verdict: auth, Err: wrapped(&transport.AttemptError{Exit: "b", Verdict: auth, Err: &transport.ProxyConnectError{Exit: "b", StatusCode: 407}})},
		}}
	want := "retry: giving up on shop.example: nothing ready for 15m0s, longer than the 30s a retry may wait; " +
		"failed attempts: proxy_auth via a, proxy_auth via b (every exit tried failed for good: check the proxies and their credentials): " +
		nh.Error()
	if got := ge.Error(); got != want {
		t.Errorf("GiveUpError.Error() =\n%q, want\n%q", got, want)
	}
	var (
		gotNH  *pool.NoHealthyExitError
		gotRE  *retry.ResponseError
		gotPCE *transport.ProxyConnectError
	)
	err := fmt.Errorf("GET http://shop.example/ giving up after 3 attempt(s): %w", ge)
	if !errors.As(err, &gotNH) || !errors.As(err, &gotRE) || !errors.As(err, &gotPCE) || !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Errorf("errors.As through GiveUpError: NoHealthyExitError %v, ResponseError %v, ProxyConnectError %v", gotNH, gotRE, gotPCE)
	}
}
