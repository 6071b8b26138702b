package transport_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// The RoundTripper contract, point by point, and what the observer sees of each attempt.

const (
	trOriginA = "a.example"
	trURLA    = "http://a.example/path?q=1"
	trOriginB = "b.example"
	trURLB    = "http://b.example/"
)

// transportRTFunc adapts a function to http.RoundTripper.
type transportRTFunc func(*http.Request) (*http.Response, error)

func (f transportRTFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type transportCtxKey struct{}

func TestTransportDoesNotModifyTheRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply testkit.Reply
		setup func(env *scriptedEnv)
	}{
		{"ok", testkit.Reply{Body: "hello"}, nil},
		{"rate_limited", testkit.Reply{Status: 429, Header: testkit.RetryAfter(10)}, nil},
		{"reset", testkit.Reply{Err: testkit.ErrReset}, nil},
		{"no_healthy_exit", testkit.Reply{}, func(env *scriptedEnv) { env.pool.Remove("x0") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestPoolEnv(t, testkit.Exits("x", 1))
			if tc.setup != nil {
				tc.setup(env)
			}
			env.base.On("*", "*", tc.reply)
			ctx := context.WithValue(context.Background(), transportCtxKey{}, "caller")
			body := testkit.NewTrackedBody("form=1")
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, trURLA, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = "virtual.a.example"
			req.Header.Set("X-Token", "abc")
			req.Header.Add("Accept", "text/html")
			req.Trailer = http.Header{"X-Sum": nil}
			before := req.Clone(ctx)
			resp, err := env.tr.RoundTrip(req)
			if resp != nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			_ = err
			if req.Context() != ctx {
				t.Errorf("request context replaced")
			}
			if req.Method != before.Method || req.URL.String() != before.URL.String() || req.Host != before.Host ||
				req.ContentLength != before.ContentLength || req.Proto != before.Proto {
				t.Errorf("request changed: %s %s host %q len %d, want %s %s host %q len %d",
					req.Method, req.URL, req.Host, req.ContentLength, before.Method, before.URL, before.Host, before.ContentLength)
			}
			if req.URL == nil || *req.URL != *before.URL {
				t.Errorf("request URL = %+v, want %+v", req.URL, before.URL)
			}
			if !reflect.DeepEqual(req.Header, before.Header) || !reflect.DeepEqual(req.Trailer, before.Trailer) {
				t.Errorf("request headers = %v / %v, want %v / %v", req.Header, req.Trailer, before.Header, before.Trailer)
			}
			if req.Body != body {
				t.Errorf("request body replaced")
			}
			if body.Closes() == 0 {
				t.Errorf("request body not closed")
			}
			for _, c := range env.base.Calls() {
				if c.Req == req {
					t.Errorf("the base received the caller's own *http.Request")
				}
				if v := c.Req.Context().Value(transportCtxKey{}); v != "caller" {
					t.Errorf("the base's context lost the caller's values: %v", v)
				}
			}
		})
	}
}

func TestTransportClosesRequestBodyOnEveryPath(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, env *scriptedEnv)
		url   string
		isErr error
	}{
		{"ok", nil, trURLA, nil},
		{"429", func(_ *testing.T, env *scriptedEnv) {
			env.base.On("*", "*", testkit.Reply{Status: 429})
		}, trURLA, nil},
		{"base_error", func(_ *testing.T, env *scriptedEnv) {
			env.base.On("*", "*", testkit.Reply{Err: testkit.ErrTimeout})
		}, trURLA, nil},
		{"no_healthy_exit", func(t *testing.T, env *scriptedEnv) {
			env.base.On("*", trOriginA, testkit.Reply{Status: 407})
			for range 3 {
				env.get(t, nil, trURLA)
			}
			env.base.Reset()
		}, trURLA, pool.ErrNoHealthyExit},
		{"origin_unhealthy", func(t *testing.T, env *scriptedEnv) {
			guardTrip(t, env, trURLA, trOriginA, testkit.Reply{Status: 503})
		}, trURLA, pool.ErrOriginUnhealthy},
		{"closed", func(_ *testing.T, env *scriptedEnv) { env.tr.Close() }, trURLA, transport.ErrClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestPoolEnv(t, testkit.Exits("x", 3))
			if tc.setup != nil {
				tc.setup(t, env)
			}
			calls := env.base.Count("*", "*")
			body := testkit.NewTrackedBody("payload")
			req, _ := http.NewRequest(http.MethodPut, tc.url, body)
			resp, err := env.tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			if tc.isErr != nil {
				if !errors.Is(err, tc.isErr) {
					t.Errorf("err = %v, want %v", err, tc.isErr)
				}
				if n := env.base.Count("*", "*"); n != calls {
					t.Errorf("refused request reached the base")
				}
			}
			if n := body.Closes(); n != 1 {
				t.Errorf("request body closed %d times, want 1", n)
			}
		})
	}
	t.Run("no_url", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 1))
		body := testkit.NewTrackedBody("payload")
		resp, err := env.tr.RoundTrip(&http.Request{Method: "GET", Header: http.Header{}, Body: body})
		if resp != nil || err == nil {
			t.Errorf("RoundTrip without URL = %v, %v; want an error", resp, err)
		}
		if body.Closes() != 1 {
			t.Errorf("request body not closed")
		}
	})
}

