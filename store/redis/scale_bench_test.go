package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
)

// The fleet of BenchmarkFleetScale: 32 members, each a pool of 100,000 exits that serves 1,000
// origins, on a Redis Cluster of three masters; 1,000 live entries before the measurements.
const (
	scaleMembers = 32
	scaleExits   = 100_000
	scaleOrigins = 1_000
	scaleLive    = 1_000
	// scaleRequests is how many requests the fleet sends in the request phase; one in
	// scaleChurn trips a pair (the simulation's rate of trips, probes and closes: about 1%).
	scaleRequests = 64_000
	scaleChurn    = 100
	// scaleTrips is how many trips each run times on their way to every other member.
	scaleTrips = 200
	// scaleResyncWithin bounds the wait for a fleet-wide re-sync: past it the benchmark reports
	// how many members were healthy again (resync-healthy), and the figures up to then.
	scaleResyncWithin = 3 * time.Minute
)

// scaleMember is one member of the fleet: a store and a pool on its own cluster client, with no
// transport (requests are picks and verdicts).
type scaleMember struct {
	pool.NopObserver
	st      *redisstore.Store
	p       *pool.Pool
	c       *goredis.ClusterClient
	opened  atomic.Int64 // pair trips of its own pool
	timeout atomic.Int64 // commands and pipelines that timed out
}

func (m *scaleMember) StateChanged(c pool.StateChange) {
	if c.Scope == pool.ScopePair && c.To == breaker.Open {
		m.opened.Add(1)
	}
}

func (m *scaleMember) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (m *scaleMember) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		m.countTimeout(err)
		return err
	}
}

func (m *scaleMember) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		m.countTimeout(err)
		return err
	}
}

func (m *scaleMember) countTimeout(err error) {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		m.timeout.Add(1)
	}
}

// scaleExitList returns the exits of a member's pool: loopback addresses, never dialled.
func scaleExitList() []*pool.Exit {
	out := make([]*pool.Exit, scaleExits)
	for i := range out {
		out[i] = pool.MustParseExit(fmt.Sprintf("http://127.0.0.%d:%d", 1+i/60000, 1024+i%60000)).WithLabel("x" + strconv.Itoa(i))
	}
	return out
}

func scaleOrigin(i int) string { return "o" + strconv.Itoa(i) + ".example" }

