package retry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

const challengePage = `<!DOCTYPE html><html><head><title>Just a moment...</title></head>
<body><script src="/cdn-cgi/challenge-platform/h/b/orchestrate/jsch/v1"></script></body></html>`

// Retries move to another exit, one that has not failed the request, whatever way the exits
// fail: 407, refused, hanging, 429 from the origin for one exit, a challenge page for another.
func TestRetryablehttpMovesToHealthyExit(t *testing.T) {
	w := newWorld(t, false, nil, []testkit.ExitSpec{
		{Name: "ok"},
		{Name: "auth", User: "bob", WrongPass: true},
		{Name: "dead", Dead: true},
		{Name: "hang", Hang: true},
		{Name: "capped"},
		{Name: "waf"},
	}, func(rw http.ResponseWriter, r *http.Request, via string) int {
		switch via {
		case "capped":
			rw.Header().Set("Retry-After", "30")
			rw.WriteHeader(http.StatusTooManyRequests)
			return http.StatusTooManyRequests
		case "waf":
			rw.Header().Set("Content-Type", "text/html")
			rw.WriteHeader(http.StatusForbidden)
			io.WriteString(rw, challengePage)
			return http.StatusForbidden
		}
		return 0
	})
	obs := newAttempts()
	tr := w.transport(t, transport.WithHeaderTimeout(500*time.Millisecond), transport.WithObserver(obs))
	p := newPolicy(t, retry.Settings{})
	c := client(tr, p, 8, 30*time.Second)

	const n = 20
	retried := 0
	for i := range n {
		ctx := context.WithValue(transport.ContextWithRetries(context.Background()), reqKey{}, i)
		body, exit, err := get(ctx, c, w.origin.URL+"/page")
		if err != nil || body != "via ok" || exit != "ok" {
			t.Fatalf("request %d = %q via %q, %v; want \"via ok\" via ok", i, body, exit, err)
		}
		exits, classes := obs.of(i)
		if len(exits) == 0 || exits[len(exits)-1] != "ok" {
			t.Fatalf("request %d went through %v, want it to end at ok", i, exits)
		}
		seen := map[string]bool{}
		for _, e := range exits {
			if seen[e] {
				t.Errorf("request %d went through %s twice: %v (%v); want each retry through another exit", i, e, exits, classes)
			}
			seen[e] = true
		}
		if len(exits) > 1 {
			retried++
		}
		// One memory per logical request: the failures the policy recorded sit in the Retries the
		// pool read to steer each retry away, one per failed attempt the transport made.
		var recorded []string
		for _, f := range transport.RetriesFromContext(ctx).Failures() {
			recorded = append(recorded, f.Exit)
		}
		if want := exits[:len(exits)-1]; fmt.Sprint(recorded) != fmt.Sprint(want) {
			t.Errorf("request %d: Retries.Failures() via %v, want %v (%v)", i, recorded, want, classes)
		}
	}
	if retried == 0 {
		t.Errorf("no request needed a retry: the failing exits were never picked")
	}
	for _, s := range w.served() {
		if s.via == "auth" || s.via == "hang" || s.via == "dead" {
			t.Errorf("the origin answered a request via %s, which should never reach it", s.via)
		}
	}
}

// timedPrepare wraps p.PrepareRetry to record how long each call waited on clk.
func timedPrepare(clk *clock.Fake, p *retry.Policy, waits *[]time.Duration) func(*http.Request) error {
	var mu sync.Mutex
	return func(r *http.Request) error {
		start := clk.Now()
		err := p.PrepareRetry(r)
		mu.Lock()
		*waits = append(*waits, clk.Now().Sub(start))
		mu.Unlock()
		return err
	}
}

