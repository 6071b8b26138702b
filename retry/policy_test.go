package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func newPolicy(t *testing.T, s retry.Settings) *retry.Policy {
	t.Helper()
	p, err := retry.New(s)
	if err != nil {
		t.Fatalf("retry.New(%+v) = %v", s, err)
	}
	return p
}

// waitTimers waits until clk has n timers pending: a goroutine has started waiting on it.
func waitTimers(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	for i := 0; clk.Timers() != n; i++ {
		if i > 1_000_000 {
			t.Fatalf("fake clock has %d timers pending, want %d", clk.Timers(), n)
		}
		runtime.Gosched()
	}
}

func foreign(status int, header http.Header) *http.Response {
	req, _ := http.NewRequest("GET", "http://shop.example/", nil)
	if header == nil {
		header = http.Header{}
	}
	return &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(strings.NewReader("")), Request: req}
}

func TestNew(t *testing.T) {
	if _, err := retry.New(retry.Settings{MaxWait: -time.Second}); err == nil || !strings.Contains(err.Error(), "MaxWait") {
		t.Errorf("New(MaxWait: -1s) = %v, want an error naming MaxWait", err)
	}
	p := newPolicy(t, retry.Settings{})
	if s := p.Settings(); s.Clock == nil || s.Rand == nil {
		t.Errorf("Settings() = %+v, want defaults filled in", s)
	}
}

func TestCheckRetryStopsOnCancel(t *testing.T) {
	p := newPolicy(t, retry.Settings{})
	ctx, cancel := context.WithCancel(transport.ContextWithRetries(context.Background()))
	cancel()
	nh := wrapped(&pool.NoHealthyExitError{Origin: "shop.example", Exits: 1, RetryIn: time.Second})
	if ok, err := p.CheckRetry(ctx, nil, nh); ok || !errors.Is(err, context.Canceled) {
		t.Errorf("CheckRetry(cancelled ctx) = %v, %v; want false, context.Canceled", ok, err)
	}
}

func TestCheckRetryResponses(t *testing.T) {
	p := newPolicy(t, retry.Settings{})
	ctx := transport.ContextWithRetries(context.Background())
	tests := []struct {
		status int
		retry  bool
		errNil bool
	}{
		{200, false, true},
		{404, false, true},
		{500, false, true},
		{429, true, false},
		{503, true, false},
	}
	for i, tt := range tests {
		ok, err := p.CheckRetry(ctx, foreign(tt.status, nil), nil)
		if ok != tt.retry || (err == nil) != tt.errNil {
			t.Errorf("%d: CheckRetry(%d) = %v, %v; want %v, error %v", i, tt.status, ok, err, tt.retry, !tt.errNil)
		}
		var re *retry.ResponseError
		if err != nil && (!errors.As(err, &re) || re.StatusCode != tt.status) {
			t.Errorf("%d: CheckRetry(%d) error = %#v, want a *ResponseError for it", i, tt.status, err)
		}
	}
}

// A refusal's wait is noted in the request's Retries and waited out by PrepareRetry, on the
// policy's clock.
func TestPrepareRetryWaitsForSoonestProbe(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, retry.Settings{Clock: clk})
	ctx := transport.ContextWithRetries(context.Background())
	nh := wrapped(&pool.NoHealthyExitError{Origin: "shop.example", Exits: 2, RetryIn: 7 * time.Second})
	if ok, err := p.CheckRetry(ctx, nil, nh); !ok || err != nil {
		t.Fatalf("CheckRetry(no healthy exit, 7s) = %v, %v; want true, nil", ok, err)
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://shop.example/", nil)
	done := make(chan error, 1)
	go func() { done <- p.PrepareRetry(req) }()
	waitTimers(t, clk, 1)
	clk.Advance(6 * time.Second)
	if n := clk.Timers(); n != 1 {
		t.Fatalf("after 6s, %d timers pending, want PrepareRetry still waiting", n)
	}
	clk.Advance(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("PrepareRetry = %v, want nil", err)
	}
	// The instant has passed: a second PrepareRetry does not wait.
	if err := p.PrepareRetry(req); err != nil || clk.Timers() != 0 {
		t.Errorf("PrepareRetry after the instant = %v with %d timers, want nil and no wait", err, clk.Timers())
	}
}