func TestTransportResponseMeansNilError(t *testing.T) {
	for _, code := range []int{200, 204, 301, 404, 403, 407, 429, 500, 502, 503, 504} {
		env := newTestPoolEnv(t, testkit.Exits("x", 2))
		env.base.On("*", "*", testkit.Reply{Status: code, Body: "body"})
		resp, label, err := env.do(t, nil, trURLA)
		if err != nil || resp == nil {
			t.Errorf("status %d: resp %v, err %v; want the response and a nil error", code, resp, err)
			continue
		}
		if resp.StatusCode != code || label == "" {
			t.Errorf("status %d: got %d through %q", code, resp.StatusCode, label)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "body" {
			t.Errorf("status %d: body %q, want %q (a peeked body must be served whole)", code, b, "body")
		}
	}
}

func TestTransportMisbehavingBase(t *testing.T) {
	t.Run("response_and_error", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 1))
		baseBody := testkit.NewTrackedBody("x")
		env.tr, _ = build((env.pool), transport.WithBase(transportRTFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: baseBody, Request: r, Header: http.Header{}}, testkit.ErrReset
		})))
		resp, _, err := env.do(t, nil, trURLA)
		if resp != nil || err == nil {
			t.Fatalf("resp %v, err %v; want only the error", resp, err)
		}
		if baseBody.Closes() == 0 {
			t.Errorf("the base's stray response body was not closed")
		}
		if n := env.exitStatus(t, "x0").InFlight; n != 0 {
			t.Errorf("in flight = %d, want 0", n)
		}
	})
	t.Run("nil_body", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 1))
		env.tr, _ = build((env.pool), transport.WithBase(transportRTFunc(func(r *http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 204, Request: r, Header: http.Header{}}, nil
		})))
		resp, _, err := env.do(t, nil, trURLA)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 0 {
			t.Errorf("nil base body read as %q, %v; want empty", b, err)
		}
		resp.Body.Close()
		if n := env.exitStatus(t, "x0").InFlight; n != 0 {
			t.Errorf("in flight = %d, want 0", n)
		}
	})
	// Regression: a base answering (nil, nil) made the classifier dereference a nil response.
	t.Run("nil_response_nil_error", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 1))
		env.tr, _ = build((env.pool), transport.WithBase(transportRTFunc(func(*http.Request) (*http.Response, error) {
			return nil, nil
		})))
		resp, _, err := env.do(t, nil, trURLA)
		if resp != nil || err == nil {
			t.Fatalf("resp %v, err %v; want an error", resp, err)
		}
		if n := env.exitStatus(t, "x0").InFlight; n != 0 {
			t.Errorf("in flight = %d, want 0", n)
		}
	})
	// Regression: a base without resp.Request made ExitFromResponse return nil.
	t.Run("no_response_request", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 1))
		env.tr, _ = build((env.pool), transport.WithBase(transportRTFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
		})))
		resp, label, err := env.do(t, nil, trURLA)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if label != "x0" {
			t.Errorf("ExitFromResponse = %q, want x0", label)
		}
	})
	// A panicking base must not keep the probe slot or the in-flight count it was given.
	t.Run("panic_releases_permits", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 1))
		env.base.On("*", "*", testkit.Reply{Status: 429, Header: testkit.RetryAfter(30)})
		env.mustGet(t, nil, trURLA)
		env.base.Reset()
		p, _ := env.pair("x0", trOriginA)
		env.advancePast(p.Breaker.NextProbe)
		panicky, _ := build((env.pool), transport.WithBase(transportRTFunc(func(*http.Request) (*http.Response, error) {
			panic("base exploded")
		})))
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("the base's panic did not reach the caller")
				}
			}()
			req, _ := http.NewRequest("GET", trURLA, nil)
			panicky.RoundTrip(req)
		}()
		if p, _ := env.pair("x0", trOriginA); p.Breaker.ProbesInFlight != 0 || p.Breaker.State != breaker.HalfOpen {
			t.Errorf("after a panicking probe: %v with %d probes, want half_open with none", p.Breaker.State, p.Breaker.ProbesInFlight)
		}
		if n := env.exitStatus(t, "x0").InFlight; n != 0 {
			t.Errorf("in flight = %d, want 0", n)
		}
		if l, code := env.mustGet(t, nil, trURLA); l != "x0" || code != 200 {
			t.Errorf("next probe went %q (%d), want x0 at once", l, code)
		}
	})
}

