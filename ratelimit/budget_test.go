package ratelimit_test

import (
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// TestLocalBudgetPeriods: charges draw a budget down within its period; the next period (aligned
// on the Unix epoch) starts whole; a charge to a period that has ended counts for nothing.
func TestLocalBudgetPeriods(t *testing.T) {
	const unit = time.Hour
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC) // a multiple of the period
	b, err := ratelimit.NewLocalBudget(ratelimit.Budget{Max: 100, Period: unit})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		charge   time.Time // zero: none
		n        int64
		now      time.Time
		left     int64
		renewsAt time.Time
	}{
		{now: t0, left: 100, renewsAt: t0.Add(unit)},
		{charge: t0, n: 60, now: t0.Add(30 * time.Minute), left: 40, renewsAt: t0.Add(unit)},
		{charge: t0.Add(59 * time.Minute), n: 50, now: t0.Add(59 * time.Minute), left: -10, renewsAt: t0.Add(unit)},
		{now: t0.Add(unit), left: 100, renewsAt: t0.Add(2 * unit)},
		{charge: t0.Add(unit + time.Second), n: 5, now: t0.Add(unit + time.Second), left: 95, renewsAt: t0.Add(2 * unit)},
		{charge: t0.Add(time.Minute), n: 50, now: t0.Add(unit + time.Second), left: 95, renewsAt: t0.Add(2 * unit)}, // old period
		{now: t0.Add(30 * time.Minute), left: 100, renewsAt: t0.Add(unit)},                                          // time went back
		{charge: t0.Add(3*unit + 1), n: 1, now: t0.Add(3*unit + 2), left: 99, renewsAt: t0.Add(4 * unit)},
	}
	for i, st := range steps {
		if !st.charge.IsZero() {
			b.Charge(st.charge, st.n)
		}
		left, renews := b.Left(st.now)
		if left != st.left || !renews.Equal(st.renewsAt) {
			t.Errorf("step %d: Left(%v) = %d, %v, want %d, %v", i, st.now, left, renews, st.left, st.renewsAt)
		}
	}
}

// TestBudgetValidate: a budget needs an amount and a period of at least a second.
func TestBudgetValidate(t *testing.T) {
	for _, b := range []ratelimit.Budget{{Max: 0, Period: time.Hour}, {Max: 1, Period: time.Millisecond}, {Max: -5, Period: time.Hour}} {
		if _, err := ratelimit.NewLocalBudget(b); err == nil {
			t.Errorf("NewLocalBudget(%+v) = nil error, want one", b)
		}
	}
	before := time.Unix(-1, 0)
	if n, renews := (ratelimit.Budget{Max: 1, Period: time.Minute}).PeriodAt(before); n != -1 || !renews.Equal(time.Unix(0, 0)) {
		t.Errorf("PeriodAt(1969) = %d, %v, want -1, the epoch", n, renews)
	}
}