// The retry after a 429 with Retry-After waits exactly until the pair's breaker lets a probe
// through (the soonest probe, which the Retry-After set), measured on the fake clock.
func TestRetryablehttpHonoursRetryAfter(t *testing.T) {
	const step = 100 * time.Millisecond
	for _, tc := range []struct {
		name       string
		retryAfter string // what the origin sends
		want       time.Duration
	}{
		{"seconds", "7", 7 * time.Second},
		{"http-date", t0.Add(9 * time.Second).Format(http.TimeFormat), 9 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			var answered atomic.Bool
			w := newWorld(t, false, clk, []testkit.ExitSpec{{Name: "a"}}, func(rw http.ResponseWriter, r *http.Request, via string) int {
				if !answered.Swap(true) {
					rw.Header().Set("Retry-After", tc.retryAfter)
					rw.WriteHeader(http.StatusTooManyRequests)
					return http.StatusTooManyRequests
				}
				return 0
			})
			tr := w.transportWith(t, []pool.Option{pool.WithPairSettings(breaker.Settings{BaseCooldown: time.Second, Jitter: -1})})
			p := newPolicy(t, retry.Settings{Clock: clk})
			c := client(tr, p, 4, time.Minute)
			var waits []time.Duration
			c.PrepareRetry = timedPrepare(clk, p, &waits)

			body, _, err := getDriven(t, clk, step, c, w.origin.URL+"/")
			if err != nil || body != "via a" {
				t.Fatalf("Do = %q, %v; want \"via a\"", body, err)
			}
			s := w.served()
			if len(s) != 2 || s[0].status != 429 || s[1].status != 200 {
				t.Fatalf("origin served %+v, want a 429 then a 200", s)
			}
			if got := s[1].at.Sub(s[0].at); got < tc.want || got > tc.want+step {
				t.Errorf("the retry reached the origin %v after the 429, want %v (Retry-After)", got, tc.want)
			}
			// Attempt 2 found no exit ready and waited for the soonest probe; nothing else waited.
			var total time.Duration
			for _, d := range waits {
				total += d
			}
			if total < tc.want || total > tc.want+step {
				t.Errorf("PrepareRetry waited %v in all (%v), want %v", total, waits, tc.want)
			}
		})
	}
}

// The soonest probe: a challenge page trips the pair (threshold 1), the retry finds no exit
// ready, waits until the pair turns HALF_OPEN and the probe succeeds.
func TestRetryablehttpWaitsForSoonestProbe(t *testing.T) {
	const step = 100 * time.Millisecond
	clk := clock.NewFake(t0)
	var answered atomic.Bool
	w := newWorld(t, false, clk, []testkit.ExitSpec{{Name: "a"}}, func(rw http.ResponseWriter, r *http.Request, via string) int {
		if !answered.Swap(true) {
			rw.Header().Set("Content-Type", "text/html")
			rw.WriteHeader(http.StatusForbidden)
			io.WriteString(rw, challengePage)
			return http.StatusForbidden
		}
		return 0
	})
	tr := w.transportWith(t, []pool.Option{pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, BaseCooldown: 5 * time.Second, Jitter: -1})})
	p := newPolicy(t, retry.Settings{Clock: clk})
	c := client(tr, p, 4, time.Minute)
	var backoffs []time.Duration
	c.Backoff = func(min, max time.Duration, n int, resp *http.Response) time.Duration {
		d := p.Backoff(min, max, n, resp)
		backoffs = append(backoffs, d)
		return d
	}
	var waits []time.Duration
	c.PrepareRetry = timedPrepare(clk, p, &waits)

	body, _, err := getDriven(t, clk, step, c, w.origin.URL+"/")
	if err != nil || body != "via a" {
		t.Fatalf("Do = %q, %v; want \"via a\"", body, err)
	}
	s := w.served()
	if len(s) != 2 || s[1].at.Sub(s[0].at) < 5*time.Second {
		t.Fatalf("origin served %+v, want the probe at least 5s after the challenge", s)
	}
	// Two retries: one right after the challenge (another exit could have been ready), one after
	// the refusal, which waited out the pair's OPEN window.
	if len(waits) != 2 || waits[0] != 0 || waits[1] < 5*time.Second || waits[1] > 5*time.Second+step {
		t.Errorf("PrepareRetry waited %v, want [0 5s]", waits)
	}
	for i, b := range backoffs {
		if b > 2*time.Millisecond<<i {
			t.Errorf("Backoff %d = %v, want the client's short exponential (RetryWaitMin 1ms)", i, b)
		}
	}
}

