package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
)

// fleetLimits returns the option that makes every exit's PerExit limit l a fleet budget drawn
// from st.
func fleetLimits(l ratelimit.Limit) func(st *redisstore.Store) pool.Option {
	return fleetLimitsOf(ratelimit.Limits{PerExit: l})
}

// fleetLimitsOf returns the option that sets lim, with the member's store as its exit source.
func fleetLimitsOf(lim ratelimit.Limits) func(st *redisstore.Store) pool.Option {
	return func(st *redisstore.Store) pool.Option {
		l := lim
		l.ExitSource = st.ExitSource
		return pool.WithRateLimits(l)
	}
}

// TestFleetRateLimitHoldsCombinedRate: two members send as fast as they can through the same exit,
// whose fleet budget is 200 requests a second with a burst of 20. Together they get at most
// rate × elapsed + burst through it — not twice that — and not much less.
func TestFleetRateLimitHoldsCombinedRate(t *testing.T) {
	testRateLimitHoldsCombinedRate(t, standalone(t), "")
}

// testRateLimitHoldsCombinedRate is TestFleetRateLimitHoldsCombinedRate on d, in namespace ns (""
// for the tests' default).
func testRateLimitHoldsCombinedRate(t *testing.T, d deployment, ns string) {
	const (
		ratePerSec = 200
		burst      = 20
		run        = 2 * time.Second
		workers    = 4
	)
	cfg := memberConfig{
		exits: 1, real: true, limits: fleetLimits(ratelimit.PerSecond(ratePerSec, burst)),
		// A late lease would let the local fallback serve (and the fleet exceed its budget, as
		// designed for outages): the race detector on a loaded machine can delay the lease loop
		// past the default 50 ms, so this test gives it a second.
		settings: redisstore.Settings{Namespace: ns, LeaseWait: time.Second},
	}
	a := d.member(t, 0, "a", cfg)
	b := d.member(t, 1, "b", cfg)
	a.waitHealthy(t)
	b.waitHealthy(t)

	var (
		wg        sync.WaitGroup
		ok        [2]atomic.Int64
		throttled atomic.Int64
		mu        sync.Mutex
		failures  []error
	)
	start := time.Now()
	deadline := start.Add(run)
	var lastOK atomic.Int64
	for i, m := range []*member{a, b} {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(deadline) {
					ctx, cancel := context.WithDeadline(context.Background(), deadline)
					_, err := storetest.Get(ctx, m.tr, urlA)
					cancel()
					switch {
					case err == nil:
						ok[i].Add(1)
						lastOK.Store(time.Now().UnixNano())
					case errors.Is(err, pool.ErrThrottled):
						throttled.Add(1)
					default:
						mu.Lock()
						failures = append(failures, err)
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Unix(0, lastOK.Load()).Sub(start)
	total := ok[0].Load() + ok[1].Load()
	limit := int64(ratePerSec*elapsed.Seconds()) + burst
	leases := a.st.Stats().Leases + b.st.Stats().Leases
	t.Logf("in %v: a %d, b %d, together %d requests (%.0f/s), at most %d allowed; %d refused after waiting; %d lease round trips (%.0f per 1,000 requests, saturated)",
		elapsed.Round(time.Millisecond), ok[0].Load(), ok[1].Load(), total, float64(total)/elapsed.Seconds(), limit,
		throttled.Load(), leases, float64(leases)*1000/float64(total))
	if total > limit {
		t.Errorf("the fleet sent %d requests through x0 in %v, want at most rate × elapsed + burst = %d", total, elapsed, limit)
	}
	if min := int64(0.6 * ratePerSec * run.Seconds()); total < min {
		t.Errorf("the fleet sent only %d requests in %v, want at least %d (60%% of the budget)", total, run, min)
	}
	if ok[0].Load() == 0 || ok[1].Load() == 0 {
		t.Errorf("one member got nothing: a %d, b %d", ok[0].Load(), ok[1].Load())
	}
	if f := a.st.Stats().FallbackTakes + b.st.Stats().FallbackTakes; f != 0 {
		t.Errorf("%d tokens came from the fallback buckets while Redis answered", f)
	}
	if len(failures) > 0 {
		t.Errorf("%d requests failed otherwise, first: %v", len(failures), failures[0])
	}
}

// TestFleetBucketDoesNotAllocate: peeking at and taking from a fleet bucket costs no allocation,
// as a local bucket's does not: the pick path stays allocation-free.
func TestFleetBucketDoesNotAllocate(t *testing.T) {
	addr := servertest.Redis(t)
	m := newMember(t, addr, "a", memberConfig{exits: 1, real: true})
	m.waitHealthy(t)
	src := m.st.ExitSource("x0", ratelimit.PerSecond(1e6, 100000))
	b := ratelimit.SourceBucket(src)
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return ratelimit.Take(time.Now(), b, nil, nil) }); !ok {
		t.Fatal("no token was ever leased")
	}
	local := ratelimit.NewBucket(ratelimit.PerSecond(1e9, 1e9))
	now := time.Now()
	if n := testing.AllocsPerRun(1000, func() {
		b.Ready(now)
		if ratelimit.Take(now, b, local, nil) {
			return
		}
	}); n != 0 {
		t.Errorf("Ready and Take on a fleet bucket allocate %v times, want 0", n)
	}
}

// failFastMember makes a member on the system clock whose one exit has an ample fleet budget l
// and fails fast (ratelimit.Limits.FailFast): every refusal it meets is one the budget did not
// cause.
func failFastMember(t *testing.T, addr, name string, l ratelimit.Limit, s redisstore.Settings) *member {
	t.Helper()
	return newMember(t, addr, name, memberConfig{
		exits: 1, real: true, settings: s,
		limits: fleetLimitsOf(ratelimit.Limits{PerExit: l, FailFast: true}),
	})
}

// refusals stops tr and returns how many of its requests were refused for want of a token, and
// fails t for every other failure.
func (tr *traffic) refusals(t *testing.T) int {
	t.Helper()
	tr.stop()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	n := 0
	var other []error
	for _, err := range tr.failures {
		if errors.Is(err, pool.ErrThrottled) {
			n++
		} else {
			other = append(other, err)
		}
	}
	if len(other) > 0 {
		t.Errorf("%d of %d requests failed otherwise, first: %v", len(other), tr.sent.Load(), other[0])
	}
	if n > 0 {
		t.Logf("first refusal: %v", tr.failures[0])
	}
	return n
}

// TestFailFastRefusesNothingAtLeaseRenewal: a member sends about 200 requests a second for 3 s
// through an exit whose fleet budget is ten times that, failing fast. Its batch (1,000 tokens)
// outlives LeaseTTL, so its leased tokens expire and are leased anew during the run: no request
// is refused, at the first lease or at any renewal, and none is served by the fallback.
func TestFailFastRefusesNothingAtLeaseRenewal(t *testing.T) {
	const batch = 1000
	addr := servertest.Redis(t)
	m := failFastMember(t, addr, "a", ratelimit.PerSecond(2000, batch), redisstore.Settings{LeaseBatch: batch})
	m.waitHealthy(t)

	load := startTraffic([]*member{m}, 2, 10*time.Millisecond)
	time.Sleep(3 * time.Second) // the length of the run, not a wait for a state change
	refused := load.refusals(t)
	stats, h := m.st.Stats(), m.st.Health()
	t.Logf("%d requests, %d refused; %+v", load.sent.Load(), refused, stats)
	if refused != 0 {
		t.Errorf("%d of %d requests were refused with a healthy store and an ample fleet budget, want 0", refused, load.sent.Load())
	}
	if stats.Leased < 2*batch {
		t.Errorf("%d tokens leased, want at least %d: the run did not renew an expired lease", stats.Leased, 2*batch)
	}
	if h.Degraded || stats.FallbackTakes != 0 {
		t.Errorf("health %+v, %d fallback takes; want healthy throughout and none", h, stats.FallbackTakes)
	}
}

// TestFailFastRefusesNothingAcrossFrozenRedis: Redis is frozen (SIGSTOP) under traffic that fails
// fast, and thawed. No request is refused: as the freeze begins, a request that finds no leased
// token waits for the late lease until the fallback serves it, and once Redis answers again the
// member leases anew.
func TestFailFastRefusesNothingAcrossFrozenRedis(t *testing.T) {
	srv := servertest.StartRedis(t)
	testFailFastAcrossOutage(t, srv, srv.Freeze, srv.Thaw)
}

// TestFailFastRefusesNothingAcrossRestart: Redis is killed (SIGKILL) under traffic that fails
// fast, and restarted empty. No request is refused, during the outage or after the recovery.
func TestFailFastRefusesNothingAcrossRestart(t *testing.T) {
	srv := servertest.StartRedis(t)
	testFailFastAcrossOutage(t, srv, srv.Kill, srv.Restart)
}

// testFailFastAcrossOutage runs traffic that fails fast through two members while down takes
// Redis away and up brings it back, and checks that no request was refused.
func testFailFastAcrossOutage(t *testing.T, srv *servertest.RedisServer, down, up func()) {
	s := redisstore.Settings{HealthInterval: 100 * time.Millisecond}
	l := ratelimit.PerSecond(5000, 5000) // a burst of ten batches: one lease never empties it
	a := failFastMember(t, srv.Addr(), "a", l, s)
	b := failFastMember(t, srv.Addr(), "b", l, s)
	a.waitHealthy(t)
	b.waitHealthy(t)
	members := []*member{a, b}
	load := startTraffic(members, 2, 5*time.Millisecond)
	defer load.stop()

	time.Sleep(500 * time.Millisecond) // traffic before the outage, not a wait for a state change
	down()
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return a.st.Health().Degraded && b.st.Health().Degraded }); !ok {
		up()
		t.Fatalf("during the outage: a %+v, b %+v; want both degraded", a.st.Health(), b.st.Health())
	}
	time.Sleep(time.Second) // traffic during the outage, past LeaseTTL
	up()
	if _, ok := storetest.Eventually(10*time.Second, func() bool { return !a.st.Health().Degraded && !b.st.Health().Degraded }); !ok {
		t.Fatalf("after the outage: a %+v, b %+v; want both healthy", a.st.Health(), b.st.Health())
	}
	leased := a.st.Stats().Leased + b.st.Stats().Leased
	time.Sleep(time.Second) // traffic after the recovery
	refused := load.refusals(t)
	t.Logf("%d requests, %d refused; a %+v, b %+v", load.sent.Load(), refused, a.st.Stats(), b.st.Stats())
	if refused != 0 {
		t.Errorf("%d of %d requests were refused with an ample fleet budget, want 0", refused, load.sent.Load())
	}
	if after := a.st.Stats().Leased + b.st.Stats().Leased; after == leased {
		t.Errorf("no token was leased after the recovery (%d before and after)", leased)
	}
}
