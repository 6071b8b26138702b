package transport_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"github.com/proxybreaker/proxybreaker/transport"
)

const (
	gateURLA    = "http://a.example/"
	gateURLB    = "http://b.example/"
	gateOriginA = "a.example"
)

// gateRecorder records Throttled events.
type gateRecorder struct {
	transport.NopObserver
	mu     sync.Mutex
	events []pool.Throttle
}

func (r *gateRecorder) Throttled(_ context.Context, th pool.Throttle) {
	r.mu.Lock()
	r.events = append(r.events, th)
	r.mu.Unlock()
}

func (r *gateRecorder) all() []pool.Throttle {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]pool.Throttle(nil), r.events...)
}

// gateAwaitTimer waits (in real time, bounded) until a request has started waiting on the fake
// clock: a hand-off between goroutines, not a wait for a breaker's state.
func gateAwaitTimer(t *testing.T, env *scriptedEnv) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for env.clock.Timers() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no request started waiting for a token within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func gateThrottled(t *testing.T, err error, scope string) *pool.ThrottledError {
	t.Helper()
	var te *pool.ThrottledError
	if !errors.As(err, &te) || !errors.Is(err, pool.ErrThrottled) {
		t.Fatalf("err = %v, want a *ThrottledError", err)
	}
	if te.Scope.String() != scope {
		t.Errorf("ThrottledError.Scope = %q, want %q", te.Scope, scope)
	}
	return te
}

// TestGateSkipsExitsWithoutTokens: an exit whose bucket is empty is not ready; the picker takes
// one that has a token instead of waiting, and no token is lost on exits it looked at and passed.
func TestGateSkipsExitsWithoutTokens(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 3), pool.WithSelection(pool.Random),
		pool.WithRateLimits(ratelimit.Limits{PerExit: ratelimit.PerSecond(1, 1), FailFast: true}))
	used := map[string]int{}
	for i := range 3 {
		label, _ := env.mustGet(t, nil, gateURLA)
		used[label]++
		if used[label] > 1 {
			t.Fatalf("request %d went through %s a second time while other exits had tokens", i, label)
		}
	}
	// Three tokens, three requests: had a peek taken any, fewer would have gone.
	_, _, err := env.get(t, nil, gateURLA)
	te := gateThrottled(t, err, "exit")
	if te.RetryIn != time.Second {
		t.Errorf("RetryIn = %v, want 1s (the next token)", te.RetryIn)
	}
	env.clock.Advance(time.Second)
	for range 3 {
		env.mustGet(t, nil, gateURLA)
	}
}

// TestGateWaitsForTheSoonestToken: with every bucket empty, a request waits for the exit whose
// token comes first, on the pool's clock, and reports the wait.
func TestGateWaitsForTheSoonestToken(t *testing.T) {
	rec := &gateRecorder{}
	env := newTestPoolEnv(t, testkit.Exits("x", 2), transport.WithObserver(rec),
		pool.WithRateLimits(ratelimit.Limits{
			PerExit: ratelimit.Every(3 * time.Second),
			Exits:   map[string]ratelimit.Limit{"x1": ratelimit.Every(time.Second)},
		}))
	env.mustGet(t, nil, gateURLA)
	env.mustGet(t, nil, gateURLA) // both exits drained
	type result struct {
		label string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		label, _, err := env.get(t, nil, gateURLA)
		done <- result{label, err}
	}()
	gateAwaitTimer(t, env)
	select {
	case r := <-done:
		t.Fatalf("request returned before any token was due: %+v", r)
	default:
	}
	env.clock.Advance(time.Second)
	r := <-done
	if r.err != nil || r.label != "x1" {
		t.Fatalf("after 1s: %s, %v; want x1 (its token comes first)", r.label, r.err)
	}
	ev := rec.all()
	if len(ev) != 1 || ev[0].Scope != pool.ScopeExit || ev[0].Waited != time.Second || ev[0].Refused || ev[0].Exit.Label() != "x1" {
		t.Errorf("throttle events = %+v, want one: exit scope, waited 1s, through x1", ev)
	}
}

