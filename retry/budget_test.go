package retry_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/retry"
)

func newBudget(t *testing.T, s retry.BudgetSettings) *retry.Budget {
	t.Helper()
	b, err := retry.NewBudget(s)
	if err != nil {
		t.Fatalf("NewBudget(%+v) = %v", s, err)
	}
	return b
}

func TestNewBudgetValidates(t *testing.T) {
	nan := 0.0
	nan /= nan
	tests := []struct {
		s     retry.BudgetSettings
		field string
	}{
		{retry.BudgetSettings{TTL: -time.Second}, "TTL"},
		{retry.BudgetSettings{TTL: 999 * time.Millisecond}, "TTL"},
		{retry.BudgetSettings{TTL: 61 * time.Second}, "TTL"},
		{retry.BudgetSettings{MinRetriesPerSec: retry.MaxMinRetriesPerSec + 1}, "MinRetriesPerSec"},
		{retry.BudgetSettings{PercentCanRetry: 1000.5}, "PercentCanRetry"},
		{retry.BudgetSettings{PercentCanRetry: 0.00001}, "PercentCanRetry"},
		{retry.BudgetSettings{PercentCanRetry: nan}, "PercentCanRetry"},
	}
	for i, tt := range tests {
		_, err := retry.NewBudget(tt.s)
		if err == nil || !strings.Contains(err.Error(), "retry: BudgetSettings."+tt.field+" = ") {
			t.Errorf("%d: NewBudget(%+v) = %v, want an error naming %s", i, tt.s, err, tt.field)
		}
	}
	b := newBudget(t, retry.BudgetSettings{})
	s := b.Settings()
	if s.TTL != 10*time.Second || s.MinRetriesPerSec != 10 || s.PercentCanRetry != 0.2 || s.Clock == nil {
		t.Errorf("Settings() = %+v, want Finagle's defaults: 10s, 10/s, 0.2, a clock", s)
	}
	if got, want := b.String(), "20% of requests + 10 retries/s over 10s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	// The floor alone: 10/s over 10 s is 100 retries.
	if got := b.BalanceAt(t0); got != 100 {
		t.Errorf("BalanceAt(t0) = %d, want 100", got)
	}
	none := newBudget(t, retry.BudgetSettings{MinRetriesPerSec: -1, PercentCanRetry: -1})
	if got, want := none.String(), "no ratio + no floor over 10s"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// budgetStep is one call on a budget at t0 + at: a deposit, or a withdrawal and whether it is
// allowed; then the balance.
type budgetStep struct {
	at      time.Duration
	deposit bool
	allowed bool // for a withdrawal
	balance int64
}

func runBudget(t *testing.T, b *retry.Budget, steps []budgetStep) {
	t.Helper()
	for i, st := range steps {
		now := t0.Add(st.at)
		if st.deposit {
			b.DepositAt(now)
		} else if got := b.TryWithdrawAt(now); got != st.allowed {
			t.Errorf("step %d: TryWithdrawAt(t0+%v) = %v, want %v", i, st.at, got, st.allowed)
		}
		if got := b.BalanceAt(now); got != st.balance {
			t.Errorf("step %d: BalanceAt(t0+%v) = %d, want %d", i, st.at, got, st.balance)
		}
	}
}

// PercentCanRetry 0.2: five requests earn one retry.
func TestBudgetRatio(t *testing.T) {
	b := newBudget(t, retry.BudgetSettings{TTL: 10 * time.Second, MinRetriesPerSec: -1, PercentCanRetry: 0.2})
	const s = time.Second
	runBudget(t, b, []budgetStep{
		{at: 0, allowed: false, balance: 0}, // nothing deposited, no floor
		{at: 0, deposit: true, balance: 0},
		{at: s, deposit: true, balance: 0},
		{at: 2 * s, deposit: true, balance: 0},
		{at: 2 * s, allowed: false, balance: 0}, // 3 of 5
		{at: 3 * s, deposit: true, balance: 0},
		{at: 3 * s, deposit: true, balance: 1},
		{at: 3 * s, allowed: true, balance: 0},
		{at: 3 * s, allowed: false, balance: 0},
	})
	for range 10 {
		b.DepositAt(t0.Add(4 * time.Second))
	}
	runBudget(t, b, []budgetStep{
		{at: 4 * time.Second, allowed: true, balance: 1},
		{at: 4 * time.Second, allowed: true, balance: 0},
		{at: 4 * time.Second, allowed: false, balance: 0},
	})
	if got, want := b.Stats(), (retry.BudgetStats{Deposits: 15, Retries: 3, Refused: 4}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

// MinRetriesPerSec 2 over a TTL of 3 s: six retries without a request, back once they age out.
func TestBudgetFloor(t *testing.T) {
	b := newBudget(t, retry.BudgetSettings{TTL: 3 * time.Second, MinRetriesPerSec: 2, PercentCanRetry: -1})
	const s = time.Second
	steps := []budgetStep{{at: 0, deposit: true, balance: 6}} // deposits earn nothing without a ratio
	for i := range 6 {
		steps = append(steps, budgetStep{at: time.Duration(i) * 100 * time.Millisecond, allowed: true, balance: int64(5 - i)})
	}
	steps = append(steps,
		budgetStep{at: 2 * s, allowed: false, balance: 0},
		// The window is ten slices of 300 ms: the withdrawals of the first slice (0–300 ms: three)
		// leave it at 3 s, the rest at 3.3 s.
		budgetStep{at: 3*s - time.Nanosecond, allowed: false, balance: 0},
		budgetStep{at: 3 * s, allowed: true, balance: 2},
		budgetStep{at: 3300 * time.Millisecond, allowed: true, balance: 4},
	)
	runBudget(t, b, steps)
}

// Deposits and withdrawals count for TTL, cut in ten slices: between 9/10·TTL and TTL.
func TestBudgetTTLExpiry(t *testing.T) {
	b := newBudget(t, retry.BudgetSettings{TTL: 10 * time.Second, MinRetriesPerSec: -1, PercentCanRetry: 0.5})
	const s = time.Second
	runBudget(t, b, []budgetStep{
		{at: 0, deposit: true, balance: 0},
		{at: 500 * time.Millisecond, deposit: true, balance: 1}, // same slice as t0
		{at: 5 * s, deposit: true, balance: 1},
		{at: 5 * s, deposit: true, balance: 2},
		{at: 10*s - time.Nanosecond, allowed: true, balance: 1}, // the t0 slice is still in the window
		{at: 10 * s, allowed: false, balance: 0},                // it left: 2 deposits of 5 s minus one retry
		// The 5 s slice left; the retry of 10 s-1ns still counts, a debt of two deposits.
		{at: 15 * s, deposit: true, balance: 0},
		{at: 15 * s, deposit: true, balance: 0},
		{at: 15 * s, deposit: true, balance: 0},
		{at: 15 * s, deposit: true, balance: 1},
		{at: 15*s + 10*s, allowed: false, balance: 0}, // a window later: all gone
		{at: time.Hour, deposit: true, balance: 0},    // far later: the window starts afresh
		{at: time.Hour, deposit: true, balance: 1},
		{at: time.Hour - 5*s, allowed: true, balance: 0}, // time went backwards: the current slice
	})
}

// A budget with neither a ratio nor a floor allows no retry.
func TestBudgetEmpty(t *testing.T) {
	b := newBudget(t, retry.BudgetSettings{MinRetriesPerSec: -1, PercentCanRetry: -1})
	runBudget(t, b, []budgetStep{
		{at: 0, deposit: true, balance: 0},
		{at: 0, allowed: false, balance: 0},
	})
}

// The short forms read the budget's clock.
func TestBudgetClock(t *testing.T) {
	clk := clock.NewFake(t0)
	b := newBudget(t, retry.BudgetSettings{TTL: time.Second, MinRetriesPerSec: 1, PercentCanRetry: -1, Clock: clk})
	if !b.TryWithdraw() || b.TryWithdraw() || b.Balance() != 0 {
		t.Fatalf("TryWithdraw, TryWithdraw, Balance = want true, false, 0 with a floor of one")
	}
	clk.Advance(time.Second)
	if b.Balance() != 1 || !b.TryWithdraw() {
		t.Errorf("a TTL later: Balance() = %d, want the floor back", b.Balance())
	}
	b.Deposit()
	if got := b.Stats(); got != (retry.BudgetStats{Deposits: 1, Retries: 2, Refused: 1}) {
		t.Errorf("Stats() = %+v, want 1 deposit, 2 retries, 1 refused", got)
	}
}

func TestBudgetAllocatesNothing(t *testing.T) {
	b := newBudget(t, retry.BudgetSettings{})
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		i++
		now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
		b.DepositAt(now)
		b.TryWithdrawAt(now)
		b.BalanceAt(now)
	})
	if allocs != 0 {
		t.Errorf("DepositAt, TryWithdrawAt, BalanceAt allocate %v times, want 0", allocs)
	}
}

// Many goroutines depositing and withdrawing at once, over three slices (time going back and
// forth between them) inside one window: the budget never pays out more than it holds, and its
// counters add up.
func TestBudgetConcurrent(t *testing.T) {
	const (
		goroutines = 16
		loops      = 500
	)
	b := newBudget(t, retry.BudgetSettings{TTL: 10 * time.Second, MinRetriesPerSec: 1, PercentCanRetry: 0.25})
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range loops {
				now := t0.Add(time.Duration((g+i)%3) * time.Second)
				b.DepositAt(now)
				b.TryWithdrawAt(now)
				if i%2 == 0 {
					b.TryWithdrawAt(now)
				}
			}
		}()
	}
	wg.Wait()
	st := b.Stats()
	const withdrawals = goroutines * (loops + loops/2)
	if st.Deposits != goroutines*loops || st.Retries+st.Refused != withdrawals {
		t.Fatalf("Stats() = %+v, want %d deposits and %d withdrawals tried", st, goroutines*loops, withdrawals)
	}
	// In units of a deposit: the floor is 1/s × 10 s × 4 deposits a retry = 40; each retry costs 4.
	held := int64(40 + st.Deposits)
	paid := int64(4 * st.Retries)
	if paid > held {
		t.Errorf("paid %d retries (%d deposits' worth) out of %d deposits' worth", st.Retries, paid, held)
	}
	if got, want := b.BalanceAt(t0.Add(2*time.Second)), (held-paid)/4; got != want {
		t.Errorf("BalanceAt = %d, want %d: (%d held - %d paid) / 4", got, want, held, paid)
	}
	if st.Refused == 0 {
		t.Errorf("Stats() = %+v: nothing refused, the loop does not reach the budget's limit", st)
	}
}