func newScaleMember(b *testing.B, addrs []string, i int) *scaleMember {
	b.Helper()
	k := i % len(addrs)
	m := &scaleMember{c: goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:       append(append([]string(nil), addrs[k:]...), addrs[:k]...),
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second,
	})}
	m.c.AddHook(m)
	st, err := redisstore.New(m.c, redisstore.Settings{
		Namespace: "scale", Member: "m" + strconv.Itoa(i), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	p, err := store.NewPool(st, pool.WithExits(scaleExitList()...), pool.WithObserver(m), pool.WithIdleTTL(1000*time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	m.st, m.p = st, p
	b.Cleanup(func() {
		p.Close()
		st.Close()
		m.c.Close()
	})
	return m
}

// trip trips the pair (exit, origin) on m's pool with 429s.
func (m *scaleMember) trip(b *testing.B, exit, origin string) {
	b.Helper()
	before := m.opened.Load()
	for range 20 {
		l, err := m.p.Pick(context.Background(), pool.Request{Origin: origin, Exit: exit})
		if err != nil {
			break
		}
		l.Report(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: 20 * time.Minute})
		if m.opened.Load() > before {
			return
		}
	}
	b.Fatalf("member %s: (%s, %s) did not trip", m.st.Member(), exit, origin)
}

// waitAll waits until cond holds for every member, polling; it fails the benchmark after within.
func waitAll(b *testing.B, members []*scaleMember, within time.Duration, cond func(*scaleMember) bool) time.Duration {
	b.Helper()
	took, ok := waitFor(members, within, cond)
	if !ok {
		for _, m := range members {
			b.Logf("member %s: %+v %+v", m.st.Member(), m.st.Health(), m.st.Stats())
		}
		b.Fatalf("condition not reached by every member within %v", within)
	}
	return took
}

// waitFor waits until cond holds for every member, polling, at most within; it reports how long
// it waited and whether cond held.
func waitFor(members []*scaleMember, within time.Duration, cond func(*scaleMember) bool) (time.Duration, bool) {
	start := time.Now()
	for {
		ok := true
		for _, m := range members {
			if !cond(m) {
				ok = false
				break
			}
		}
		if ok || time.Since(start) > within {
			return time.Since(start), ok
		}
		time.Sleep(100 * time.Microsecond) // polling atomics of other goroutines
	}
}

// masterStats sums INFO fields over the cluster's masters: the calls of every command
// (commandstats), total_net_output_bytes, used_memory and the keys (DBSIZE) of each master.
type masterStats struct {
	calls, outBytes, memory int64
	keys                    []int64
}

func readMasters(b *testing.B, c *servertest.RedisCluster) masterStats {
	b.Helper()
	var s masterStats
	for i := range c.Addrs() {
		info, err := c.Do(i, "INFO", "all")
		if err != nil {
			b.Fatal(err)
		}
		for l := range strings.Lines(info) {
			l = strings.TrimSpace(l)
			if rest, ok := strings.CutPrefix(l, "cmdstat_"); ok {
				if j := strings.Index(rest, "calls="); j >= 0 {
					n, _ := strconv.ParseInt(strings.SplitN(rest[j+6:], ",", 2)[0], 10, 64)
					s.calls += n
				}
			}
			if v, ok := strings.CutPrefix(l, "total_net_output_bytes:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				s.outBytes += n
			}
			if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				s.memory += n
			}
		}
		n, err := c.Do(i, "DBSIZE")
		if err != nil {
			b.Fatal(err)
		}
		k, _ := strconv.ParseInt(n, 10, 64)
		s.keys = append(s.keys, k)
	}
	return s
}

func sumStats(members []*scaleMember) (published, applied, reconciles, timeouts uint64) {
	for _, m := range members {
		s := m.st.Stats()
		published += s.Published
		applied += s.Applied
		reconciles += s.Reconciles
		timeouts += uint64(m.timeout.Load())
	}
	return
}

// BenchmarkFleetScale runs a fleet of 32 members, each with 100,000 exits serving 1,000 origins,
// on a Redis Cluster of three masters, and reports what the fleet costs Redis and how fast it is:
//   - cmds/1000req: Redis commands (every master's commandstats) per 1,000 requests while the
//     fleet sends 64,000 requests, one in 100 tripping a pair, the rest successes;
//   - keys-max/mean, keys-min/mean: the keys on the most and least loaded master over the mean;
//   - trip-p50-ms, trip-p99-ms: from a trip on one member until all 31 others applied it, over
//     200 trips per run;
//   - coldstart-ms: a 33rd member's start, from New to healthy, with 1,000+ live entries, and
//     poolbuild-ms: building such a pool without a store (the rest is the pull);
//   - resync-*: a fleet-wide re-sync (every subscription killed, as a failover does): the time
//     until every member is healthy (at most 3 min: resync-healthy counts those that were), the
//     entries published again, the pub/sub output (MiB) and the Redis calls that timed out (each
//     one restarts a re-sync);
//   - redis-MiB: the masters' used_memory at the end.
//
// The fleet is built once per run, in a minute or two: run it once, with -benchtime 1x.
//
//	go test -run '^$' -bench '^BenchmarkFleetScale$' -benchtime 1x -timeout 30m ./store/redis
func BenchmarkFleetScale(b *testing.B) {
	c := servertest.StartRedisCluster(b, 3)
	addrs := c.Addrs()
	members := make([]*scaleMember, scaleMembers)
	for i := range members {
		members[i] = newScaleMember(b, addrs, i)
	}
	waitAll(b, members, time.Minute, func(m *scaleMember) bool { return !m.st.Health().Degraded })
	rng := rand.New(rand.NewPCG(1, 2))
	used := map[[2]int]bool{}
	pair := func() (string, string) {
		for {
			e, o := rng.IntN(scaleExits), rng.IntN(scaleOrigins)
			if !used[[2]int{e, o}] {
				used[[2]int{e, o}] = true
				return "x" + strconv.Itoa(e), scaleOrigin(o)
			}
		}
	}
	// The live entries: each member trips its share.
	for i := range scaleLive {
		e, o := pair()
		members[i%scaleMembers].trip(b, e, o)
	}
	waitAll(b, members, 2*time.Minute, func(m *scaleMember) bool {
		return m.st.Stats().Applied+uint64(m.opened.Load()) >= scaleLive
	})

	// Requests, with churn.
	before := readMasters(b, c)
	var wg sync.WaitGroup
	per := scaleRequests / scaleMembers
	trips := make([][2]string, 0, scaleRequests/scaleChurn)
	for range scaleRequests / scaleChurn {
		e, o := pair()
		trips = append(trips, [2]string{e, o})
	}
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 7))
			for n := range per {
				if n%scaleChurn == 0 {
					t := trips[(i*per+n)/scaleChurn]
					m.trip(b, t[0], t[1])
					continue
				}
				l, err := m.p.Pick(context.Background(), pool.Request{Origin: scaleOrigin(r.IntN(scaleOrigins))})
				if err == nil {
					l.Report(pool.Verdict{})
				}
			}
		}()
	}
	wg.Wait()
	after := readMasters(b, c)
	cmdsPer1000 := float64(after.calls-before.calls) * 1000 / float64(per*scaleMembers)

	// Trips to everyone.
	lat := make([]time.Duration, 0, scaleTrips*b.N)
	b.ResetTimer()
	for i := range scaleTrips * b.N {
		from := members[i%scaleMembers]
		var others []*scaleMember
		want := map[*scaleMember]uint64{}
		for _, m := range members {
			if m != from {
				others = append(others, m)
				want[m] = m.st.Stats().Applied + 1
			}
		}
		e, o := pair()
		start := time.Now()
		from.trip(b, e, o)
		waitAll(b, others, 30*time.Second, func(m *scaleMember) bool { return m.st.Stats().Applied >= want[m] })
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "trip-p50-ms")
	b.ReportMetric(ms(lat[min(len(lat)-1, len(lat)*99/100)]), "trip-p99-ms")
	b.ReportMetric(cmdsPer1000, "cmds/1000req")

	// Keys per master.
	keys := readMasters(b, c).keys
	var total int64
	for _, k := range keys {
		total += k
	}
	mean := float64(total) / float64(len(keys))
	b.ReportMetric(float64(slices.Max(keys))/mean, "keys-max/mean")
	b.ReportMetric(float64(slices.Min(keys))/mean, "keys-min/mean")
	b.Logf("keys per master %v", keys)

	// Cold start of one more member: building its pool, then pulling; the pool alone, for scale.
	start := time.Now()
	bare, err := pool.New(pool.WithExits(scaleExitList()...))
	if err != nil {
		b.Fatal(err)
	}
	build := time.Since(start)
	bare.Close()
	start = time.Now()
	cold := newScaleMember(b, addrs, scaleMembers)
	waitAll(b, []*scaleMember{cold}, time.Minute, func(m *scaleMember) bool { return !m.st.Health().Degraded })
	b.ReportMetric(ms(time.Since(start)), "coldstart-ms")
	b.ReportMetric(ms(build), "poolbuild-ms")
	b.Logf("cold member: %+v", cold.st.Stats())

	// A fleet-wide re-sync.
	members = append(members, cold)
	pub0, _, rec0, to0 := sumStats(members)
	before = readMasters(b, c)
	start = time.Now()
	for i := range addrs {
		if _, err := c.Do(i, "CLIENT", "KILL", "TYPE", "pubsub"); err != nil {
			b.Fatal(err)
		}
	}
	recBefore := map[*scaleMember]uint64{}
	for _, m := range members {
		recBefore[m] = m.st.Stats().Reconciles
	}
	synced := func(m *scaleMember) bool { return m.st.Stats().Reconciles > recBefore[m] && !m.st.Health().Degraded }
	took, _ := waitFor(members, scaleResyncWithin, synced)
	healthy := 0
	for _, m := range members {
		if synced(m) {
			healthy++
		}
	}
	b.ReportMetric(float64(healthy), "resync-healthy")
	after = readMasters(b, c)
	pub1, _, rec1, to1 := sumStats(members)
	b.ReportMetric(ms(took), "resync-ms")
	b.ReportMetric(float64(pub1-pub0), "resync-republished")
	b.ReportMetric(float64(after.outBytes-before.outBytes)/(1<<20), "resync-out-MiB")
	b.ReportMetric(float64(to1-to0), "resync-timeouts")
	b.ReportMetric(float64(after.memory)/(1<<20), "redis-MiB")
	b.Logf("re-sync: %d re-syncs completed, %d Redis calls", rec1-rec0, after.calls-before.calls)
}
