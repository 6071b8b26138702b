package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// The documented bounds of Redis memory (docs/fleet.md, Memory), in bytes as MEMORY USAGE
// reports them: a live entry's state key, its place in its shard's index, and an exit's fleet
// bucket; and, over all, used_memory per key (live entries and buckets, the indexes and the run
// ids included).
const (
	boundStateKey    = 512
	boundIndexEntry  = 192
	boundBucketKey   = 128
	boundPerLiveUsed = 1024
)

// TestMemoryBounded: a member trips 400 pairs (of 200 exits and 20 origins) and leases tokens for
// 200 fleet buckets; MEMORY USAGE of every key, and the growth of used_memory, stay within the
// documented bounds.
func TestMemoryBounded(t *testing.T) {
	addr := servertest.Redis(t)
	m := newMember(t, addr, "a", memberConfig{exits: 200, real: true, limits: fleetLimits(ratelimit.PerSecond(1.0/60, 1000))})
	m.waitHealthy(t)
	ctx := context.Background()
	used := func() int64 {
		info := m.client.Info(ctx, "memory").Val()
		for l := range strings.Lines(info) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				return n
			}
		}
		t.Fatalf("no used_memory in INFO memory:\n%s", info)
		return 0
	}
	before := used()
	const pairs = 400
	for i := range pairs {
		exit, origin := fmt.Sprintf("x%d", i%200), fmt.Sprintf("o%d.example", i/200*10+i%10)
		for range 20 { // until the pair is OPEN and the pinned pick refused
			l, err := m.p.Pick(ctx, pool.Request{Origin: origin, Exit: exit})
			if err != nil {
				break
			}
			l.Report(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: time.Hour})
		}
	}
	// A success through every exit: each leases a token of its fleet bucket, whose key lives a
	// minute (the bucket is full again a minute later, at 1 token/min): long enough to be measured
	// on a loaded machine, where the checks below can take seconds.
	for i := range 200 {
		if l, err := m.p.Pick(ctx, pool.Request{Origin: "lease.example", Exit: fmt.Sprintf("x%d", i)}); err == nil {
			l.Report(pool.Verdict{})
		}
	}
	buckets, _ := eventuallyKeys(t, m, "*:rl:*", 200)
	if _, ok := eventuallyKeys(t, m, "*:b:pair:*", pairs); !ok {
		t.Fatalf("Redis does not hold the %d pairs' entries", pairs)
	}
	grown := used() - before

	check := func(pattern string, bound int64) int {
		keys := m.client.Keys(ctx, pattern).Val()
		var most int64
		for _, k := range keys {
			n := m.client.MemoryUsage(ctx, k).Val()
			if n > bound {
				t.Errorf("MEMORY USAGE %s = %d, want at most %d", k, n, bound)
			}
			most = max(most, n)
		}
		t.Logf("%d keys %s: MEMORY USAGE at most %d bytes (bound %d)", len(keys), pattern, most, bound)
		return len(keys)
	}
	if n := check("*:rl:*", boundBucketKey); n == 0 {
		t.Error("no fleet bucket's key to measure")
	}
	check("*:b:*", boundStateKey)
	for _, idx := range m.client.Keys(ctx, "*:idx").Val() {
		n, card := m.client.MemoryUsage(ctx, idx).Val(), m.client.ZCard(ctx, idx).Val()
		if card > 0 && n > boundIndexEntry*card+256 { // a sorted set's own header
			t.Errorf("MEMORY USAGE %s = %d for %d entries, want at most %d per entry", idx, n, card, boundIndexEntry)
		}
	}
	if per := grown / int64(pairs+buckets); per > boundPerLiveUsed {
		t.Errorf("used_memory grew %d bytes for %d live entries and %d buckets: %d per key, want at most %d", grown, pairs, buckets, per, boundPerLiveUsed)
	}
	t.Logf("used_memory grew %d bytes for %d live entries and %d fleet buckets (%d per key)", grown, pairs, buckets, grown/int64(pairs+buckets))
}

// eventuallyKeys waits until Redis holds at least n keys matching pattern, and returns how many.
func eventuallyKeys(t *testing.T, m *member, pattern string, n int) (int, bool) {
	t.Helper()
	var got int
	deadline := time.Now().Add(5 * time.Second)
	for {
		got = len(m.client.Keys(context.Background(), pattern).Val())
		if got >= n || time.Now().After(deadline) {
			return got, got >= n
		}
		time.Sleep(10 * time.Millisecond) // polling another process
	}
}
