package transport

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestClaimCounterSharesAreDisjoint: claims racing with each other and with the counting take
// shares that are never negative and add up to the total.
func TestClaimCounterSharesAreDisjoint(t *testing.T) {
	var total, claimed, sum atomic.Int64
	const writers, claimers, rounds = 4, 4, 2000
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range rounds {
				total.Add(3)
			}
		})
	}
	for range claimers {
		wg.Go(func() {
			for range rounds {
				n := claimCounter(&claimed, &total)
				if n < 0 {
					t.Errorf("claimCounter = %d, want a share of at least 0", n)
					return
				}
				sum.Add(n)
			}
		})
	}
	wg.Wait()
	sum.Add(claimCounter(&claimed, &total))
	if got, want := sum.Load(), total.Load(); got != want {
		t.Errorf("sum of claims = %d, want the total %d", got, want)
	}
}
