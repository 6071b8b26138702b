package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
)

// budgetMember is a member whose tier 0 costs 1 a request, with a spend budget of budget a day
// kept by the fleet.
func budgetMember(t *testing.T, d deployment, i int, name string, budget float64) *member {
	return d.member(t, i, name, memberConfig{
		exits: 2,
		opts: []pool.Option{
			pool.WithTierCost(0, pool.Cost{PerRequest: 1}),
			pool.WithTierBudget(0, pool.Budget{Spend: budget, Period: 24 * time.Hour}),
		},
		limits: func(st *redisstore.Store) pool.Option { return pool.WithBudgetSource(st.BudgetSource) },
	})
}

// TestFleetSharesTierBudget: two members send as fast as they can until their one tier has spent
// its budget of 60. Together they stop at the limit — not at twice it — each within one attempt
// plus the attempts admitted while the other's charges were on their way to Redis; then both
// refuse with a *pool.BudgetSpentError.
func TestFleetSharesTierBudget(t *testing.T) {
	const budget = 60
	d := standalone(t)
	a := budgetMember(t, d, 0, "a", budget)
	b := budgetMember(t, d, 1, "b", budget)
	a.waitHealthy(t)
	b.waitHealthy(t)
	// Each request takes requestTime, as it would through a proxy (faster than most real ones):
	// a member's charges reach Redis in a round trip, well within one request.
	const requestTime = 5 * time.Millisecond
	for _, m := range []*member{a, b} {
		m.base.OnCall = func(string, string) { time.Sleep(requestTime) }
	}

	var (
		wg   sync.WaitGroup
		sent [2]int
		errs [2]error
	)
	for i, m := range []*member{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 * budget {
				_, err := storetest.Get(context.Background(), m.tr, urlA)
				if err != nil {
					errs[i] = err
					return
				}
				sent[i]++
			}
		}()
	}
	wg.Wait()
	total := sent[0] + sent[1]
	t.Logf("a sent %d, b sent %d: %d together against a budget of %d", sent[0], sent[1], total, budget)
	for i, err := range errs {
		var be *pool.BudgetSpentError
		if !errors.As(err, &be) || be.Tier != 0 {
			t.Errorf("member %d stopped with %v, want a *pool.BudgetSpentError for tier 0", i, err)
		}
	}
	// Each member admits attempts while its view shows budget left; a view lags the other's
	// charges by at most a round trip to Redis. A slack of 10 % covers that on a loaded machine;
	// a budget kept per member would let 2 × 60 through.
	if total < budget || total > budget+budget/10 {
		t.Errorf("the fleet sent %d requests, want from %d to %d (the budget, and a few charges in flight)", total, budget, budget+budget/10)
	}
	if sent[0] == 0 || sent[1] == 0 {
		t.Errorf("one member sent nothing: a %d, b %d", sent[0], sent[1])
	}
	// A third member that joins later sees the fleet's total within a poll.
	c := budgetMember(t, d, 2, "c", budget)
	c.waitHealthy(t)
	if _, ok := storetest.Eventually(5*time.Second, func() bool {
		for _, s := range c.p.Snapshot().Budgets {
			return s.Left <= 0
		}
		return false
	}); !ok {
		t.Errorf("member c never saw the budget spent: %+v", c.p.Snapshot().Budgets)
	}
}

// TestFleetBudgetCharge: charges from two sources of one budget add up in Redis, per period, and
// a new period starts whole.
func TestFleetBudgetCharge(t *testing.T) {
	d := standalone(t)
	a := d.member(t, 0, "a", memberConfig{exits: 1})
	b := d.member(t, 1, "b", memberConfig{exits: 1})
	bud := ratelimit.Budget{Max: 1000, Period: time.Hour}
	sa, sb := a.st.BudgetSource("tier-0-bytes", bud), b.st.BudgetSource("tier-0-bytes", bud)
	now := a.fake.Now()
	sa.Charge(now, 300)
	sb.Charge(now, 500)
	if _, ok := storetest.Eventually(5*time.Second, func() bool {
		la, _ := sa.Left(now)
		lb, _ := sb.Left(now)
		return la == 200 && lb == 200
	}); !ok {
		la, _ := sa.Left(now)
		lb, _ := sb.Left(now)
		t.Fatalf("Left = %d and %d, want 200 for both (1000 - 300 - 500)", la, lb)
	}
	next := now.Add(time.Hour)
	if left, renews := sa.Left(next); left != 1000 || !renews.After(next) {
		t.Errorf("Left(next period) = %d, %v, want 1000 renewing after %v", left, renews, next)
	}
	if src := a.st.BudgetSource("x", ratelimit.Budget{}); src != nil {
		t.Errorf("BudgetSource(invalid budget) = %v, want nil", src)
	}
}
