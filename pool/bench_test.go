package pool

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// The pool's benchmarks. Run them with
//
//	go test -run '^$' -bench . -benchmem -count 6 ./pool
//
// BenchmarkPick at 100,000 exits × 1,000 origins holds ~10 M breakers (several GB) and creates a
// pair breaker per op (see benchPickEnv): give that cell a fixed iteration count, for example
// -bench 'Pick/exits=100000/origins=1000/' -benchtime 200000x.

// ---------------------------------------------------------------------------------------------
// BenchmarkPick

// benchOpenShare is the share of (exit, origin) pairs whose breaker is OPEN during BenchmarkPick.
const benchOpenShare = 10 // one in ten

// benchWarmLimit is the largest exits × origins for which BenchmarkPick creates a CLOSED breaker
// for every pair up front (about 300 B each, so ~300 MB at the limit).
const benchWarmLimit = 1 << 20

// benchPickEnv is a pool set up for BenchmarkPick. The setup, precisely:
//
//   - A pool from New(WithExits(...)) with every other option at its default (LeastLoaded
//     selection, default pair, exit and origin-guard settings, system clock, math/rand/v2). The
//     exits are "10.a.b.c:3128", tier 0, weight 1; nothing is ever dialled.
//   - origins origin keys "o0000.bench.example" …, each given its originState (p.origin) before
//     the memory baseline is taken, so B/pair counts pair breakers only.
//   - OPEN pairs: for every origin, exactly exits/10 distinct exits drawn uniformly at random
//     (partial Fisher–Yates, fixed seed) get a pair breaker built white-box through the pool's own
//     p.pairFor and parked OPEN by a permanent failure (breaker.Failure{Permanent: true}): OPEN for
//     ParkFor (15 min + jitter), far longer than any run. At 100,000 × 1,000 that is 10 M breakers,
//     built once per process and cached (one environment at a time).
//   - CLOSED pairs: when exits × origins ≤ benchWarmLimit (every cell but 100,000 × 1,000), every
//     other pair also gets its (CLOSED, fresh) breaker up front, as in a pool whose pairs have all
//     failed once. At 100,000 × 1,000 that would be 90 M breakers (~30 GB), so the CLOSED pairs
//     have no breaker there, as in a pool that has never seen them fail. Either way the pool makes
//     no breaker during a pick: a pair gets one on its first failure.
//   - now is one instant taken at the end of setup and passed to every pick: the transport reads
//     its clock once per request and hands the instant down (that read is part of
//     BenchmarkMiddleware, not of this one). A fixed instant also keeps the background sweep
//     (every idleTTL/2 = 5 min) from starting.
//
// B/pair is runtime.MemStats.HeapAlloc after the pairs were built minus before, both right after
// runtime.GC(), divided by the number of pair breakers built: it covers the pair (its breaker
// embedded), the origin's map entry and, for a pair out of CLOSED, its entries in the origin's due
// heap (due.go). Issue 16's target: ≤ 200 B.
type benchPickEnv struct {
	exits, origins int
	p              *Pool
	keys           []string
	now            time.Time
	pairs          int     // pair breakers built by the setup
	open           int     // of which OPEN
	bytesPerPair   float64 // B/pair
	warm           bool    // every pair has a breaker
}

// benchPickCache keeps the last environment, so that the serial and parallel variants and every
// -count round share one setup; only one is kept because the largest holds several GB.
var benchPickCache struct {
	mu  sync.Mutex
	env *benchPickEnv
}

