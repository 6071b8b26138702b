package redisstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
)

// traffic sends paced requests through members from a few workers each until stop is called, and
// records every error and the slowest request.
type traffic struct {
	once     sync.Once
	wg       sync.WaitGroup
	stopCh   chan struct{}
	sent     atomic.Int64
	slowest  atomic.Int64 // ns
	mu       sync.Mutex
	failures []error
}

func startTraffic(members []*member, workers int, every time.Duration) *traffic {
	tr := &traffic{stopCh: make(chan struct{})}
	urls := []string{"http://a.example/", "http://b.example/", "http://c.example/"}
	for _, m := range members {
		for w := range workers {
			tr.wg.Add(1)
			go func() {
				defer tr.wg.Done()
				tick := time.NewTicker(every)
				defer tick.Stop()
				for n := 0; ; n++ {
					select {
					case <-tr.stopCh:
						return
					case <-tick.C:
					}
					start := time.Now()
					_, err := storetest.Get(context.Background(), m.tr, urls[(n+w)%len(urls)])
					took := time.Since(start)
					tr.sent.Add(1)
					for {
						s := tr.slowest.Load()
						if int64(took) <= s || tr.slowest.CompareAndSwap(s, int64(took)) {
							break
						}
					}
					if err != nil {
						tr.mu.Lock()
						tr.failures = append(tr.failures, err)
						tr.mu.Unlock()
					}
				}
			}()
		}
	}
	return tr
}

func (tr *traffic) stop() {
	tr.once.Do(func() { close(tr.stopCh) })
	tr.wg.Wait()
}

func (tr *traffic) check(t *testing.T, maxLatency time.Duration) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.failures) > 0 {
		t.Errorf("%d of %d requests failed, first: %v", len(tr.failures), tr.sent.Load(), tr.failures[0])
	}
	if s := time.Duration(tr.slowest.Load()); s > maxLatency {
		t.Errorf("the slowest request took %v, want under %v: a request waited on Redis", s, maxLatency)
	}
	t.Logf("%d requests, none failed; the slowest took %v", tr.sent.Load(), time.Duration(tr.slowest.Load()).Round(time.Microsecond))
}

// outageMembers makes two members on the system clock, with fleet rate limits on every exit
// (generous: the traffic never waits for a token while Redis answers) and a short health interval.
func outageMembers(t *testing.T, addr string, opts ...pool.Option) (a, b *member) {
	cfg := memberConfig{
		exits: 6, real: true, limits: fleetLimits(ratelimit.PerSecond(5000, 500)),
		settings: redisstore.Settings{HealthInterval: 100 * time.Millisecond},
		opts:     opts,
	}
	a = newMember(t, addr, "a", cfg)
	b = newMember(t, addr, "b", cfg)
	a.waitHealthy(t)
	b.waitHealthy(t)
	return a, b
}

