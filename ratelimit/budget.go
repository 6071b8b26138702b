package ratelimit

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Budget is an amount that may be spent per period: bytes, or money in the caller's unit (package
// pool counts spend in billionths of its cost unit). Unlike a token bucket, which admits requests
// at a rate, a budget is drawn down by amounts known only after each request, and renews whole at
// the end of each period.
//
// Periods are aligned on the Unix epoch: period n runs from n×Period to (n+1)×Period, so a daily
// budget renews at 00:00 UTC, and every process that keeps the same budget agrees on when it
// renews without asking the others.
type Budget struct {
	Max    int64         // what may be spent per period; > 0
	Period time.Duration // the period's length; at least a second
}

// Validate reports what is wrong with b, if anything.
func (b Budget) Validate() error {
	if b.Max <= 0 {
		return fmt.Errorf("ratelimit: budget of %d per period, want more than 0", b.Max)
	}
	if b.Period < time.Second {
		return fmt.Errorf("ratelimit: budget period %v, want at least 1s", b.Period)
	}
	return nil
}

// PeriodAt returns the index of the period that holds t and the instant that period ends (when
// the budget renews).
func (b Budget) PeriodAt(t time.Time) (n int64, renews time.Time) {
	ns, p := t.UnixNano(), int64(b.Period)
	n = ns / p
	if ns < 0 && ns%p != 0 {
		n-- // floor, for instants before 1970
	}
	return n, time.Unix(0, (n+1)*p)
}

// BudgetSource keeps what has been spent of a Budget: in this process (LocalBudget), or across a
// fleet (package store/redis, Store.BudgetSource), which pool.WithBudgetSource plugs in the way
// Limits.ExitSource plugs in a fleet's rate limits.
//
// Its methods run on the request path, under no lock of the caller's, from many goroutines at
// once: they must be safe for concurrent use, must not make a network round trip (a fleet's
// source hands that work to a goroutine of its own) and must not allocate.
type BudgetSource interface {
	// Left returns what is left of the budget in the period that holds now — Max when nothing was
	// charged to it, 0 or less once it is spent — and when that period ends.
	Left(now time.Time) (left int64, renews time.Time)
	// Charge counts n against the period that holds at: the instant the spending attempt was
	// admitted, so that an attempt is charged to the period whose budget let it go. A charge to a
	// period that has already ended counts for nothing: the new period starts whole.
	Charge(at time.Time, n int64)
	// Budget returns the budget kept.
	Budget() Budget
}

// LocalBudget is a BudgetSource kept in this process. Left reads two atomics; Charge takes a
// mutex only when a period rolls over.
type LocalBudget struct {
	b      Budget
	mu     sync.Mutex   // serialises roll-overs
	period atomic.Int64 // the period spent counts for
	spent  atomic.Int64
}

var _ BudgetSource = (*LocalBudget)(nil)

// NewLocalBudget returns a LocalBudget that keeps b, or an error when b is not valid.
func NewLocalBudget(b Budget) (*LocalBudget, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	lb := &LocalBudget{b: b}
	lb.period.Store(minPeriod)
	return lb, nil
}

// minPeriod marks a LocalBudget charged in no period yet.
const minPeriod = -1 << 63

// Left implements BudgetSource.
func (lb *LocalBudget) Left(now time.Time) (int64, time.Time) {
	n, renews := lb.b.PeriodAt(now)
	if lb.period.Load() != n {
		return lb.b.Max, renews // nothing charged to this period yet (or now went backwards)
	}
	return lb.b.Max - lb.spent.Load(), renews
}

// Charge implements BudgetSource.
func (lb *LocalBudget) Charge(at time.Time, n int64) {
	if n <= 0 {
		return
	}
	k, _ := lb.b.PeriodAt(at)
	if cur := lb.period.Load(); k == cur {
		lb.spent.Add(n)
		return
	} else if k < cur {
		return // its period is over
	}
	lb.mu.Lock()
	defer lb.mu.Unlock()
	cur := lb.period.Load()
	switch {
	case k > cur:
		// A new period: spent is zeroed before the period is published, so a reader that sees
		// the new period never sees the old period's total.
		lb.spent.Store(0)
		lb.period.Store(k)
	case k < cur:
		return
	}
	lb.spent.Add(n)
}

// Budget implements BudgetSource.
func (lb *LocalBudget) Budget() Budget { return lb.b }