func TestPrepareRetryCancelled(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, retry.Settings{Clock: clk})
	ctx, cancel := context.WithCancel(transport.ContextWithRetries(context.Background()))
	nh := wrapped(&pool.NoHealthyExitError{Origin: "shop.example", Exits: 2, RetryIn: 7 * time.Second})
	if ok, _ := p.CheckRetry(ctx, nil, nh); !ok {
		t.Fatal("CheckRetry(no healthy exit) = false, want true")
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://shop.example/", nil)
	done := make(chan error, 1)
	go func() { done <- p.PrepareRetry(req) }()
	waitTimers(t, clk, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("PrepareRetry(cancelled while waiting) = %v, want context.Canceled", err)
	}
	if n := clk.Timers(); n != 0 {
		t.Errorf("%d timers left pending, want the wait's timer stopped", n)
	}
}

// Without transport.ContextWithRetries there is no Retries to note the wait in: CheckRetry waits
// for the refusal itself, and PrepareRetry does nothing.
func TestCheckRetryWithoutRetriesWaits(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, retry.Settings{Clock: clk})
	nh := wrapped(&pool.NoHealthyExitError{Origin: "shop.example", Exits: 2, RetryIn: 3 * time.Second})
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		ok, err := p.CheckRetry(context.Background(), nil, nh)
		done <- result{ok, err}
	}()
	waitTimers(t, clk, 1)
	clk.Advance(3 * time.Second)
	if r := <-done; !r.ok || r.err != nil {
		t.Errorf("CheckRetry without Retries = %v, %v; want true, nil after the wait", r.ok, r.err)
	}
	req, _ := http.NewRequest("GET", "http://shop.example/", nil)
	if err := p.PrepareRetry(req); err != nil || clk.Timers() != 0 {
		t.Errorf("PrepareRetry without Retries = %v with %d timers, want nil and no wait", err, clk.Timers())
	}
}

// The policy keeps no state of its own: what it records lives in the *pool.Retries that
// transport.ContextWithRetries put in the context, the one the pool reads on each pick.
func TestCheckRetryRecordsInContextRetries(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, retry.Settings{Clock: clk})
	ctx := transport.ContextWithRetries(context.Background())
	r := transport.RetriesFromContext(ctx)
	timeout := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
	ae := wrapped(&transport.AttemptError{Exit: "dc-1", Origin: "shop.example", Verdict: timeout, Err: errors.New("timeout")})
	steps := []struct {
		resp     *http.Response
		err      error
		failures []string // want Failures() by exit, after the step
		notAfter time.Duration
	}{
		{nil, ae, []string{"dc-1"}, 0},
		{foreign(429, nil), nil, []string{"dc-1"}, 0}, // a response from no transport names no exit
		{nil, wrapped(&pool.NoHealthyExitError{Origin: "shop.example", Exits: 2, RetryIn: 7 * time.Second}), []string{"dc-1"}, 7 * time.Second},
		{nil, wrapped(&pool.ThrottledError{Origin: "shop.example", Scope: pool.ScopeOrigin, RetryIn: 2 * time.Second}), []string{"dc-1"}, 2 * time.Second},
	}
	for i, st := range steps {
		if ok, _ := p.CheckRetry(ctx, st.resp, st.err); !ok {
			t.Fatalf("%d: CheckRetry = false, want a retry", i)
		}
		var got []string
		for _, f := range r.Failures() {
			got = append(got, f.Exit)
		}
		if fmt.Sprint(got) != fmt.Sprint(st.failures) {
			t.Errorf("%d: Retries.Failures() = %v, want %v", i, got, st.failures)
		}
		if want := t0.Add(st.notAfter); st.notAfter > 0 && !r.NotBefore().Equal(want) {
			t.Errorf("%d: Retries.NotBefore() = %v, want %v", i, r.NotBefore(), want)
		}
	}
	fs := r.Failures()
	var got *transport.AttemptError
	if len(fs) != 1 || fs[0].Verdict != timeout || !errors.As(fs[0].Err, &got) || got.Exit != "dc-1" {
		t.Errorf("Retries.Failures() = %+v, want the timeout via dc-1 with its AttemptError", fs)
	}
}