// With WaitRetryAfter, the retry waits for the Retry-After even though another exit is ready;
// without it, the retry moves to that exit at once.
func TestRetryablehttpWaitRetryAfter(t *testing.T) {
	const step = 100 * time.Millisecond
	for _, waitRA := range []bool{false, true} {
		t.Run(fmt.Sprintf("WaitRetryAfter=%v", waitRA), func(t *testing.T) {
			clk := clock.NewFake(t0)
			w := newWorld(t, false, clk, []testkit.ExitSpec{{Name: "capped"}, {Name: "ok"}}, func(rw http.ResponseWriter, r *http.Request, via string) int {
				if via == "capped" {
					rw.Header().Set("Retry-After", "7")
					rw.WriteHeader(http.StatusTooManyRequests)
					return http.StatusTooManyRequests
				}
				return 0
			})
			tr := w.transport(t)
			p := newPolicy(t, retry.Settings{Clock: clk, WaitRetryAfter: waitRA})
			c := client(tr, p, 4, time.Minute)
			for i := 0; ; i++ { // until a request meets capped first (picks are random)
				if i == 64 {
					t.Fatal("64 requests never went through capped")
				}
				start, before := clk.Now(), len(w.served())
				body, exit, err := getDriven(t, clk, step, c, w.origin.URL+"/")
				if err != nil || exit != "ok" {
					t.Fatalf("Do = %q via %q, %v; want via ok", body, exit, err)
				}
				s := w.served()[before:]
				if len(s) != 2 || s[0].via != "capped" {
					continue
				}
				took := clk.Now().Sub(start)
				if want := time.Duration(0); !waitRA && took != want {
					t.Errorf("retry through ok waited %v, want %v: another exit was ready", took, want)
				}
				if want := 7 * time.Second; waitRA && (took < want || took > want+step) {
					t.Errorf("retry through ok waited %v, want %v (Retry-After)", took, want)
				}
				return
			}
		})
	}
}

// A pool whose every exit the proxies refuse (407) is tried once per exit, then the retries stop
// with a clear error at once — not after the client's RetryMax, nor after waiting out a park —
// and errors.As finds the typed errors through retryablehttp's wrapping.
func TestRetryablehttpStopsOn407Pool(t *testing.T) {
	for _, tlsOrigin := range []bool{false, true} {
		name := "http"
		if tlsOrigin {
			name = "https" // CONNECT answered 407: an *AttemptError wrapping a *ProxyConnectError
		}
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tlsOrigin, nil, []testkit.ExitSpec{
				{Name: "a", User: "alice", WrongPass: true},
				{Name: "b", User: "bob", WrongPass: true},
				{Name: "c", User: "carol", WrongPass: true},
			}, nil)
			tr := w.transport(t)
			p := newPolicy(t, retry.Settings{})
			c := client(tr, p, 10, 30*time.Second)
			ctx := transport.ContextWithRetries(context.Background())
			_, _, err := get(ctx, c, w.origin.URL+"/")
			// At once: no refusal was ever noted as a wait for PrepareRetry (the one refusal was
			// beyond the cap, and gave up); the attempt count is checked below.
			if nb := transport.RetriesFromContext(ctx).NotBefore(); !nb.IsZero() {
				t.Errorf("Retries.NotBefore() = %v, want no wait noted: give up at once", nb)
			}
			if err == nil {
				t.Fatal("Do = nil error, want the pool's refusal")
			}
			msg := err.Error()
			t.Logf("error: %s", msg)
			for _, want := range []string{"giving up after 4 attempt(s)", "retry: giving up on", "proxy_auth via a", "proxy_auth via b",
				"proxy_auth via c", "every exit tried failed for good", "no healthy exit"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			for _, secret := range []string{"wrong", "right"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q shows a password", msg)
				}
			}
			var (
				ge *retry.GiveUpError
				nh *pool.NoHealthyExitError
			)
			if !errors.As(err, &ge) || !errors.As(err, &nh) || !errors.Is(err, pool.ErrNoHealthyExit) {
				t.Fatalf("errors.As(%v): GiveUpError %v, NoHealthyExitError %v; want both", err, ge, nh)
			}
			if nh.Exits != 3 || nh.RetryIn < 10*time.Minute || len(ge.Failures) != 3 {
				t.Errorf("NoHealthyExitError = %+v, GiveUpError.Failures = %+v; want 3 exits parked for minutes, 3 failures", nh, ge.Failures)
			}
			if tlsOrigin {
				var pce *transport.ProxyConnectError
				var ae *transport.AttemptError
				if !errors.As(err, &pce) || pce.StatusCode != 407 || !errors.As(err, &ae) || ae.Verdict.Class != pool.ClassProxyAuth {
					t.Errorf("errors.As: ProxyConnectError %+v, AttemptError %+v; want a CONNECT 407 classified proxy_auth", pce, ae)
				}
			} else {
				var re *retry.ResponseError
				if !errors.As(err, &re) || re.StatusCode != 407 || re.Verdict.Class != pool.ClassProxyAuth {
					t.Errorf("errors.As: ResponseError %+v; want a 407 classified proxy_auth", re)
				}
			}
			for label, px := range w.Proxies {
				if got := px.Rejected(); got != 1 {
					t.Errorf("proxy %s refused %d requests, want 1: each exit tried once", label, got)
				}
			}
			if s := w.served(); len(s) != 0 {
				t.Errorf("origin served %+v, want nothing", s)
			}
		})
	}
}

