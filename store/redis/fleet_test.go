package redisstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
)

// fleetWithin is how soon a trip or a close must reach every member.
const fleetWithin = time.Second

// TestFleetSharesTripAndParkedExit: a 429 trips a pair on member a and a 407 parks an exit there;
// within a second member b has both, with the same window and trip count, and sends nothing
// through them.
func TestFleetSharesTripAndParkedExit(t *testing.T) {
	testSharesTripAndParkedExit(t, standalone(t), "")
}

// testSharesTripAndParkedExit is TestFleetSharesTripAndParkedExit on d, in namespace ns ("" for
// the tests' default).
func testSharesTripAndParkedExit(t *testing.T, d deployment, ns string) {
	cfg := memberConfig{settings: redisstore.Settings{Namespace: ns}}
	a := d.member(t, 0, "a", cfg)
	b := d.member(t, 1, "b", cfg)
	a.waitHealthy(t)
	b.waitHealthy(t)

	a.base.On("x0", "*", storetest.Reply{Status: 407})
	a.base.On("x1", originA, storetest.Reply{Status: 429, RetryAfter: 300})
	a.drive(t, urlA, func() bool {
		return storetest.Exit(a.pool(), "x0").Parked && storetest.PairState(a.pool(), "x1", originA) == breaker.Open
	})
	wantPair, _ := storetest.Pair(a.pool(), "x1", originA)
	wantExit := storetest.Exit(a.pool(), "x0")
	took, ok := storetest.Eventually(5*time.Second, func() bool {
		p, _ := storetest.Pair(b.pool(), "x1", originA)
		e := storetest.Exit(b.pool(), "x0")
		return p.State == breaker.Open && p.NextProbe.Equal(wantPair.NextProbe) && p.Trips == wantPair.Trips &&
			e.Parked && e.NextProbe.Equal(wantExit.NextProbe)
	})
	if !ok || took > fleetWithin {
		p, _ := storetest.Pair(b.pool(), "x1", originA)
		t.Fatalf("member b after %v: pair %+v, exit %+v; want within %v the pair OPEN until %v (%d trips) and x0 parked until %v",
			took, p, storetest.Exit(b.pool(), "x0"), fleetWithin, wantPair.NextProbe, wantPair.Trips, wantExit.NextProbe)
	}
	t.Logf("member b had the trip and the parked exit %v after member a", took)
	for i := range 40 {
		if label := storetest.MustGet(t, b.tr, urlA); label == "x0" || label == "x1" {
			t.Fatalf("request %d through member b went through %s", i, label)
		}
	}
	if n := b.base.Count("x0", "*") + b.base.Count("x1", originA); n != 0 {
		t.Errorf("member b sent %d requests through x0 or (x1, a.example)", n)
	}
}

// TestFleetSendsOneProbe: when a shared OPEN pair's window ends on both members at once and both
// carry traffic, the fleet sends one probe; every other request goes elsewhere and none fails.
// The probe's success then closes the pair on both members.
func TestFleetSendsOneProbe(t *testing.T) {
	testSendsOneProbe(t, standalone(t), "")
}

// testSendsOneProbe is TestFleetSendsOneProbe on d, in namespace ns ("" for the tests' default).
func testSendsOneProbe(t *testing.T, d deployment, ns string) {
	cfg := memberConfig{settings: redisstore.Settings{Namespace: ns}}
	a := d.member(t, 0, "a", cfg)
	b := d.member(t, 1, "b", cfg)
	a.waitHealthy(t)
	b.waitHealthy(t)

	a.base.On("x1", originA, storetest.Reply{Status: 429, RetryAfter: 60})
	a.drive(t, urlA, func() bool { return storetest.PairState(a.pool(), "x1", originA) == breaker.Open })
	a.base.Reset()
	tripped, _ := storetest.Pair(a.pool(), "x1", originA)
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return storetest.PairState(b.pool(), "x1", originA) == breaker.Open }); !ok {
		t.Fatal("member b never learned the trip")
	}

	// Both windows end; the probe, wherever it goes, is held until the other requests are done.
	before := a.base.Count("x1", originA) + b.base.Count("x1", originA)
	probes := func() int { return a.base.Count("x1", originA) + b.base.Count("x1", originA) - before }
	hold := make(chan struct{})
	for _, m := range []*member{a, b} {
		m.base.On("x1", originA, storetest.Reply{Hold: hold})
		m.fake.Set(tripped.NextProbe)
	}
	const workers, each = 8, 10
	var (
		wg       sync.WaitGroup
		done     atomic.Int64
		mu       sync.Mutex
		failures []error
	)
	for w := range workers {
		m := []*member{a, b}[w%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				_, err := storetest.Get(context.Background(), m.tr, urlA)
				mu.Lock()
				if err != nil {
					failures = append(failures, err)
				}
				mu.Unlock()
			}
			done.Add(1)
		}()
	}
	// Every worker but the one whose probe is held finishes while the probe is out.
	if _, ok := storetest.Eventually(10*time.Second, func() bool { return done.Load() == workers-1 && probes() == 1 }); !ok {
		t.Errorf("while a probe was out: %d of %d workers done, %d probes sent (a: %d, b: %d); want all but one done and 1 probe",
			done.Load(), workers, probes(), a.base.Count("x1", originA), b.base.Count("x1", originA))
	}
	prober := "a"
	if b.base.Count("x1", originA) > 0 {
		prober = "b"
	}
	close(hold)
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d requests failed, first: %v", len(failures), failures[0])
	}
	t.Logf("member %s sent the fleet's probe; stats a %+v, b %+v", prober, a.st.Stats(), b.st.Stats())
	took, ok := storetest.Eventually(5*time.Second, func() bool {
		return storetest.PairState(a.pool(), "x1", originA) == breaker.Closed && storetest.PairState(b.pool(), "x1", originA) == breaker.Closed
	})
	if !ok || took > fleetWithin {
		t.Errorf("after the probe succeeded: a %v, b %v after %v; want both closed within %v",
			storetest.PairState(a.pool(), "x1", originA), storetest.PairState(b.pool(), "x1", originA), took, fleetWithin)
	}
}