func TestCheckRetryGivesUpBeyondMaxWait(t *testing.T) {
	nh := &pool.NoHealthyExitError{Origin: "shop.example", Exits: 3, RetryIn: 15 * time.Minute}
	tests := []struct {
		name    string
		s       retry.Settings
		backoff time.Duration // the max the client passed to Backoff before; 0 = never called
		retryIn time.Duration
		maxWait time.Duration // want GiveUpError.MaxWait; 0 = want a retry
	}{
		{"default cap", retry.Settings{}, 0, 15 * time.Minute, retry.DefaultMaxWait},
		{"default cap, within", retry.Settings{}, 0, 29 * time.Second, 0},
		{"explicit cap", retry.Settings{MaxWait: time.Minute}, 0, 61 * time.Second, time.Minute},
		{"client's cap", retry.Settings{}, 2 * time.Second, 3 * time.Second, 2 * time.Second},
		{"explicit beats client's", retry.Settings{MaxWait: 5 * time.Second}, 2 * time.Second, 3 * time.Second, 0},
	}
	for _, tt := range tests {
		clk := clock.NewFake(t0)
		tt.s.Clock = clk
		p := newPolicy(t, tt.s)
		if tt.backoff > 0 {
			p.Backoff(time.Millisecond, tt.backoff, 0, nil)
		}
		ctx := transport.ContextWithRetries(context.Background())
		// One failed attempt first, so the GiveUpError has something to list.
		ae := wrapped(&transport.AttemptError{Exit: "a", Origin: "shop.example",
			Verdict: pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth},
			Err:     &transport.ProxyConnectError{Exit: "a", StatusCode: 407}})
		if ok, err := p.CheckRetry(ctx, nil, ae); !ok || err != nil {
			t.Fatalf("%s: CheckRetry(connect 407) = %v, %v; want true, nil", tt.name, ok, err)
		}
		e := *nh
		e.RetryIn = tt.retryIn
		ok, err := p.CheckRetry(ctx, nil, wrapped(&e))
		if tt.maxWait == 0 {
			if !ok || err != nil {
				t.Errorf("%s: CheckRetry(no exit for %v) = %v, %v; want true, nil", tt.name, tt.retryIn, ok, err)
			}
			continue
		}
		var ge *retry.GiveUpError
		if ok || !errors.As(err, &ge) {
			t.Errorf("%s: CheckRetry(no exit for %v) = %v, %v; want false, a *GiveUpError", tt.name, tt.retryIn, ok, err)
			continue
		}
		if ge.Wait != tt.retryIn || ge.MaxWait != tt.maxWait || ge.Origin != "shop.example" || len(ge.Failures) != 1 || ge.Failures[0].Exit != "a" {
			t.Errorf("%s: GiveUpError = %+v, want Wait %v, MaxWait %v, one failure via a", tt.name, ge, tt.retryIn, tt.maxWait)
		}
		var pce *transport.ProxyConnectError
		var gotNH *pool.NoHealthyExitError
		if !errors.As(err, &pce) || !errors.As(err, &gotNH) {
			t.Errorf("%s: errors.As(GiveUpError) finds ProxyConnectError %v, NoHealthyExitError %v; want both", tt.name, pce, gotNH)
		}
		if clk.Timers() != 0 {
			t.Errorf("%s: giving up left a timer pending", tt.name)
		}
	}
}

// The request's Retries keeps the last MaxFailedAttempts failures.
func TestGiveUpErrorKeepsLastFailures(t *testing.T) {
	p := newPolicy(t, retry.Settings{MaxWait: time.Second})
	ctx := transport.ContextWithRetries(context.Background())
	for i := range pool.MaxFailedAttempts + 3 {
		ae := wrapped(&transport.AttemptError{Exit: fmt.Sprintf("x%d", i), Origin: "shop.example",
			Verdict: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout}, Err: errors.New("timeout")})
		p.CheckRetry(ctx, nil, ae)
	}
	_, err := p.CheckRetry(ctx, nil, wrapped(&pool.NoHealthyExitError{Origin: "shop.example", Exits: 11, RetryIn: time.Hour}))
	var ge *retry.GiveUpError
	if !errors.As(err, &ge) || len(ge.Failures) != pool.MaxFailedAttempts || ge.Failures[0].Exit != "x3" || ge.Failures[pool.MaxFailedAttempts-1].Exit != "x10" {
		t.Fatalf("CheckRetry after %d failures = %v, want a GiveUpError listing x3…x10", pool.MaxFailedAttempts+3, err)
	}
	if strings.Contains(ge.Error(), "for good") {
		t.Errorf("GiveUpError.Error() = %q: transient failures are not 'for good'", ge.Error())
	}
}

