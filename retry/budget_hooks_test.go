package retry_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

// CheckRetry deposits for first attempts only (PrepareRetry marks the retries), withdraws for
// each retry it allows, and gives up with ErrBudgetSpent when the budget is empty.
func TestCheckRetryBudget(t *testing.T) {
	b := newBudget(t, retry.BudgetSettings{MinRetriesPerSec: -1, PercentCanRetry: 0.5, Clock: clock.NewFake(t0)})
	p := newPolicy(t, retry.Settings{Budget: b})
	failed := func() *http.Response { return foreign(http.StatusServiceUnavailable, nil) }

	// Request 1: its first attempt deposits half a retry, not enough.
	ctx1 := transport.ContextWithRetries(context.Background())
	ok, err := p.CheckRetry(ctx1, failed(), nil)
	if ok || !errors.Is(err, retry.ErrBudgetSpent) {
		t.Fatalf("CheckRetry(first of 1) = %v, %v; want a give-up for the budget", ok, err)
	}
	var gu *retry.GiveUpError
	if !errors.As(err, &gu) || gu.Budget != b || gu.Wait != 0 || gu.Origin != "shop.example" {
		t.Errorf("error = %+v, want a *GiveUpError naming the budget and the origin", err)
	}
	if msg, want := err.Error(), "retry: giving up on shop.example: retry budget spent (50% of requests + no floor over 10s): "; !strings.HasPrefix(msg, want) {
		t.Errorf("error = %q, want it to start %q", msg, want)
	}
	var re *retry.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("errors.As(ResponseError) = %+v, want the 503", re)
	}

	// Request 2: its first attempt brings the budget to one retry, which it takes.
	ctx2 := transport.ContextWithRetries(context.Background())
	if ok, err := p.CheckRetry(ctx2, failed(), nil); !ok {
		t.Fatalf("CheckRetry(first of 2) = %v, %v; want a retry", ok, err)
	}
	req, _ := http.NewRequestWithContext(ctx2, "GET", "http://shop.example/", nil)
	if err := p.PrepareRetry(req); err != nil {
		t.Fatalf("PrepareRetry = %v", err)
	}
	// Its retry deposits nothing: the budget stays empty.
	if ok, err := p.CheckRetry(req.Context(), failed(), nil); ok || !errors.Is(err, retry.ErrBudgetSpent) {
		t.Errorf("CheckRetry(retry of 2) = %v, %v; want a give-up for the budget", ok, err)
	}
	// A second call for the same attempt (go-retryablehttp's, after a ResponseHandler's error)
	// deposits nothing either; a success is not retried and touches no retry.
	ctx3 := transport.ContextWithRetries(context.Background())
	if ok, _ := p.CheckRetry(ctx3, foreign(http.StatusOK, nil), nil); ok {
		t.Errorf("CheckRetry(200) = true, want no retry")
	}
	if ok, _ := p.CheckRetry(ctx3, foreign(http.StatusOK, nil), errors.New("handler: bad body")); ok {
		t.Errorf("CheckRetry(200, handler error) = true, want no retry")
	}
	if got, want := b.Stats(), (retry.BudgetStats{Deposits: 3, Retries: 1, Refused: 2}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	// Without a budget, PrepareRetry leaves the request alone.
	plain := newPolicy(t, retry.Settings{})
	req, _ = http.NewRequestWithContext(ctx2, "GET", "http://shop.example/", nil)
	before := req.Context()
	if err := plain.PrepareRetry(req); err != nil || req.Context() != before {
		t.Errorf("PrepareRetry without a budget = %v, changed the context: %v", err, req.Context() != before)
	}
}

// budgetWorld is three healthy proxies in front of an origin that answers 503 to everything, with
// breakers that never trip and no origin guard, so that every retry goes out to the origin: what
// bounds the retries is the client's RetryMax, or the budget.
func budgetWorld(t *testing.T) (*world, *transport.Transport) {
	t.Helper()
	w := newWorld(t, false, nil, []testkit.ExitSpec{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		func(rw http.ResponseWriter, r *http.Request, via string) int {
			rw.WriteHeader(http.StatusServiceUnavailable)
			return http.StatusServiceUnavailable
		})
	never := breaker.Settings{FailureThreshold: breaker.MaxFailureThreshold}
	tr := w.transportWith(t, []pool.Option{pool.WithPairSettings(never), pool.WithExitSettings(never),
		pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true})})
	return w, tr
}

// A real go-retryablehttp client through real proxies to an origin that fails everything: with a
// budget of 20 % plus 1 retry/s over 2 s, 20 requests make 26 attempts at the origin (20 first
// attempts, 4 retries earned by them, 2 from the floor), where RetryMax 5 alone lets them make 120.
func TestRetryablehttpBudgetStopsRetryStorm(t *testing.T) {
	const (
		requests = 20
		retryMax = 5
	)
	run := func(t *testing.T, b *retry.Budget) (served int, errs []error) {
		w, tr := budgetWorld(t)
		c := client(tr, newPolicy(t, retry.Settings{Budget: b}), retryMax, time.Second)
		for range requests {
			_, _, err := get(transport.ContextWithRetries(context.Background()), c, w.origin.URL+"/")
			errs = append(errs, err)
		}
		return len(w.served()), errs
	}
	t.Run("RetryMax alone", func(t *testing.T) {
		if served, _ := run(t, nil); served != requests*(retryMax+1) {
			t.Errorf("origin served %d requests, want %d: RetryMax %d for each of %d", served, requests*(retryMax+1), retryMax, requests)
		}
	})
	t.Run("budget", func(t *testing.T) {
		// The budget's own fake clock stands still: nothing leaves its window.
		b := newBudget(t, retry.BudgetSettings{TTL: 2 * time.Second, MinRetriesPerSec: 1, PercentCanRetry: 0.2, Clock: clock.NewFake(t0)})
		served, errs := run(t, b)
		if want := requests + requests/5 + 2; served != want {
			t.Errorf("origin served %d requests, want %d: %d first attempts, %d retries they earned, 2 from the floor",
				served, want, requests, requests/5)
		}
		for i, err := range errs {
			if !errors.Is(err, retry.ErrBudgetSpent) || !strings.Contains(err.Error(), "retry budget spent (20% of requests + 1 retries/s over 2s)") {
				t.Errorf("request %d: error = %v, want the budget's give-up", i, err)
			}
		}
		if got, want := b.Stats(), (retry.BudgetStats{Deposits: requests, Retries: requests/5 + 2, Refused: requests}); got != want {
			t.Errorf("Stats() = %+v, want %+v", got, want)
		}
	})
}