// TestGateDeadlineAndCancel: a request whose deadline comes before the next token is refused at
// once; a waiting request whose caller gives up returns, and leaves the token for the next one.
func TestGateDeadlineAndCancel(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 1),
		pool.WithRateLimits(ratelimit.Limits{PerExit: ratelimit.Every(10 * time.Second)}))
	env.mustGet(t, nil, gateURLA)

	// The fake clock's deadline check: a context whose deadline is before the token.
	ctx, cancel := context.WithDeadline(context.Background(), env.clock.Now().Add(5*time.Second))
	_, _, err := env.get(t, ctx, gateURLA)
	cancel()
	if te := gateThrottled(t, err, "exit"); te.RetryIn != 10*time.Second {
		t.Errorf("RetryIn = %v, want 10s", te.RetryIn)
	}
	if n := env.clock.Timers(); n != 0 {
		t.Errorf("%d timers left after a refused request", n)
	}

	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := env.get(t, ctx, gateURLA)
		done <- err
	}()
	gateAwaitTimer(t, env)
	cancel()
	err = <-done
	gateThrottled(t, err, "exit")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want it to wrap context.Canceled", err)
	}
	if n := env.clock.Timers(); n != 0 {
		t.Errorf("%d timers left after a cancelled wait", n)
	}
	env.clock.Advance(10 * time.Second)
	if _, _, err := env.get(t, nil, gateURLA); err != nil {
		t.Errorf("after the cancelled wait, the next token was lost: %v", err)
	}
}

// TestGateOriginCapAcrossExits: the per-origin bucket holds for the origin whatever the exit, and
// leaves other origins alone.
func TestGateOriginCapAcrossExits(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 5),
		pool.WithRateLimits(ratelimit.Limits{PerOrigin: ratelimit.PerSecond(1, 2), FailFast: true}))
	env.mustGet(t, nil, gateURLA)
	env.mustGet(t, nil, gateURLA)
	_, _, err := env.get(t, nil, gateURLA)
	gateThrottled(t, err, "origin")
	for range 2 {
		env.mustGet(t, nil, gateURLB) // b.example has its own bucket
	}
	env.clock.Advance(time.Second)
	env.mustGet(t, nil, gateURLA)
}

// TestGateAIMD: a 429 halves the pair's pace from its ceiling; each success adds a twentieth of it
// back; back at the ceiling the pair loses its bucket. Other pairs are untouched.
func TestGateAIMD(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 1), pool.WithRateLimits(ratelimit.Limits{
		PerExit: ratelimit.PerSecond(100, 100),
	}))
	env.base.On("x0", gateOriginA, testkit.Reply{Status: 429})
	env.mustGet(t, nil, gateURLA) // one 429 without Retry-After: one failure of three, a cut
	env.base.Reset()
	p, ok := env.pair("x0", gateOriginA)
	if !ok || p.Rate != 50 {
		t.Fatalf("pair rate after a 429 = %v (held %v), want 50 (half the exit's 100/s)", p.Rate, ok)
	}
	env.clock.Advance(time.Second)
	env.mustGet(t, nil, gateURLA)
	if p, _ := env.pair("x0", gateOriginA); p.Rate != 55 {
		t.Errorf("pair rate after a success = %v, want 55 (+ 100/20)", p.Rate)
	}
	for range 9 {
		env.clock.Advance(time.Second)
		env.mustGet(t, nil, gateURLA)
	}
	if p, _ := env.pair("x0", gateOriginA); p.Rate != 0 {
		t.Errorf("pair rate after growing back = %v, want 0 (no bucket of its own)", p.Rate)
	}
	if _, ok := env.pair("x0", "b.example"); ok {
		t.Error("b.example's pair was touched")
	}
}

// TestGateOpenPairTakesNoToken: a pair the breakers hold OPEN is never asked for a token, so its
// exit's bucket stays full for the origins it still serves.
func TestGateOpenPairTakesNoToken(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 2), pool.WithRateLimits(ratelimit.Limits{
		Exits:    map[string]ratelimit.Limit{"x0": ratelimit.Every(time.Minute)},
		FailFast: true,
	}))
	env.base.On("x0", gateOriginA, testkit.Reply{Status: 429, Header: testkit.RetryAfter(600)})
	for env.pairState("x0", gateOriginA).String() != "open" {
		env.mustGet(t, nil, gateURLA) // until x0 takes one and trips on the 429
	}
	env.clock.Advance(time.Minute) // x0's bucket refills
	for range 5 {
		if label, _ := env.mustGet(t, nil, gateURLA); label != "x1" {
			t.Fatalf("a request for a.example went through %s, whose pair is OPEN", label)
		}
	}
	// x0 kept its one token for b.example.
	if label, _ := env.mustGet(t, nil, gateURLB); label != "x0" && label != "x1" {
		t.Fatalf("b.example: %s", label)
	}
	got := map[string]int{}
	for range 20 {
		label, _, err := env.get(t, nil, gateURLB)
		if err == nil {
			got[label]++
		}
	}
	if got["x0"] > 1 {
		t.Errorf("x0 served b.example %d times within a minute, want at most its one token", got["x0"])
	}
}