func TestTransportForwardsCloseIdleConnections(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 2))
	env.tr.CloseIdleConnections()
	if n := env.base.IdleCloses(); n != 1 {
		t.Errorf("base CloseIdleConnections called %d times, want 1", n)
	}
	// Through an http.Client too.
	(&http.Client{Transport: env.tr}).CloseIdleConnections()
	if n := env.base.IdleCloses(); n != 2 {
		t.Errorf("base CloseIdleConnections called %d times, want 2", n)
	}
}

func TestTransportExitFromResponseThroughClient(t *testing.T) {
	for _, timeout := range []time.Duration{0, 5 * time.Second} {
		env := newTestPoolEnv(t, testkit.Exits("x", 3))
		client := &http.Client{Transport: env.tr, Timeout: timeout}
		resp, err := client.Get(trURLB)
		if err != nil {
			t.Fatalf("Timeout %v: %v", timeout, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		e := transport.ExitFromResponse(resp)
		if e == nil {
			t.Fatalf("Timeout %v: ExitFromResponse = nil", timeout)
		}
		calls := env.base.Calls()
		if len(calls) != 1 || calls[0].Exit != e.Label() {
			t.Errorf("Timeout %v: ExitFromResponse = %s, the base saw %+v", timeout, e.Label(), calls)
		}
		if strings.Contains(e.Label(), "pw-") {
			t.Errorf("label %q shows the password", e.Label())
		}
	}
}

func TestTransportSuccessVerdictAtBodyEnd(t *testing.T) {
	for _, end := range []string{"eof", "close"} {
		t.Run(end, func(t *testing.T) {
			env := newTestPoolEnv(t, testkit.Exits("x", 1))
			env.base.On("*", "*", testkit.Reply{Body: strings.Repeat("y", 100)})
			resp, _, err := env.do(t, nil, trURLA)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(env.obs.Finished()); n != 0 {
				t.Fatalf("AttemptFinished called %d times before the body ended", n)
			}
			if n := env.exitStatus(t, "x0").InFlight; n != 1 {
				t.Errorf("in flight while the body is open = %d, want 1", n)
			}
			if end == "eof" {
				if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 100 {
					t.Fatalf("ReadAll = %d bytes, %v", len(b), err)
				}
				if n := len(env.obs.Finished()); n != 1 {
					t.Fatalf("AttemptFinished called %d times at EOF, want 1", n)
				}
			}
			resp.Body.Close()
			resp.Body.Close()
			f := env.obs.Finished()
			if len(f) != 1 || f[0].Verdict.Outcome != pool.Success || f[0].StatusCode != 200 {
				t.Fatalf("AttemptFinished = %+v, want one success with status 200", f)
			}
			if n := env.exitStatus(t, "x0").InFlight; n != 0 {
				t.Errorf("in flight after the body ended = %d, want 0", n)
			}
		})
	}
}

func TestTransportBodyDyingMidReadCountsOnce(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 1))
	env.base.On("*", "*", testkit.Reply{Body: "partial", BodyErr: io.ErrUnexpectedEOF})
	resp, _, err := env.do(t, nil, trURLA)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if string(b) != "partial" || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("ReadAll = %q, %v; want %q, ErrUnexpectedEOF", b, err, "partial")
	}
	if _, err := resp.Body.Read(make([]byte, 8)); err == nil {
		t.Errorf("Read after the failure succeeded")
	}
	resp.Body.Close()
	f := env.obs.Finished()
	if len(f) != 1 {
		t.Fatalf("AttemptFinished called %d times, want 1", len(f))
	}
	if v := f[0].Verdict; v.Outcome != pool.Transient || v.Class != pool.ClassBodyRead || !v.ConnLevel {
		t.Errorf("verdict = %+v, want transient body_read, connection level", v)
	}
	p, _ := env.pair("x0", trOriginA)
	if n := p.Breaker.FailuresInWindow; n != 1 {
		t.Errorf("pair failures = %d, want exactly 1", n)
	}
	if n := env.exitStatus(t, "x0").Breaker.FailuresInWindow; n != 1 {
		t.Errorf("exit failures = %d, want exactly 1 (connection level)", n)
	}
}

