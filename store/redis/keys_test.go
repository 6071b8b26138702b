package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
)

// TestKeysNamespacedAndExpiring: two fleets share one Redis under two namespaces. Every key a
// fleet writes carries one of its namespace's shard tags, neither fleet sees the other's trips,
// and a breaker's key expires Linger after its window — with the index: nothing but the shards'
// run ids is left.
func TestKeysNamespacedAndExpiring(t *testing.T) {
	srv := servertest.StartRedis(t)
	const linger = 300 * time.Millisecond
	short := pool.WithPairSettings(breaker.Settings{BaseCooldown: 500 * time.Millisecond, Jitter: -1})
	cfg := func(ns string) memberConfig {
		return memberConfig{real: true, settings: redisstore.Settings{Namespace: ns, Linger: linger}, opts: []pool.Option{short}}
	}
	alpha := newMember(t, srv.Addr(), "alpha-1", cfg("alpha"))
	beta1 := newMember(t, srv.Addr(), "beta-1", cfg("beta"))
	beta2 := newMember(t, srv.Addr(), "beta-2", cfg("beta"))
	for _, m := range []*member{alpha, beta1, beta2} {
		m.waitHealthy(t)
	}

	alpha.base.On("x1", originA, storetest.Reply{Status: 429, RetryAfter: 1})
	alpha.drive(t, urlA, func() bool { return storetest.PairState(alpha.pool(), "x1", originA) == breaker.Open })
	tripped := time.Now()
	ctx := context.Background()
	stateKey := redisstore.StateKey("alpha", store.Key{Scope: pool.ScopePair, Exit: "x1", Origin: originA})
	if !strings.HasPrefix(stateKey, "{pb:alpha:") || !strings.HasSuffix(stateKey, "}:b:pair:x1:a.example") {
		t.Fatalf("StateKey = %q, want {pb:alpha:SHARD}:b:pair:x1:a.example", stateKey)
	}
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return alpha.client.Exists(ctx, stateKey).Val() == 1 }); !ok {
		t.Fatalf("alpha never stored %s", stateKey)
	}
	// A trip in beta, published after alpha's: once beta-1 has it, it would have had alpha's too.
	beta2.base.On("x2", originA, storetest.Reply{Status: 429, RetryAfter: 1})
	beta2.drive(t, urlA, func() bool { return storetest.PairState(beta2.pool(), "x2", originA) == breaker.Open })
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return storetest.PairState(beta1.pool(), "x2", originA) == breaker.Open }); !ok {
		t.Fatal("beta-1 never learned beta-2's trip")
	}
	if st := storetest.PairState(beta1.pool(), "x1", originA); st != breaker.Closed {
		t.Errorf("beta-1 has alpha's pair (x1, a.example) %v, want it untouched", st)
	}

	keys, err := alpha.client.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, k := range keys {
		if !strings.HasPrefix(k, "{pb:alpha:") && !strings.HasPrefix(k, "{pb:beta:") {
			t.Errorf("key %q is outside both namespaces' hash tags", k)
		}
		found = found || k == stateKey
	}
	if !found {
		t.Fatalf("keys = %v, want %s among them", keys, stateKey)
	}
	pttl, _ := alpha.client.PTTL(ctx, stateKey).Result()
	window := time.Second // Retry-After 1 s, over the 500 ms base cooldown, no jitter
	if pttl <= linger || pttl > window+linger {
		t.Errorf("PTTL(%s) = %v, want the window's rest plus Linger: in (%v, %v]", stateKey, pttl, linger, window+linger)
	}
	var left []string
	_, ok := storetest.Eventually(10*time.Second, func() bool {
		left = left[:0]
		keys, _ := alpha.client.Keys(ctx, "{pb:alpha:*").Result()
		for _, k := range keys {
			if !strings.HasSuffix(k, "}:run") {
				left = append(left, k)
			}
		}
		return len(left) == 0
	})
	if !ok {
		t.Fatalf("%v still exist %v after the trip, want only run ids", left, time.Since(tripped))
	}
	if since := time.Since(tripped); since < window {
		t.Errorf("the key expired %v after the trip, before the window ended", since)
	}
	t.Logf("the key and the index expired %v after the trip (window %v + linger %v)", time.Since(tripped).Round(time.Millisecond), window, linger)
}

