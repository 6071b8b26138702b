package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
)

// eventTap counts what is published on a namespace's channels, from a subscription of its own.
type eventTap struct {
	mu   sync.Mutex
	seen []string
	ps   *goredis.PubSub
	done chan struct{}
}

func tapEvents(t *testing.T, addr, namespace string) *eventTap {
	t.Helper()
	c := newClient(t, addr)
	ps := c.PSubscribe(context.Background(), "{pb:"+namespace+":*}:events")
	if _, err := ps.Receive(context.Background()); err != nil {
		t.Fatalf("PSUBSCRIBE: %v", err)
	}
	tap := &eventTap{ps: ps, done: make(chan struct{})}
	go func() {
		defer close(tap.done)
		for msg := range ps.Channel() {
			tap.mu.Lock()
			tap.seen = append(tap.seen, msg.Payload)
			tap.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ps.Close()
		<-tap.done
	})
	return tap
}

// sentinel is a payload no member publishes.
const sentinel = "sentinel"

func (tap *eventTap) has(payload string) bool {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	for _, p := range tap.seen {
		if p == payload {
			return true
		}
	}
	return false
}

func (tap *eventTap) count() int {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	return len(tap.seen)
}

// TestColdStartIsAnnouncedAndLoaded: a member that starts while the fleet has news is in step when
// store.NewPool returns: Health is healthy, OnHealth was told of the first healthy sync (and of
// nothing else), the pool has the fleet's trip, and Stats.ColdPull says how long the pull took.
// Before, the first turn to healthy was not announced and Health could still say "not yet
// synchronised".
func TestColdStartIsAnnouncedAndLoaded(t *testing.T) {
	addr := servertest.Redis(t)
	a := newMember(t, addr, "a", memberConfig{})
	a.waitHealthy(t)
	a.base.On("x1", originA, storetest.Reply{Status: 429, RetryAfter: 300})
	a.drive(t, urlA, func() bool { return storetest.PairState(a.pool(), "x1", originA) == breaker.Open })
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return a.st.Stats().Published > 0 }); !ok {
		t.Fatal("member a never published its trip")
	}

	c := newMember(t, addr, "c", memberConfig{})
	if h := c.st.Health(); h.Degraded {
		t.Errorf("Health() when NewPool returned = %+v, want healthy", h)
	}
	if got := storetest.PairState(c.pool(), "x1", originA); got != breaker.Open {
		t.Errorf("member c's pair (x1, a.example) when NewPool returned = %v, want OPEN (pulled)", got)
	}
	if log := c.healthLog(); len(log) != 1 || log[0].Degraded {
		t.Errorf("OnHealth calls at a cold start = %+v, want one: healthy", log)
	}
	if s := c.st.Stats(); s.ColdPull <= 0 || s.Pulled != 1 {
		t.Errorf("Stats() = %+v, want ColdPull > 0 and Pulled 1", s)
	}
	t.Logf("cold pull took %v", c.st.Stats().ColdPull)
}

// TestResyncPushesOnlyOwnChanges: after the fleet's subscriptions drop (a fleet-wide re-sync, as
// a failover triggers), no member publishes again what it learned from another, nor what Redis
// already holds: the re-sync publishes nothing. Before, every member pushed its whole state, the
// other members' entries included, and each was published to the fleet again.
func TestResyncPushesOnlyOwnChanges(t *testing.T) {
	srv := servertest.StartRedis(t)
	members := []*member{
		newMember(t, srv.Addr(), "a", memberConfig{}),
		newMember(t, srv.Addr(), "b", memberConfig{}),
		newMember(t, srv.Addr(), "c", memberConfig{}),
	}
	a := members[0]
	a.base.On("x1", originA, storetest.Reply{Status: 429, RetryAfter: 300})
	a.base.On("x2", "*", storetest.Reply{Status: 407})
	a.drive(t, urlA, func() bool {
		return storetest.PairState(a.pool(), "x1", originA) == breaker.Open && storetest.Exit(a.pool(), "x2").Parked
	})
	for _, m := range members[1:] {
		if _, ok := storetest.Eventually(5*time.Second, func() bool {
			return storetest.PairState(m.pool(), "x1", originA) == breaker.Open && storetest.Exit(m.pool(), "x2").Parked
		}); !ok {
			t.Fatalf("member %s never learned a's news", m.name)
		}
	}
	tap := tapEvents(t, srv.Addr(), "test")
	before := make([]redisstore.Stats, len(members))
	for i, m := range members {
		before[i] = m.st.Stats()
	}
	ctl := newClient(t, srv.Addr())
	if err := ctl.Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub", "SKIPME", "yes").Err(); err != nil {
		t.Fatalf("CLIENT KILL TYPE pubsub: %v", err)
	}
	for i, m := range members {
		if _, ok := storetest.Eventually(10*time.Second, func() bool {
			s := m.st.Stats()
			return s.Reconciles > before[i].Reconciles && !m.st.Health().Degraded
		}); !ok {
			t.Fatalf("member %s did not re-sync: %+v, %+v", m.name, m.st.Stats(), m.st.Health())
		}
	}
	// Every member has re-synced; whatever they published reaches the tap before a sentinel sent now.
	ctl.Publish(context.Background(), "{pb:test:sentinel}:events", sentinel)
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return tap.has(sentinel) }); !ok {
		t.Fatal("the tap never saw the sentinel")
	}
	for i, m := range members {
		if d := m.st.Stats().Published - before[i].Published; d != 0 {
			t.Errorf("member %s published %d entries at the re-sync, want 0", m.name, d)
		}
	}
	if n := tap.count() - 1; n != 0 {
		t.Errorf("the re-sync published %d events, want 0", n)
	}
}

// TestLegacyLayoutRefused: a namespace that holds the one-slot layout of earlier versions is
// refused: the store stays degraded with ErrLegacyLayout (requests go on, on local state) until
// the old keys are gone, then syncs.
func TestLegacyLayoutRefused(t *testing.T) {
	addr := servertest.Redis(t)
	ctl := newClient(t, addr)
	ctx := context.Background()
	ctl.ZAdd(ctx, "{pb:test}:idx", goredis.Z{Score: 1, Member: "{pb:test}:b:pair:x1:a.example"})
	m := newMember(t, addr, "a", memberConfig{settings: redisstore.Settings{HealthInterval: 50 * time.Millisecond}})
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return errors.Is(m.st.Health().Err, redisstore.ErrLegacyLayout) }); !ok {
		t.Fatalf("Health() = %+v, want degraded with ErrLegacyLayout", m.st.Health())
	}
	if label := storetest.MustGet(t, m.tr, urlA); label == "" {
		t.Error("a request failed while the namespace was refused")
	}
	ctl.Del(ctx, "{pb:test}:idx")
	m.waitHealthy(t)
}
