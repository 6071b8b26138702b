package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"github.com/proxybreaker/proxybreaker/store"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
)

// replicatedCluster is a Redis Cluster of clusterMasters masters with a replica each; member i's
// client is seeded with master i first.
func replicatedCluster(t testing.TB) (deployment, *servertest.RedisCluster) {
	c := servertest.StartRedisClusterReplicas(t, clusterMasters, 1)
	return on(c), c
}

// exitOn returns the first of the exits x0…x(n-1) whose pair key for origin is on master at the
// start.
func exitOn(t *testing.T, c *servertest.RedisCluster, ns string, n, master int, origin string) string {
	t.Helper()
	for i := range n {
		label := fmt.Sprintf("x%d", i)
		if c.Owner(redisstore.StateKey(ns, store.Key{Scope: pool.ScopePair, Exit: label, Origin: origin})) == master {
			return label
		}
	}
	t.Fatalf("no exit of x0…x%d has its keys on master %d", n-1, master)
	return ""
}

// TestClusterFailover: four members carry traffic on a Redis Cluster of three masters with a
// replica each, with fleet rate limits; master 0 is killed, and its replica takes over. No request
// fails; a trip made on one member during the failover, on a shard of the killed master, reaches
// every member; every member is healthy again (how many shards each re-synced is logged); and
// every entry written before the kill — the
// ones acknowledged just before it included (RepushWindow) — is in Redis afterwards.
func TestClusterFailover(t *testing.T) {
	d, c := replicatedCluster(t)
	const ns, exits = "failover", 12
	cfg := memberConfig{
		exits: exits, real: true, limits: fleetLimits(ratelimit.PerSecond(5000, 500)),
		settings: redisstore.Settings{Namespace: ns, HealthInterval: 100 * time.Millisecond},
	}
	var members []*member
	for i := range 4 {
		m := d.member(t, i, fmt.Sprintf("m%d", i), cfg)
		m.waitHealthy(t)
		members = append(members, m)
	}
	a, b := members[0], members[1]
	onDead, onLive := exitOn(t, c, ns, exits, 0, originA), exitOn(t, c, ns, exits, 1, originA)
	const originB = "b.example"
	during := exitOn(t, c, ns, exits, 0, originB)
	load := startTraffic(members, 2, 2*time.Millisecond)
	defer load.stop()

	// Before the kill: member a trips a pair on each side; every member has both.
	for _, x := range []string{onDead, onLive} {
		a.base.On(x, originA, storetest.Reply{Status: 429, RetryAfter: 300})
	}
	a.drive(t, urlA, func() bool {
		return storetest.PairState(a.pool(), onDead, originA) == breaker.Open && storetest.PairState(a.pool(), onLive, originA) == breaker.Open
	})
	converged := func(exit, origin string) bool {
		for _, m := range members {
			if storetest.PairState(m.pool(), exit, origin) != breaker.Open || m.st.Health().Degraded {
				return false
			}
		}
		return true
	}
	if _, ok := storetest.Eventually(5*time.Second, func() bool { return converged(onDead, originA) && converged(onLive, originA) }); !ok {
		t.Fatal("the members never shared the trips made before the kill")
	}

	reconciles := make([]uint64, len(members))
	for i, m := range members {
		reconciles[i] = m.st.Stats().Reconciles
	}
	c.Kill(0)
	// During the failover member b trips a pair whose shard was the killed master's.
	b.base.On(during, originB, storetest.Reply{Status: 429, RetryAfter: 300})
	b.drive(t, "http://"+originB+"/", func() bool { return storetest.PairState(b.pool(), during, originB) == breaker.Open })
	took, ok := storetest.Eventually(30*time.Second, func() bool {
		role, _ := c.Role(clusterMasters) // master 0's replica
		return role == "master" && converged(during, originB) && converged(onDead, originA) && converged(onLive, originA)
	})
	if !ok {
		for _, m := range members {
			t.Logf("member %s: %v %+v %+v", m.name, storetest.PairState(m.pool(), during, originB), m.st.Health(), m.st.Stats())
		}
		role, err := c.Role(clusterMasters)
		nodes, _ := c.Do(1, "CLUSTER", "NODES")
		t.Fatalf("after the failover the members did not converge; node %d's role %q, %v; nodes:\n%s", clusterMasters, role, err, nodes)
	}
	t.Logf("the replica took over and every member converged %v after the kill", took)
	// Reported, not asserted: a member re-syncs the killed master's shards (5 or 6 of the 16) —
	// and on a loaded two-core machine, one whose connections all broke sometimes re-syncs every
	// shard once or more on timeouts (53 re-syncs in one run). What a re-sync costs Redis is
	// measured by BenchmarkFleetScale; that none republishes what others wrote is
	// TestResyncPushesOnlyOwnChanges.
	for i, m := range members {
		t.Logf("member %s: %d shard re-syncs", m.name, m.st.Stats().Reconciles-reconciles[i])
	}
	ctx := context.Background()
	for _, k := range []store.Key{
		{Scope: pool.ScopePair, Exit: onDead, Origin: originA},
		{Scope: pool.ScopePair, Exit: onLive, Origin: originA},
		{Scope: pool.ScopePair, Exit: during, Origin: originB},
	} {
		key := redisstore.StateKey(ns, k)
		if _, ok := storetest.Eventually(5*time.Second, func() bool { return a.client.Exists(ctx, key).Val() == 1 }); !ok {
			t.Errorf("%s is not in Redis after the failover", key)
		}
	}
	load.stop()
	load.check(t, time.Second)
}
