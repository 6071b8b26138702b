package ratelimit

import "testing"

// TestTakeOutOfOrderDoesNotOverAdmit: concurrent callers read their clock before they take, so
// takes reach a bucket out of order. A late take must not move the bucket's clock back (which
// made rate.Limiter credit the same interval twice): over [0, 60 ms] a bucket of 20/s with a
// burst of 2 admits at most 2 + 20 × 0.06 = 3.2 takes, whatever order the instants arrive in.
// Regression test for TestGateLoopbackRates' extra request under load.
func TestTakeOutOfOrderDoesNotOverAdmit(t *testing.T) {
	order := []int{0, 50, 10, 60} // ms: the third take read its clock before the second
	for _, c := range []struct {
		name string
		n    int // buckets taken together (1: AllowN; 2: reservations)
	}{{"one bucket", 1}, {"two buckets", 2}} {
		exit := NewBucket(PerSecond(20, 2))
		var other *Bucket
		if c.n == 2 {
			other = NewBucket(PerSecond(1000, 100)) // always has a token: exit decides
		}
		took := 0
		for i, ms := range order {
			if Take(at(ms), exit, other, nil) {
				took++
				t.Logf("%s: take %d at %d ms: ok", c.name, i, ms)
			}
		}
		if took > 3 {
			t.Errorf("%s: %d takes at %v ms admitted, want at most 3 (rate × time + burst = 3.2)", c.name, took, order)
		}
	}
}

// TestTakeAllocatesNothing: the reservations of a take over several buckets stay on the stack.
func TestTakeAllocatesNothing(t *testing.T) {
	a, b, c := NewBucket(PerSecond(1e6, 1000)), NewBucket(PerSecond(1e6, 1000)), NewBucket(PerSecond(1, 1))
	Take(at(0), c, nil, nil) // c is empty now: every take below cancels a's and b's reservations
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		i++
		Take(at(i), a, b, c)
		Take(at(i), a, b, nil)
		Take(at(i), a, nil, nil)
	})
	if allocs != 0 {
		t.Errorf("Take allocated %.1f times a run, want 0", allocs)
	}
}
