package pool_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// budgetRecorder records the budget events it hears.
type budgetRecorder struct {
	pool.NopObserver
	mu     sync.Mutex
	events []pool.BudgetEvent
}

func (r *budgetRecorder) BudgetSpent(e pool.BudgetEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *budgetRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// newBudgetPool is a pool of a tier-0 exit "cheap" (1 per request, budget 3 per hour) and a
// tier-1 exit "dear" (no budget), on a fake clock at leaseT0.
func newBudgetPool(t *testing.T, opts ...pool.Option) (*pool.Pool, *clock.Fake, *budgetRecorder) {
	t.Helper()
	clk := clock.NewFake(leaseT0)
	rec := &budgetRecorder{}
	base := []pool.Option{
		pool.WithExits(
			pool.MustParseExit("10.0.0.1:3128").WithLabel("cheap").WithAttr("country", "us"),
			pool.MustParseExit("10.0.0.2:3128").WithLabel("dear").WithTier(1),
		),
		pool.WithClock(clk), pool.WithSeed(3), pool.WithObserver(rec),
		pool.WithTierCost(0, pool.Cost{PerRequest: 1}),
		pool.WithTierBudget(0, pool.Budget{Spend: 3, Period: time.Hour}),
	}
	p, err := pool.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p, clk, rec
}

// TestTierBudgetEscalatesAndRenews: picks use tier 0 until its spend budget is spent (within one
// attempt: the attempt that spends the rest is the last), then move to tier 1; observers hear it
// once; at the next period tier 0 is used again.
func TestTierBudgetEscalatesAndRenews(t *testing.T) {
	p, clk, rec := newBudgetPool(t)
	want := []string{"cheap", "cheap", "cheap", "dear", "dear"}
	for i, w := range want {
		l := mustPick(t, p, "a.example")
		if got := l.Exit().Label(); got != w {
			t.Errorf("step %d: picked %s, want %s", i, got, w)
		}
		l.ReportTrafficAt(clk.Now(), okVerdict, pool.Traffic{})
	}
	if n := rec.count(); n != 1 {
		t.Errorf("budget events = %d, want 1", n)
	}
	if e := rec.events[0]; e.Tier != 0 || !e.Renews.Equal(leaseT0.Add(time.Hour)) {
		t.Errorf("event = %+v, want tier 0 renewing at %v", e, leaseT0.Add(time.Hour))
	}
	s := p.Snapshot()
	if len(s.Budgets) != 1 || s.Budgets[0].Left != 0 || s.Budgets[0].Spend != 3 {
		t.Errorf("Snapshot().Budgets = %+v, want one spend budget of 3 with 0 left", s.Budgets)
	}
	clk.Advance(time.Hour)
	if l := mustPick(t, p, "a.example"); l.Exit().Label() != "cheap" {
		t.Errorf("next period: picked %s, want cheap", l.Exit().Label())
	} else {
		l.Release()
	}
}

// TestBudgetSpentError: a pick only the spent tier can serve (its Want matches only tier 0's
// exit, it is pinned to that exit, or the pool has that tier alone) fails with a
// *BudgetSpentError that says when the budget renews; Refused hears it.
func TestBudgetSpentError(t *testing.T) {
	p, clk, _ := newBudgetPool(t)
	clk.Advance(15 * time.Minute)
	for range 3 {
		l := mustPick(t, p, "a.example")
		l.ReportTrafficAt(clk.Now(), okVerdict, pool.Traffic{})
	}
	us, err := pool.ParseWant("country=us")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []pool.Request{{Origin: "a.example", Want: us}, {Origin: "a.example", Exit: "cheap"}} {
		_, err := p.Pick(context.Background(), r)
		var be *pool.BudgetSpentError
		if !errors.As(err, &be) || !errors.Is(err, pool.ErrBudgetSpent) {
			t.Fatalf("Pick(%+v) = %v, want a *BudgetSpentError", r, err)
		}
		if be.Tier != 0 || be.RetryIn != 45*time.Minute || !be.Renews.Equal(leaseT0.Add(time.Hour)) {
			t.Errorf("Pick(%+v): %+v, want tier 0, renewing in 45m", r, be)
		}
	}
	// A byte budget stops its tier the same way.
	q, qclk, _ := newBudgetPool(t, pool.WithTierBudget(0, pool.Budget{Bytes: 1000, Period: time.Minute}))
	l := mustPick(t, q, "a.example")
	l.ReportTrafficAt(qclk.Now(), okVerdict, pool.Traffic{Sent: 400, Received: 700})
	if l := mustPick(t, q, "a.example"); l.Exit().Label() != "dear" {
		t.Errorf("after 1,100 bytes of a 1,000-byte budget: picked %s, want dear", l.Exit().Label())
	}
}

// TestBudgetOptionsValidated: a budget needs one amount, a period of a second or more, and tiers.
func TestBudgetOptionsValidated(t *testing.T) {
	for _, o := range [][]pool.Option{
		{pool.WithTierBudget(0, pool.Budget{Spend: 1, Bytes: 1, Period: time.Hour})},
		{pool.WithTierBudget(0, pool.Budget{Period: time.Hour})},
		{pool.WithTierBudget(0, pool.Budget{Spend: 1, Period: time.Millisecond})},
		{pool.WithTierBudget(0, pool.Budget{Spend: -1, Period: time.Hour})},
		{pool.WithTierBudget(0, pool.Budget{Spend: 1, Period: time.Hour}), pool.WithoutTiers()},
		{pool.WithBudgetSource(nil)},
	} {
		if _, err := pool.New(o...); err == nil {
			t.Errorf("New(%d options) = nil error, want one", len(o))
		}
	}
}

// TestBudgetSessionMoves: a session pinned to an exit of a spent tier moves to the next tier.
func TestBudgetSessionMoves(t *testing.T) {
	p, clk, _ := newBudgetPool(t)
	var last string
	for range 4 {
		l, err := p.Pick(context.Background(), pool.Request{Origin: "a.example", Session: "s1"})
		if err != nil {
			t.Fatal(err)
		}
		last = l.Exit().Label()
		l.ReportTrafficAt(clk.Now(), okVerdict, pool.Traffic{})
	}
	if last != "dear" {
		t.Errorf("session's 4th pick went through %s, want dear", last)
	}
}

// TestBudgetPickDoesNotAllocate: with prices and a budget, a pick and its report (spend counted,
// budget charged) allocate nothing, as without them.
func TestBudgetPickDoesNotAllocate(t *testing.T) {
	p, clk, _ := newBudgetPool(t, pool.WithTierBudget(1, pool.Budget{Bytes: 1 << 60, Period: time.Hour}))
	p.AddTraffic(p.Exits()[0], "a.example", pool.Traffic{Sent: 1}) // the traffic tables' first chunk
	req := pool.Request{Origin: "a.example"}
	n := testing.AllocsPerRun(200, func() {
		l, err := p.PickAt(context.Background(), clk.Now(), req)
		if err != nil {
			t.Fatal(err)
		}
		l.ReportTrafficAt(clk.Now(), okVerdict, pool.Traffic{Sent: 100, Received: 1000})
	})
	if n != 0 {
		t.Errorf("Pick and ReportTrafficAt with a budget: %v allocations, want 0", n)
	}
}