func TestTransportCallerCancelMidBodyIsNeutral(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 1))
	env.base.On("*", "*", testkit.Reply{Body: "hello world"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, _, err := env.do(t, ctx, trURLA)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if n, err := resp.Body.Read(buf); n != 5 || err != nil {
		t.Fatalf("first Read = %d, %v", n, err)
	}
	cancel()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel = %v, want context.Canceled", err)
	}
	resp.Body.Close()
	f := env.obs.Finished()
	if len(f) != 1 || f[0].Verdict.Outcome != pool.Neutral || f[0].Verdict.Class != pool.ClassCanceled {
		t.Fatalf("AttemptFinished = %+v, want one neutral canceled", f)
	}
	p, _ := env.pair("x0", trOriginA)
	if p.Breaker.FailuresInWindow != 0 || env.exitStatus(t, "x0").Breaker.FailuresInWindow != 0 {
		t.Errorf("a cancelled read counted against the exit: pair %+v", p.Breaker)
	}
}

func TestTransportHeaderTimeout(t *testing.T) {
	t.Run("transport_timeout_blames_exit", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 1), transport.WithHeaderTimeout(50*time.Millisecond))
		env.base.On("*", "*", testkit.Reply{Hang: true})
		// The header timeout runs on the pool's clock: once the attempt hangs with its timer set,
		// move the clock past it.
		go func() {
			for env.clock.Timers() == 0 {
				runtime.Gosched()
			}
			env.clock.Advance(50 * time.Millisecond)
		}()
		_, _, err := env.do(t, nil, trURLA)
		var ae *transport.AttemptError
		if !errors.As(err, &ae) {
			t.Fatalf("err = %v, want *AttemptError", err)
		}
		if ae.Verdict.Outcome != pool.Transient || ae.Verdict.Class != pool.ClassTimeout {
			t.Errorf("verdict = %+v, want transient timeout", ae.Verdict)
		}
		if ae.Exit != "x0" || ae.Origin != trOriginA {
			t.Errorf("AttemptError names %s / %s, want x0 / %s", ae.Exit, ae.Origin, trOriginA)
		}
		if p, _ := env.pair("x0", trOriginA); p.Breaker.FailuresInWindow != 1 {
			t.Errorf("pair failures = %d, want 1", p.Breaker.FailuresInWindow)
		}
		// A timeout, as callers test for one; not a cancellation, since the caller cancelled nothing.
		if !ae.Timeout() {
			t.Errorf("AttemptError.Timeout() = false, want true")
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("err = %v: errors.As(net.Error).Timeout() = false, want true", err)
		}
		if errors.Is(err, context.Canceled) {
			t.Errorf("errors.Is(err, context.Canceled) = true for the transport's own timeout")
		}
		uerr := &url.Error{Op: "Get", URL: trURLA, Err: err}
		if !uerr.Timeout() {
			t.Errorf("url.Error.Timeout() = false, want true")
		}
	})
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"caller_deadline_is_neutral", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 50*time.Millisecond)
		}, context.DeadlineExceeded},
		{"caller_cancel_is_neutral", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The transport's own header timeout is far off: only the caller ends the hang.
			env := newTestPoolEnv(t, testkit.Exits("x", 1), transport.WithHeaderTimeout(time.Minute))
			env.base.On("*", "*", testkit.Reply{Hang: true})
			ctx, cancel := tc.ctx()
			defer cancel()
			_, _, err := env.do(t, ctx, trURLA)
			var ae *transport.AttemptError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *AttemptError", err)
			}
			if ae.Verdict.Outcome != pool.Neutral || ae.Verdict.Class != pool.ClassCanceled {
				t.Errorf("verdict = %+v, want neutral canceled", ae.Verdict)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want it to wrap %v", err, tc.want)
			}
			if p, _ := env.pair("x0", trOriginA); p.Breaker.FailuresInWindow != 0 {
				t.Errorf("pair failures = %d, want 0", p.Breaker.FailuresInWindow)
			}
			if e := env.exitStatus(t, "x0").Breaker; e.FailuresInWindow != 0 {
				t.Errorf("exit failures = %d, want 0", e.FailuresInWindow)
			}
		})
	}
}