// TestOutageKillAndRestart: Redis is killed while both members carry traffic, and restarted
// empty. No request fails or waits on Redis; both members report their first sync, the degraded
// mode and the recovery (OnHealth); what member a learned during the outage (a trip, a parked exit) reaches
// member b once Redis is back; and a trip after the recovery is shared again at once.
func TestOutageKillAndRestart(t *testing.T) {
	srv := servertest.StartRedis(t)
	a, b := outageMembers(t, srv.Addr())
	load := startTraffic([]*member{a, b}, 2, 2*time.Millisecond)
	defer load.stop()

	time.Sleep(200 * time.Millisecond) // traffic before the outage, not a wait for a state change
	srv.Kill()
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return a.st.Health().Degraded && b.st.Health().Degraded }); !ok {
		t.Fatalf("after the kill: a %+v, b %+v; want both degraded", a.st.Health(), b.st.Health())
	}
	// During the outage member a parks x2 and trips (x1, a.example); member b cannot know.
	a.base.On("x2", "*", storetest.Reply{Status: 407})
	a.base.On("x1", originA, storetest.Reply{Status: 429, RetryAfter: 300})
	a.drive(t, urlA, func() bool {
		return storetest.Exit(a.pool(), "x2").Parked && storetest.PairState(a.pool(), "x1", originA) == breaker.Open
	})
	time.Sleep(300 * time.Millisecond) // more traffic during the outage
	if storetest.Exit(b.pool(), "x2").Parked {
		t.Fatal("member b learned of x2 while Redis was down")
	}

	srv.Restart()
	took, ok := storetest.Eventually(10*time.Second, func() bool {
		return storetest.Exit(b.pool(), "x2").Parked && storetest.PairState(b.pool(), "x1", originA) == breaker.Open &&
			!a.st.Health().Degraded && !b.st.Health().Degraded
	})
	if !ok {
		t.Fatalf("after the restart: b has x2 parked %t, (x1, a.example) %v; health a %+v, b %+v",
			storetest.Exit(b.pool(), "x2").Parked, storetest.PairState(b.pool(), "x1", originA), a.st.Health(), b.st.Health())
	}
	t.Logf("the members converged %v after Redis came back", took)
	wantPair, _ := storetest.Pair(a.pool(), "x1", originA)
	if got, _ := storetest.Pair(b.pool(), "x1", originA); !got.NextProbe.Equal(wantPair.NextProbe) || got.Trips != wantPair.Trips {
		t.Errorf("member b's pair = %+v, want member a's window %v and %d trips", got, wantPair.NextProbe, wantPair.Trips)
	}
	// After the recovery, news travels at once again, the other way this time.
	b.base.On("x3", "c.example", storetest.Reply{Status: 429, RetryAfter: 300})
	b.drive(t, "http://c.example/", func() bool { return storetest.PairState(b.pool(), "x3", "c.example") == breaker.Open })
	if took, ok := storetest.Eventually(5*time.Second, func() bool { return storetest.PairState(a.pool(), "x3", "c.example") == breaker.Open }); !ok || took > fleetWithin {
		t.Errorf("a trip on b after the recovery reached a after %v (%t), want within %v", took, ok, fleetWithin)
	}
	load.stop()
	load.check(t, time.Second)
	for _, m := range []*member{a, b} {
		log := m.healthLog()
		if len(log) < 3 || log[0].Degraded || !log[1].Degraded || log[len(log)-1].Degraded {
			t.Errorf("member %s reported %+v through OnHealth, want healthy (the first sync), degraded, then healthy last", m.name, log)
		}
	}
}

// TestOutageFrozenRedis: Redis stops answering without closing connections (SIGSTOP), the harder
// case: every call to it would hang. Requests go on without waiting on it — a probe due during
// the freeze waits at most ClaimTimeout for its claim — and the members re-sync once it answers.
func TestOutageFrozenRedis(t *testing.T) {
	srv := servertest.StartRedis(t)
	// Short windows, so that a pair's window ends during the freeze and its probe must be claimed then.
	a, b := outageMembers(t, srv.Addr(), pool.WithPairSettings(breaker.Settings{BaseCooldown: 500 * time.Millisecond}))
	a.base.On("x1", originA, storetest.Reply{Status: 429, RetryAfter: 1})
	a.drive(t, urlA, func() bool { return storetest.PairState(a.pool(), "x1", originA) == breaker.Open })
	a.base.Reset()
	load := startTraffic([]*member{a, b}, 2, 2*time.Millisecond)
	defer load.stop()

	srv.Freeze()
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return a.st.Health().Degraded && b.st.Health().Degraded }); !ok {
		srv.Thaw()
		t.Fatalf("while frozen: a %+v, b %+v; want both degraded", a.st.Health(), b.st.Health())
	}
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return storetest.PairState(a.pool(), "x1", originA) == breaker.Closed }); !ok {
		srv.Thaw()
		p, _ := storetest.Pair(a.pool(), "x1", originA)
		t.Fatalf("the pair's probe did not go through during the freeze: %+v; a %+v; calls %d", p, a.st.Stats(), a.base.Count("x1", originA))
	}
	srv.Thaw()
	if _, ok := storetest.Eventually(10*time.Second, func() bool { return !a.st.Health().Degraded && !b.st.Health().Degraded }); !ok {
		t.Fatalf("after the thaw: a %+v, b %+v; want both healthy", a.st.Health(), b.st.Health())
	}
	load.stop()
	load.check(t, time.Second)
}
