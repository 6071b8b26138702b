package retry

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
)

// Defaults for BudgetSettings: Finagle's RetryBudget defaults.
const (
	DefaultBudgetTTL        = 10 * time.Second
	DefaultMinRetriesPerSec = 10
	DefaultPercentCanRetry  = 0.2
)

// Limits on BudgetSettings, Finagle's: a window from one second to a minute, at most 1,000
// retries per request. MaxMinRetriesPerSec and MinPercentCanRetry keep the integer arithmetic
// exact.
const (
	MinBudgetTTL        = time.Second
	MaxBudgetTTL        = time.Minute
	MaxPercentCanRetry  = 1000.0
	MinPercentCanRetry  = 0.0001
	MaxMinRetriesPerSec = 1_000_000
)

// ErrBudgetSpent is what errors.Is finds in a give-up caused by a Budget that refused a retry
// (a *GiveUpError here, a *collyext.GiveUpError in Colly).
var ErrBudgetSpent = errors.New("retry: retry budget spent")

// budgetSlices is how many slices a Budget's window is cut into (Finagle's WindowedAdder uses 10):
// an entry counts for between 9/10 and all of the TTL.
const budgetSlices = 10

// budgetScale is what one deposit is worth; a retry costs budgetScale/PercentCanRetry
// (Finagle's TokenRetryBudget.ScaleFactor).
const budgetScale = 1000

// BudgetSettings tune a Budget, as Finagle's RetryBudget(ttl, minRetriesPerSec, percentCanRetry).
// The zero value is Finagle's default: retries worth 20 % of the requests of the last 10 s, plus 10
// retries a second whatever the requests.
type BudgetSettings struct {
	// TTL is how long a request's deposit, and a retry's withdrawal, count: the window is cut into
	// ten slices and slides by one at a time, so an entry counts for between 9/10·TTL and TTL.
	// Default 10 s; from 1 s to 1 min.
	TTL time.Duration
	// MinRetriesPerSec is the floor: retries allowed whatever the requests, as a reserve of
	// MinRetriesPerSec × TTL retries in any window of TTL. It lets a client that sends few requests
	// retry at all. Default 10; negative: no floor; at most MaxMinRetriesPerSec.
	MinRetriesPerSec int
	// PercentCanRetry is the share of requests that may be retried on top of the floor: 0.2 lets
	// 20 retries go for 100 requests in the window. Default 0.2; negative: none (only the floor);
	// from MinPercentCanRetry to MaxPercentCanRetry (1,000 retries a request).
	PercentCanRetry float64
	// Clock tells the time the window slides by. Default clock.System; give it the pool's clock
	// (Pool.Clock) so that one fake clock drives everything in a test.
	Clock clock.Clock
}

func (s *BudgetSettings) validate() error {
	switch {
	case s.TTL < 0:
		return fmt.Errorf("retry: BudgetSettings.TTL = %v: must not be negative", s.TTL)
	case s.TTL > 0 && (s.TTL < MinBudgetTTL || s.TTL > MaxBudgetTTL):
		return fmt.Errorf("retry: BudgetSettings.TTL = %v: must be from %v to %v", s.TTL, MinBudgetTTL, MaxBudgetTTL)
	case s.MinRetriesPerSec > MaxMinRetriesPerSec:
		return fmt.Errorf("retry: BudgetSettings.MinRetriesPerSec = %d: must be at most %d", s.MinRetriesPerSec, MaxMinRetriesPerSec)
	case math.IsNaN(s.PercentCanRetry) || math.IsInf(s.PercentCanRetry, 0):
		return fmt.Errorf("retry: BudgetSettings.PercentCanRetry = %v: must be a number", s.PercentCanRetry)
	case s.PercentCanRetry > MaxPercentCanRetry || (s.PercentCanRetry > 0 && s.PercentCanRetry < MinPercentCanRetry):
		return fmt.Errorf("retry: BudgetSettings.PercentCanRetry = %v: must be from %v to %v (or negative: none)",
			s.PercentCanRetry, MinPercentCanRetry, MaxPercentCanRetry)
	}
	if s.TTL == 0 {
		s.TTL = DefaultBudgetTTL
	}
	if s.MinRetriesPerSec == 0 {
		s.MinRetriesPerSec = DefaultMinRetriesPerSec
	}
	if s.PercentCanRetry == 0 {
		s.PercentCanRetry = DefaultPercentCanRetry
	}
	if s.Clock == nil {
		s.Clock = clock.System
	}
	return nil
}