func benchPickSetup(b *testing.B, exits, origins int) *benchPickEnv {
	b.Helper()
	benchPickCache.mu.Lock()
	defer benchPickCache.mu.Unlock()
	if env := benchPickCache.env; env != nil && env.exits == exits && env.origins == origins {
		return env
	}
	benchPickCache.env = nil
	runtime.GC() // give back the previous environment before building the next

	list := make([]*Exit, exits)
	for i := range list {
		list[i] = MustParseExit(fmt.Sprintf("10.%d.%d.%d:3128", i>>16&255, i>>8&255, i&255))
	}
	p, err := New(WithExits(list...))
	if err != nil {
		b.Fatal(err)
	}
	env := &benchPickEnv{exits: exits, origins: origins, p: p, keys: make([]string, origins)}
	states := make([]*originState, origins)
	for i := range env.keys {
		env.keys[i] = fmt.Sprintf("o%04d.bench.example", i)
		states[i] = p.origin(env.keys[i])
	}
	all := p.set.Load().all
	now := time.Now()

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	rng := rand.New(rand.NewPCG(uint64(exits), uint64(origins)))
	perm := make([]int32, exits)
	for i := range perm {
		perm[i] = int32(i)
	}
	k := exits / benchOpenShare
	for _, o := range states {
		// A partial Fisher–Yates shuffle: perm[:k] is a uniform random k-subset, whatever order
		// perm was left in by the previous origin.
		for j := range k {
			r := j + rng.IntN(exits-j)
			perm[j], perm[r] = perm[r], perm[j]
			pr, ok := p.pairFor(o, all[perm[j]])
			if !ok {
				b.Fatal("origin dropped during setup")
			}
			pm, ok := pr.b.Acquire(now)
			if !ok {
				b.Fatal("fresh pair refused a permit")
			}
			pm.Failure(now, breaker.Failure{Permanent: true, Reason: "bench"})
			if st := pr.b.State(now); st != breaker.Open {
				b.Fatalf("pair parked by a permanent failure is %v, want open", st)
			}
		}
	}
	env.open = k * origins
	env.pairs = env.open
	if exits*origins <= benchWarmLimit {
		env.warm = true
		for _, o := range states {
			for _, es := range all {
				if _, ok := p.pairFor(o, es); !ok {
					b.Fatal("origin dropped during setup")
				}
			}
		}
		env.pairs = exits * origins
	}
	perm = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	env.bytesPerPair = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(env.pairs)
	env.now = now
	benchPickCache.env = env
	return env
}

// benchRand is a splitmix64 generator: one per goroutine, on its stack, so drawing an origin
// costs a few instructions and allocates nothing.
type benchRand uint64

func (r *benchRand) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// benchSeed hands every goroutine of a benchmark its own random stream.
var benchSeed atomic.Uint64

// BenchmarkPick measures the pool's pick cost: p.PickAt(ctx, now, Request{Origin: origin}) then lease.ReleaseAt(now),
// the path of a request that got its permits and gave them back without a verdict, for a random
// origin per op. See benchPickEnv for the setup. Targets (issue 16), serial: ≤ 300 ns/op at
// 100,000 exits, ≤ 500 ns/op at 100,000 exits × 1,000 origins, 0 allocs/op everywhere (0 allocs
// holds only where the pair breakers already exist; see benchPickEnv). bench/measure.Pick measures
// the same through the public API beside a peer, for bench/RESULTS.md.
func BenchmarkPick(b *testing.B) {
	for _, exits := range []int{10, 1000, 100000} {
		for _, origins := range []int{1, 1000} {
			name := fmt.Sprintf("exits=%d/origins=%d", exits, origins)
			b.Run(name+"/mode=serial", func(b *testing.B) {
				env := benchPickSetup(b, exits, origins)
				// Everything the loop needs is prepared here: a context without values, the keys,
				// one instant, and a generator on the stack.
				p, keys, now, ctx := env.p, env.keys, env.now, context.Background()
				n := uint64(len(keys))
				r := benchRand(benchSeed.Add(1))
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					t, err := p.PickAt(ctx, now, Request{Origin: keys[r.next()%n]})
					if err != nil {
						b.Fatal(err)
					}
					t.ReleaseAt(now)
				}
				benchPickReport(b, env)
			})
			b.Run(name+"/mode=parallel", func(b *testing.B) {
				env := benchPickSetup(b, exits, origins)
				p, keys, now, ctx := env.p, env.keys, env.now, context.Background()
				n := uint64(len(keys))
				var failed atomic.Pointer[error]
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					r := benchRand(benchSeed.Add(1) << 32)
					for pb.Next() {
						t, err := p.PickAt(ctx, now, Request{Origin: keys[r.next()%n]})
						if err != nil {
							// A copy, so that only this branch moves an error to the heap.
							e := err
							failed.CompareAndSwap(nil, &e)
							continue
						}
						t.ReleaseAt(now)
					}
				})
				if err := failed.Load(); err != nil {
					b.Fatal(*err)
				}
				// After the loop: b.ResetTimer deletes metrics reported before it.
				benchPickReport(b, env)
			})
		}
	}
}

func benchPickReport(b *testing.B, env *benchPickEnv) {
	b.ReportMetric(env.bytesPerPair, "B/pair")
	b.ReportMetric(float64(env.pairs), "pairs")
}