// A soonest probe beyond the client's RetryWaitMax: give up at once, saying when to come back.
func TestRetryablehttpGivesUpBeyondMaxWait(t *testing.T) {
	clk := clock.NewFake(t0)
	w := newWorld(t, false, clk, []testkit.ExitSpec{{Name: "a"}}, func(rw http.ResponseWriter, r *http.Request, via string) int {
		rw.Header().Set("Retry-After", "60")
		rw.WriteHeader(http.StatusTooManyRequests)
		return http.StatusTooManyRequests
	})
	tr := w.transportWith(t, []pool.Option{pool.WithPairSettings(breaker.Settings{Jitter: -1})})
	p := newPolicy(t, retry.Settings{Clock: clk})
	c := client(tr, p, 10, 2*time.Second)
	_, _, err := get(transport.ContextWithRetries(context.Background()), c, w.origin.URL+"/")
	var ge *retry.GiveUpError
	var nh *pool.NoHealthyExitError
	if !errors.As(err, &ge) || !errors.As(err, &nh) {
		t.Fatalf("Do = %v, want a GiveUpError wrapping a NoHealthyExitError", err)
	}
	if ge.Wait != time.Minute || ge.MaxWait != 2*time.Second || nh.RetryIn != time.Minute {
		t.Errorf("GiveUpError = %+v, NoHealthyExitError = %+v; want a 1m wait against a 2s cap", ge, nh)
	}
	if got := clk.Now().Sub(t0); got != 0 {
		t.Errorf("fake clock moved %v, want no wait", got)
	}
	if s := w.served(); len(s) != 1 {
		t.Errorf("origin served %d requests, want 1", len(s))
	}
}

// Outcomes that say nothing about the exit are not retried: the client returns them as they are.
func TestRetryablehttpStopsOnNeutral(t *testing.T) {
	w := newWorld(t, false, nil, []testkit.ExitSpec{{Name: "a"}, {Name: "b"}}, func(rw http.ResponseWriter, r *http.Request, via string) int {
		switch r.URL.Path {
		case "/bug":
			rw.WriteHeader(http.StatusInternalServerError)
			return http.StatusInternalServerError
		case "/missing":
			rw.WriteHeader(http.StatusNotFound)
			return http.StatusNotFound
		}
		return 0
	})
	tr := w.transport(t)
	p := newPolicy(t, retry.Settings{})
	c := client(tr, p, 4, time.Second)
	for _, path := range []string{"/bug", "/missing"} {
		before := len(w.served())
		req, _ := retryablehttp.NewRequestWithContext(transport.ContextWithRetries(context.Background()), "GET", w.origin.URL+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("Do(%s) = %v, want the response", path, err)
		}
		resp.Body.Close()
		if n := len(w.served()) - before; n != 1 {
			t.Errorf("Do(%s) reached the origin %d times, want once", path, n)
		}
	}
}

// The caller's cancellation ends a wait for the soonest probe.
func TestRetryablehttpCancelledWhileWaiting(t *testing.T) {
	clk := clock.NewFake(t0)
	w := newWorld(t, false, clk, []testkit.ExitSpec{{Name: "a"}}, func(rw http.ResponseWriter, r *http.Request, via string) int {
		rw.Header().Set("Retry-After", "20")
		rw.WriteHeader(http.StatusTooManyRequests)
		return http.StatusTooManyRequests
	})
	tr := w.transport(t)
	p := newPolicy(t, retry.Settings{Clock: clk})
	c := client(tr, p, 4, time.Minute)
	ctx, cancel := context.WithCancel(transport.ContextWithRetries(context.Background()))
	done := make(chan error, 1)
	go func() {
		_, _, err := get(ctx, c, w.origin.URL+"/")
		done <- err
	}()
	waitTimers(t, clk, 1) // PrepareRetry waits for the soonest probe
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Do = %v, want context.Canceled", err)
	}
}