// Budget bounds the retries of many requests together, as Finagle's RetryBudget does: each
// request's first attempt deposits, each retry withdraws, and a retry goes only when the deposits
// of the last TTL, plus the floor's reserve, cover it. A per-request limit (RetryMax, Colly's
// Settings.Retries) bounds how often one request is tried; a budget bounds how much a whole client
// adds to the traffic when everything fails — with the defaults, 20 % plus 10 retries a second,
// where a RetryMax of 4 would multiply it by five.
//
// Deposit and TryWithdraw are the two steps; Settings.Budget (retryablehttp) and
// collyext.Settings.Budget make them for you. Share one Budget between the layers that retry
// against the same sites. A Budget is safe for concurrent use: a small mutex guards the window
// (ten counters and the instant of the current slice, slid lazily when it is next used: no
// goroutine, no timer), counters are atomic, and nothing allocates. Instants going backwards are
// taken as the current slice.
type Budget struct {
	s        BudgetSettings
	slice    time.Duration // TTL / budgetSlices
	deposit  int64         // what one request deposits (0 without a ratio)
	withdraw int64         // what one retry costs
	reserve  int64         // the floor: MinRetriesPerSec × TTL retries' worth

	mu    sync.Mutex
	slots [budgetSlices]int64 // deposits minus withdrawals per slice
	head  int                 // the current slice's slot
	start time.Time           // the current slice's start; zero before first use
	sum   int64               // of slots

	deposits, retries, refused atomic.Uint64
}

// BudgetStats counts what a Budget did since it was made.
type BudgetStats struct {
	Deposits uint64 // requests' first attempts
	Retries  uint64 // retries the budget allowed
	Refused  uint64 // retries the budget refused
}

// NewBudget validates s, fills in defaults, and returns a Budget whose window is empty: only the
// floor is available. The error names the first bad field.
func NewBudget(s BudgetSettings) (*Budget, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	b := &Budget{s: s, slice: s.TTL / budgetSlices, withdraw: 1}
	if s.PercentCanRetry > 0 {
		b.deposit = budgetScale
		b.withdraw = int64(budgetScale / s.PercentCanRetry)
	}
	if s.MinRetriesPerSec > 0 {
		b.reserve = int64(float64(s.MinRetriesPerSec) * s.TTL.Seconds() * float64(b.withdraw))
	}
	return b, nil
}

// Settings returns the budget's settings, defaults filled in.
func (b *Budget) Settings() BudgetSettings { return b.s }

// String describes the budget, as give-up errors quote it: "20% of requests + 10 retries/s over 10s".
func (b *Budget) String() string {
	ratio, floor := "no ratio", "no floor"
	if b.s.PercentCanRetry > 0 {
		ratio = fmt.Sprintf("%g%% of requests", b.s.PercentCanRetry*100)
	}
	if b.s.MinRetriesPerSec > 0 {
		floor = fmt.Sprintf("%d retries/s", b.s.MinRetriesPerSec)
	}
	return fmt.Sprintf("%s + %s over %v", ratio, floor, b.s.TTL)
}

// Deposit is shorthand for DepositAt(now) on the budget's clock.
func (b *Budget) Deposit() { b.DepositAt(b.s.Clock.Now()) }

// DepositAt records a request's first attempt at now: it earns PercentCanRetry of a retry for TTL.
func (b *Budget) DepositAt(now time.Time) {
	b.deposits.Add(1)
	if b.deposit == 0 {
		return
	}
	b.mu.Lock()
	b.advance(now)
	b.slots[b.head] += b.deposit
	b.sum += b.deposit
	b.mu.Unlock()
}

// TryWithdraw is shorthand for TryWithdrawAt(now) on the budget's clock.
func (b *Budget) TryWithdraw() bool { return b.TryWithdrawAt(b.s.Clock.Now()) }

// TryWithdrawAt takes one retry out of the budget at now and reports whether there was one to
// take; a refusal takes nothing and is counted (Stats.Refused).
func (b *Budget) TryWithdrawAt(now time.Time) bool {
	b.mu.Lock()
	b.advance(now)
	ok := b.reserve+b.sum >= b.withdraw
	if ok {
		b.slots[b.head] -= b.withdraw
		b.sum -= b.withdraw
	}
	b.mu.Unlock()
	if ok {
		b.retries.Add(1)
	} else {
		b.refused.Add(1)
	}
	return ok
}

// Balance is shorthand for BalanceAt(now) on the budget's clock.
func (b *Budget) Balance() int64 { return b.BalanceAt(b.s.Clock.Now()) }

// BalanceAt returns how many retries the budget would allow at now, one after the other, with no
// new deposit.
func (b *Budget) BalanceAt(now time.Time) int64 {
	b.mu.Lock()
	b.advance(now)
	n := (b.reserve + b.sum) / b.withdraw
	b.mu.Unlock()
	return max(n, 0)
}

// Stats returns the budget's counters.
func (b *Budget) Stats() BudgetStats {
	return BudgetStats{Deposits: b.deposits.Load(), Retries: b.retries.Load(), Refused: b.refused.Load()}
}

// advance slides the window to now, clearing the slices that fell out of it. b.mu is held.
func (b *Budget) advance(now time.Time) {
	if b.start.IsZero() {
		b.start = now
		return
	}
	elapsed := now.Sub(b.start)
	if elapsed < b.slice {
		return // the current slice, or time went backwards
	}
	n := elapsed / b.slice
	if n >= budgetSlices {
		b.slots, b.sum = [budgetSlices]int64{}, 0
	} else {
		for range int(n) {
			b.head = (b.head + 1) % budgetSlices
			b.sum -= b.slots[b.head]
			b.slots[b.head] = 0
		}
	}
	b.start = b.start.Add(n * b.slice)
}