func TestTransportObserver(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 1))
	type key struct{}
	env.obs.startCtx = func(ctx context.Context, a transport.AttemptInfo) context.Context {
		return context.WithValue(ctx, key{}, "span:"+a.Exit.Label())
	}
	env.base.SetScript(func(c testkit.Call) (testkit.Reply, bool) {
		if c.Req.Context().Value(key{}) != "span:x0" {
			return testkit.Reply{Err: errors.New("observer context not seen by the base")}, true
		}
		if e, ok := transport.ExitFromContext(c.Req.Context()); !ok || e.Label() != "x0" {
			return testkit.Reply{Err: errors.New("ExitFromContext lost through the observer context")}, true
		}
		return testkit.Reply{}, false
	})
	env.mustGet(t, nil, trURLA)
	env.base.On("*", trOriginA, testkit.Reply{Err: testkit.ErrTimeout})
	env.get(t, nil, trURLA)
	env.base.On("*", trOriginA, testkit.Reply{Status: 429, Header: testkit.RetryAfter(60)})
	env.get(t, nil, trURLA)
	if _, _, err := env.get(t, nil, trURLA); !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Fatalf("after the 429: err = %v, want ErrNoHealthyExit", err)
	}
	env.base.On("*", trOriginB, testkit.Reply{Status: 407})
	env.get(t, nil, trURLB)

	started, finished := env.obs.Started(), env.obs.Finished()
	if len(started) != 4 || len(finished) != 4 {
		t.Fatalf("AttemptStarted %d, AttemptFinished %d times; want 4 each", len(started), len(finished))
	}
	want := []struct {
		origin            string
		outcome           pool.Outcome
		class             pool.Class
		status            int
		pairAfter, exitAf breaker.State
	}{
		{trOriginA, pool.Success, pool.ClassOK, 200, breaker.Closed, breaker.Closed},
		{trOriginA, pool.Transient, pool.ClassTimeout, 0, breaker.Closed, breaker.Closed},
		{trOriginA, pool.Transient, pool.ClassRateLimited, 429, breaker.Open, breaker.Closed},
		{trOriginB, pool.Permanent, pool.ClassProxyAuth, 407, breaker.Closed, breaker.Open},
	}
	for i, w := range want {
		s, f := started[i], finished[i]
		if s.Exit.Label() != "x0" || s.Origin != w.origin || s.Method != "GET" || s.PairState != breaker.Closed || s.ExitState != breaker.Closed {
			t.Errorf("attempt %d: started %+v", i, s)
		}
		if f.Exit.Label() != "x0" || f.Origin != w.origin || f.Verdict.Outcome != w.outcome || f.Verdict.Class != w.class ||
			f.StatusCode != w.status || f.PairStateAfter != w.pairAfter || f.ExitStateAfter != w.exitAf {
			t.Errorf("attempt %d: finished %+v (verdict %+v), want %+v", i, f, f.Verdict, w)
		}
		if (f.Err != nil) != (w.status == 0) {
			t.Errorf("attempt %d: Err = %v with status %d", i, f.Err, f.StatusCode)
		}
		if env.obs.finishedCtx[i].Value(key{}) != "span:x0" {
			t.Errorf("attempt %d: AttemptFinished did not get the context AttemptStarted returned", i)
		}
	}
	if r := env.obs.Refusals(); len(r) != 1 || !errors.Is(r[0], pool.ErrNoHealthyExit) {
		t.Errorf("Refused = %v, want one ErrNoHealthyExit", r)
	}
	pc := env.obs.changesFor(pool.ScopePair, "x0", trOriginA)
	if len(pc) != 1 || pc[0].From != breaker.Closed || pc[0].To != breaker.Open || pc[0].Cause != breaker.CauseRetryAfter {
		t.Errorf("pair state changes = %+v, want one closed→open (retry_after)", pc)
	}
	ec := env.obs.changesFor(pool.ScopeExit, "x0", "")
	if len(ec) != 1 || ec[0].To != breaker.Open || !ec[0].Parked || ec[0].Origin != "" {
		t.Errorf("exit state changes = %+v, want one parking", ec)
	}
}