// TestClaimWithoutRedis: with Redis gone — refusing connections, or not answering — a probe's
// claim is granted locally, at once or within ClaimTimeout, and the store turns degraded.
func TestClaimWithoutRedis(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(*servertest.RedisServer)
	}{
		{"killed", (*servertest.RedisServer).Kill},
		{"frozen", (*servertest.RedisServer).Freeze},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := servertest.StartRedis(t)
			// A long ClaimTimeout, so that "did not wait for Redis" is a bound far below it, not a
			// race against a busy machine.
			m := newMember(t, srv.Addr(), "a", memberConfig{settings: redisstore.Settings{ClaimTimeout: 2 * time.Second}})
			m.waitHealthy(t)
			target := pool.ProbeTarget{Scope: pool.ScopePair, Exit: m.pool().Exits()[1], Origin: originA}
			if !m.st.ClaimProbe(m.clock.Now(), target, time.Minute) {
				t.Fatal("the first claim was refused")
			}
			tc.stop(srv)
			defer srv.Thaw()
			start := time.Now()
			if !m.st.ClaimProbe(m.clock.Now(), target, time.Minute) {
				t.Error("a claim without Redis was refused")
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("the claim without Redis took %v, want about ClaimTimeout (2s) at most", took)
			}
			if !m.st.Health().Degraded {
				t.Errorf("after a failed claim: %+v, want degraded", m.st.Health())
			}
			start = time.Now()
			if !m.st.ClaimProbe(m.clock.Now(), target, time.Minute) || time.Since(start) > time.Second {
				t.Errorf("a claim while degraded took %v, want a grant without waiting for the 2s ClaimTimeout", time.Since(start))
			}
		})
	}
}

// TestClaimRefusedHoldsThePair: a member whose claim is refused holds the pair OPEN until the
// holder's lease ends, so its requests go elsewhere without asking Redis again.
func TestClaimRefusedHoldsThePair(t *testing.T) {
	addr := servertest.Redis(t)
	a := newMember(t, addr, "a", memberConfig{})
	b := newMember(t, addr, "b", memberConfig{})
	a.waitHealthy(t)
	b.waitHealthy(t)
	target := pool.ProbeTarget{Scope: pool.ScopePair, Exit: a.pool().Exits()[1], Origin: originA}
	if !a.st.ClaimProbe(a.clock.Now(), target, time.Minute) {
		t.Fatal("a's claim was refused")
	}
	if !a.st.ClaimProbe(a.clock.Now(), target, time.Minute) {
		t.Error("a's second claim of its own probe was refused")
	}
	bt := pool.ProbeTarget{Scope: pool.ScopePair, Exit: b.pool().Exits()[1], Origin: originA}
	if b.st.ClaimProbe(b.clock.Now(), bt, time.Minute) {
		t.Fatal("b's claim was granted while a holds it")
	}
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return storetest.PairState(b.pool(), "x1", originA) == breaker.Open }); !ok {
		t.Fatal("b does not hold the pair OPEN while a's claim lasts")
	}
	p, _ := storetest.Pair(b.pool(), "x1", originA)
	if want := b.clock.Now().Add(time.Minute); p.NextProbe.Before(want.Add(-time.Second)) || p.NextProbe.After(want) {
		t.Errorf("b holds the pair until %v, want about the end of a's lease %v", p.NextProbe, want)
	}
	refused := b.st.Stats().ClaimsRefused
	if b.st.ClaimProbe(b.clock.Now(), bt, time.Minute) || b.st.Stats().ClaimsRefused != refused+1 {
		t.Error("b's second claim was not refused locally")
	}
	for range 20 {
		if label := storetest.MustGet(t, b.tr, urlA); label == "x1" {
			t.Fatal("b sent a request through the held pair")
		}
	}
}
