package transport_test

import (
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// claimFleet is a ProbeClaimer shared by two pools, as a fleet store would be: the first member to
// claim a key holds it until the lease ends.
type claimFleet struct {
	mu     sync.Mutex
	held   map[string]time.Time
	claims []string
}

func (f *claimFleet) ClaimProbe(now time.Time, tg pool.ProbeTarget, lease time.Duration) bool {
	key := tg.Scope.String() + "|" + tg.Origin
	if tg.Exit != nil {
		key += "|" + tg.Exit.Label()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = append(f.claims, key)
	if until, ok := f.held[key]; ok && now.Before(until) {
		return false
	}
	f.held[key] = now.Add(lease)
	return true
}

// TestProbeClaimerOneProbePerFleet: two pools with the same exits and a shared claimer: when the
// same pair becomes due in both, only the first sends a probe; the second routes its request to
// another exit.
func TestProbeClaimerOneProbePerFleet(t *testing.T) {
	fleet := &claimFleet{held: map[string]time.Time{}}
	a := newTestPoolEnv(t, testkit.Exits("x", 2), pool.WithProbeClaimer(fleet), pool.WithoutTiers())
	b := newTestPoolEnv(t, testkit.Exits("x", 2), pool.WithProbeClaimer(fleet))
	for _, env := range []*scriptedEnv{a, b} {
		env.base.On("x0", stateOriginA, testkit.Reply{Status: 429, Header: testkit.RetryAfter(30)})
		for env.pairState("x0", stateOriginA) != breaker.Open {
			env.mustGet(t, nil, stateURLA)
		}
		env.base.Reset()
	}
	p, _ := a.pair("x0", stateOriginA)
	q, _ := b.pair("x0", stateOriginA)
	due := p.Breaker.NextProbe
	if q.Breaker.NextProbe.After(due) {
		due = q.Breaker.NextProbe
	}
	hold := make(chan struct{})
	a.base.On("x0", stateOriginA, testkit.Reply{Hold: hold})
	a.clock.Set(due)
	b.clock.Set(due)
	calls := a.base.Count("x0", stateOriginA)
	done := make(chan string, 1)
	go func() {
		label, _ := a.mustGet(t, transport.ContextWithExit(t.Context(), "x0"), stateURLA)
		done <- label
	}()
	for deadline := time.Now().Add(10 * time.Second); a.base.Count("x0", stateOriginA) == calls; {
		if time.Now().After(deadline) {
			t.Fatal("member a's probe never left")
		}
		time.Sleep(time.Millisecond) // a hand-off between goroutines, not a wait for state
	}
	for range 5 {
		if label, _ := b.mustGet(t, nil, stateURLA); label != "x1" {
			t.Fatalf("member b sent a request through x0 while member a held its probe")
		}
	}
	close(hold)
	if label := <-done; label != "x0" {
		t.Errorf("member a's probe went through %q", label)
	}
	fleet.mu.Lock()
	defer fleet.mu.Unlock()
	if len(fleet.claims) < 2 {
		t.Errorf("claims = %v, want member a's and at least one refused for member b", fleet.claims)
	}
}