func TestTransportObserverOriginStateChange(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 3))
	guardTrip(t, env, trURLA, trOriginA, testkit.Reply{Status: 503})
	oc := env.obs.changesFor(pool.ScopeOrigin, "", trOriginA)
	if len(oc) != 1 || oc[0].Exit != nil || oc[0].To != breaker.Open {
		t.Fatalf("origin state changes = %+v, want one closed→open without an exit", oc)
	}
}

// TestVerdictFromResponse: a caller can learn how a response was classified, including failures
// that arrive as responses (a 429, a challenge page, a 407 from the proxy).
func TestVerdictFromResponse(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reply    testkit.Reply
		class    pool.Class
		outcome  pool.Outcome
		detector string
	}{
		{"ok", testkit.Reply{Body: "fine"}, pool.ClassOK, pool.Success, ""},
		{"429", testkit.Reply{Status: 429, Header: testkit.RetryAfter(5)}, pool.ClassRateLimited, pool.Transient, ""},
		{"challenge", testkit.Reply{Status: 403, Header: http.Header{"Cf-Mitigated": {"challenge"}}}, pool.ClassBlocked, pool.Transient, "cloudflare"},
		{"407", testkit.Reply{Status: 407}, pool.ClassProxyAuth, pool.Permanent, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestPoolEnv(t, testkit.Exits("x", 1))
			env.base.On("*", "*", tc.reply)
			resp, _, err := env.do(t, nil, trURLA)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			v, ok := transport.VerdictFromResponse(resp)
			if !ok || v.Class != tc.class || v.Outcome != tc.outcome || v.Detector != tc.detector {
				t.Errorf("VerdictFromResponse = %+v, %v; want class %s, outcome %v, detector %q", v, ok, tc.class, tc.outcome, tc.detector)
			}
		})
	}
	if _, ok := transport.VerdictFromResponse(&http.Response{Request: httptest.NewRequest("GET", trURLA, nil)}); ok {
		t.Errorf("VerdictFromResponse of a response that did not come through a Transport: ok = true")
	}
}

// cancelAwareBase hangs until the request's context ends or its deprecated Cancel channel closes,
// as net/http's Transport does, and reports which.
type cancelAwareBase struct{}

func (cancelAwareBase) RoundTrip(r *http.Request) (*http.Response, error) {
	select {
	case <-r.Context().Done():
		return nil, r.Context().Err()
	case <-r.Cancel:
		return nil, errors.New("net/http: request canceled")
	}
}

// Regression: http.Client.Timeout, for a RoundTripper net/http does not recognise, closes
// Request.Cancel as well as ending the context; when the channel won, the caller's timeout was
// blamed on the exit.
func TestClientTimeoutIsTheCallers(t *testing.T) {
	tr, err := build(pool.WithExits(testkit.Exits("x", 1)...), transport.WithBase(cancelAwareBase{}),
		transport.WithHeaderTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	c := &http.Client{Transport: tr, Timeout: 20 * time.Millisecond}
	for i := range 20 {
		if _, err := c.Get(trURLA); err == nil {
			t.Fatalf("request %d: want the client's timeout", i)
		}
	}
	for _, p := range tr.Pool().Snapshot().Pairs {
		if p.Breaker.FailuresInWindow > 0 || p.Breaker.Trips > 0 {
			t.Errorf("pair %s/%s counted the client's timeouts: %+v", p.Exit, p.Origin, p.Breaker)
		}
	}
}
