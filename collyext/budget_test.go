package collyext_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/collyext"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
)

// A real Colly collector through real proxies to an origin that fails everything: with a budget
// of 20 % plus 1 retry/s over 2 s, 20 pages make 26 fetches at the origin (20 first fetches, 4
// re-queues earned by them, 2 from the floor), where Settings.Retries 5 alone lets them make 120.
// Each page is given up with a *GiveUpError that says the budget is spent.
func TestRetryOnErrorBudgetStopsRetryStorm(t *testing.T) {
	const (
		pages   = 20
		retries = 5
	)
	run := func(t *testing.T, b *retry.Budget) (hits int, errs []error) {
		s := newSite(t, pages, false)
		var n atomic.Int32
		s.handle = func(w http.ResponseWriter, r *http.Request, via string) bool {
			n.Add(1)
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		// Breakers that never trip and no origin guard: every re-queue goes out to the origin.
		never := breaker.Settings{FailureThreshold: breaker.MaxFailureThreshold}
		popts := []pool.Option{pool.WithPairSettings(never), pool.WithExitSettings(never),
			pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true})}
		c, ext, f := setup(t, s, []testkit.ExitSpec{{Name: "a"}, {Name: "b"}, {Name: "c"}},
			collyext.Settings{Retries: retries, MinDelay: time.Millisecond, Budget: b}, popts)
		for i := range pages {
			c.Visit(s.url(i)) // sync: re-queues run inside, so each page is done when Visit returns
		}
		if n := ext.Tracked(); n != 0 {
			t.Errorf("Tracked() = %d, want 0", n)
		}
		errs, _ = f.get()
		if len(errs) != pages {
			t.Errorf("given up %d pages, want %d", len(errs), pages)
		}
		return int(n.Load()), errs
	}
	t.Run("Retries alone", func(t *testing.T) {
		if hits, _ := run(t, nil); hits != pages*(retries+1) {
			t.Errorf("origin saw %d requests, want %d: Retries %d for each of %d pages", hits, pages*(retries+1), retries, pages)
		}
	})
	t.Run("budget", func(t *testing.T) {
		// The budget's own fake clock stands still: nothing leaves its window.
		b, err := retry.NewBudget(retry.BudgetSettings{TTL: 2 * time.Second, MinRetriesPerSec: 1, PercentCanRetry: 0.2, Clock: clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))})
		if err != nil {
			t.Fatal(err)
		}
		hits, errs := run(t, b)
		if want := pages + pages/5 + 2; hits != want {
			t.Errorf("origin saw %d requests, want %d: %d first fetches, %d re-queues they earned, 2 from the floor", hits, want, pages, pages/5)
		}
		for i, err := range errs {
			var gu *collyext.GiveUpError
			if !errors.As(err, &gu) || gu.Budget != b || !errors.Is(err, retry.ErrBudgetSpent) ||
				!strings.Contains(err.Error(), "retry budget spent (20% of requests + 1 retries/s over 2s)") {
				t.Errorf("page %d: given up with %v, want a *GiveUpError for the budget", i, err)
			}
		}
		if got, want := b.Stats(), (retry.BudgetStats{Deposits: pages, Retries: pages/5 + 2, Refused: pages}); got != want {
			t.Errorf("Stats() = %+v, want %+v", got, want)
		}
	})
}
