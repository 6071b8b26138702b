package redisstore_test

import (
	"errors"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
)

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