func TestBackoff(t *testing.T) {
	one := func() float64 { return 1 }
	ra7 := foreign(429, http.Header{"Retry-After": {"7"}})
	origin502 := foreign(502, nil) // not judged by a transport: the origin is blamed, waits grow
	tests := []struct {
		s        retry.Settings
		min, max time.Duration
		attempt  int
		resp     *http.Response
		want     time.Duration
	}{
		{retry.Settings{Rand: one}, 10 * time.Millisecond, time.Minute, 0, nil, 10 * time.Millisecond},
		{retry.Settings{Rand: one}, 10 * time.Millisecond, time.Minute, 2, origin502, 40 * time.Millisecond},
		{retry.Settings{Rand: func() float64 { return 0 }}, 10 * time.Millisecond, time.Minute, 2, origin502, 20 * time.Millisecond},
		// An error (the exit failed, or a refusal whose wait PrepareRetry keeps): the retry moves on
		// to a fresh exit, and the wait does not grow.
		{retry.Settings{Rand: one}, 10 * time.Millisecond, time.Minute, 5, nil, 10 * time.Millisecond},
		// Retry-After is PrepareRetry's to keep, even with WaitRetryAfter.
		{retry.Settings{Rand: one}, 10 * time.Millisecond, time.Minute, 0, ra7, 10 * time.Millisecond},
		{retry.Settings{Rand: one, WaitRetryAfter: true}, 10 * time.Millisecond, time.Minute, 0, ra7, 10 * time.Millisecond},
		{retry.Settings{Rand: one, MaxWait: 3 * time.Second}, time.Second, time.Minute, 5, origin502, 3 * time.Second},
		{retry.Settings{Rand: one}, time.Second, 2 * time.Second, 5, origin502, 2 * time.Second},
	}
	for i, tt := range tests {
		p := newPolicy(t, tt.s)
		if got := p.Backoff(tt.min, tt.max, tt.attempt, tt.resp); got != tt.want {
			t.Errorf("%d: Backoff(%v, %v, %d, resp) = %v, want %v", i, tt.min, tt.max, tt.attempt, got, tt.want)
		}
	}
}

// With WaitRetryAfter, a response's Retry-After is noted for PrepareRetry too.
func TestCheckRetryWaitRetryAfter(t *testing.T) {
	clk := clock.NewFake(t0)
	p := newPolicy(t, retry.Settings{Clock: clk, WaitRetryAfter: true})
	ctx := transport.ContextWithRetries(context.Background())
	if ok, _ := p.CheckRetry(ctx, foreign(429, http.Header{"Retry-After": {"7"}}), nil); !ok {
		t.Fatal("CheckRetry(429) = false, want true")
	}
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://shop.example/", nil)
	done := make(chan error, 1)
	go func() { done <- p.PrepareRetry(req) }()
	waitTimers(t, clk, 1)
	clk.Advance(7 * time.Second)
	if err := <-done; err != nil {
		t.Errorf("PrepareRetry = %v", err)
	}
}

// TestDelayMovesOn: a retry that moves on to a fresh exit waits the first backoff step whatever
// its number; refusals and origin-blamed failures wait longer each time.
func TestDelayMovesOn(t *testing.T) {
	exitFailed := retry.Decision{Retry: true, Exit: "a", Verdict: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout}}
	refused := retry.Decision{Retry: true, Wait: time.Second, Verdict: pool.Verdict{Class: pool.ClassNotAttempted}}
	originDown := retry.Decision{Retry: true, Exit: "a", Verdict: pool.Verdict{Outcome: pool.Transient, Scope: pool.ScopeOrigin}}
	for i, tt := range []struct {
		d    retry.Decision
		want time.Duration
	}{
		{exitFailed, 10 * time.Millisecond},
		{refused, 80 * time.Millisecond},
		{originDown, 80 * time.Millisecond},
	} {
		if got := retry.Delay(tt.d, 10*time.Millisecond, time.Minute, 3, 1); got != tt.want {
			t.Errorf("%d: Delay(%+v, 10ms, 1m, 3) = %v, want %v (MovesOn %v)", i, tt.d, got, tt.want, tt.d.MovesOn())
		}
	}
}
