package redisstore_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
)

// clusterMasters is the size of the test cluster: three masters, no replicas.
const clusterMasters = 3

// deployment is a Redis a fleet shares: client makes the client of the fleet's i-th member.
type deployment struct {
	client func(t testing.TB, i int) goredis.UniversalClient
}

// member makes the fleet's i-th member, connected to d.
func (d deployment) member(t testing.TB, i int, name string, cfg memberConfig) *member {
	t.Helper()
	cfg.client = d.client(t, i)
	return newMember(t, "", name, cfg)
}

// standalone is one redis-server.
func standalone(t testing.TB) deployment {
	addr := servertest.Redis(t)
	return deployment{client: func(t testing.TB, _ int) goredis.UniversalClient { return newClient(t, addr) }}
}

// cluster is a Redis Cluster of clusterMasters masters. Member i's ClusterClient is seeded with
// master i first, so that the members find the cluster through different nodes.
func cluster(t testing.TB) (deployment, *servertest.RedisCluster) {
	c := servertest.StartRedisCluster(t, clusterMasters)
	return on(c), c
}

// on is the deployment of c: member i's ClusterClient is seeded with master i first.
func on(c *servertest.RedisCluster) deployment {
	return deployment{client: func(t testing.TB, i int) goredis.UniversalClient {
		addrs := c.Addrs()
		k := i % len(addrs)
		return newClusterClient(t, append(addrs[k:], addrs[:k]...))
	}}
}

func newClusterClient(t testing.TB, addrs []string) *goredis.ClusterClient {
	t.Helper()
	c := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:       addrs,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// wantOnlyOn checks that key exists on master and that every other master redirects it there.
func wantOnlyOn(t *testing.T, c *servertest.RedisCluster, key string, master int) {
	t.Helper()
	for i := range clusterMasters {
		got, err := c.Do(i, "EXISTS", key)
		switch {
		case i == master && (err != nil || got != "1"):
			t.Errorf("EXISTS %s on its master %d = %q, %v; want 1", key, i, got, err)
		case i != master && (err == nil || !strings.HasPrefix(err.Error(), "MOVED ")):
			t.Errorf("EXISTS %s on master %d = %q, %v; want MOVED to master %d", key, i, got, err, master)
		}
	}
}

// TestRedisCluster runs the fleet tests on a Redis Cluster of three masters, each fleet's members
// using go-redis ClusterClients seeded with different masters, each test in a namespace of its
// own:
//   - a trip and a parked exit on member a reach member b through the cluster (sharded pub/sub),
//     and each entry is on the master of its shard alone;
//   - the keys of 1,000 exits fall on every master, each within 2× of the mean;
//   - the fleet-wide probe claim holds: one probe for the fleet, whose success closes the pair
//     on both members;
//   - the rate-limit leases hold the fleet's combined rate, the bucket's state on its shard's
//     master.
func TestRedisCluster(t *testing.T) {
	d, c := cluster(t)
	t.Run("SharesTripAndParkedExit", func(t *testing.T) {
		testSharesTripAndParkedExit(t, d, "trip")
		for _, k := range []store.Key{{Scope: pool.ScopePair, Exit: "x1", Origin: originA}, {Scope: pool.ScopeExit, Exit: "x0"}} {
			key := redisstore.StateKey("trip", k)
			wantOnlyOn(t, c, key, c.Owner(key))
		}
	})
	t.Run("KeysSpreadOverMasters", func(t *testing.T) {
		// 1,000 exits' entries: every master serves its share, within 2× of the mean either way.
		per := make([]int, clusterMasters)
		const exits = 1000
		for i := range exits {
			per[c.Owner(redisstore.StateKey("spread", store.Key{Scope: pool.ScopeExit, Exit: fmt.Sprintf("x%d", i)}))]++
		}
		mean := exits / clusterMasters
		for m, n := range per {
			if n > 2*mean || 2*n < mean {
				t.Errorf("master %d serves %d of %d exits' keys, want within 2× of the mean %d (all: %v)", m, n, exits, mean, per)
			}
		}
		t.Logf("exits' keys per master: %v", per)
	})
	t.Run("SendsOneProbe", func(t *testing.T) {
		testSendsOneProbe(t, d, "probe")
	})
	t.Run("RateLimitHoldsCombinedRate", func(t *testing.T) {
		testRateLimitHoldsCombinedRate(t, d, "rate")
		key := strings.Replace(redisstore.StateKey("rate", store.Key{Scope: pool.ScopeExit, Exit: "x0"}), ":b:exit:x0:", ":rl:x0", 1)
		wantOnlyOn(t, c, key, c.Owner(key))
	})
}
