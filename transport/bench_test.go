package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

// The transport's benchmarks. Run them with
//
//	go test -run '^$' -bench . -benchmem -count 6 ./transport
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
//   - A pool from NewPool(WithExits(...)) with every other option at its default (LeastLoaded
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
// runtime.GC(), divided by the number of pair breakers built: it covers the breaker, the pair
// struct, the state-change closure and the origin's map entry.
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
	p, err := NewPool(WithExits(list...))
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

// BenchmarkPick measures the pool's pick cost: p.pick(ctx, now, origin) then p.release(now, &t),
// the path of a request that got its permits and gave them back without a verdict, for a random
// origin per op. See benchPickEnv for the setup. Target: < 500 ns/op and 0 allocs/op at 100,000
// exits (0 allocs holds only where the pair breakers already exist; see benchPickEnv).
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
					t, err := p.pick(ctx, now, keys[r.next()%n])
					if err != nil {
						b.Fatal(err)
					}
					p.release(now, &t)
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
						t, err := p.pick(ctx, now, keys[r.next()%n])
						if err != nil {
							// A copy, so that only this branch moves an error to the heap.
							e := err
							failed.CompareAndSwap(nil, &e)
							continue
						}
						p.release(now, &t)
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

// ---------------------------------------------------------------------------------------------
// BenchmarkMiddleware

// benchPayload is the canned response's body: small, and served as JSON so that the default
// classifier has no reason to peek at it (an HTML page under 32 KiB would be peeked at).
var benchPayload = []byte(`{"ok":true}` + "\n")

// benchCannedRT is a base RoundTripper that answers every request 200 with benchPayload, without
// a network. To keep its own cost out of the comparison it allocates nothing per request: each
// response and its body live in one benchCanned, recycled through a sync.Pool when the body is
// closed (so RunParallel goroutines never share a response). The header is shared and never
// written to.
type benchCannedRT struct {
	pool   sync.Pool
	header http.Header
}

type benchCanned struct {
	resp http.Response
	body benchCannedBody
}

// benchCannedBody is a tiny reader over benchPayload, reset (off = 0) for every response.
type benchCannedBody struct {
	c   *benchCanned
	rt  *benchCannedRT
	off int
}

func newBenchCannedRT() *benchCannedRT {
	rt := &benchCannedRT{header: http.Header{
		"Content-Type":   {"application/json"},
		"Content-Length": {fmt.Sprint(len(benchPayload))},
	}}
	rt.pool.New = func() any {
		c := &benchCanned{}
		c.body.c, c.body.rt = c, rt
		return c
	}
	return rt
}

func (rt *benchCannedRT) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	c := rt.pool.Get().(*benchCanned)
	c.body.off = 0
	c.resp = http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: rt.header, Body: &c.body, ContentLength: int64(len(benchPayload)), Request: req,
	}
	return &c.resp, nil
}

func (b *benchCannedBody) Read(p []byte) (int, error) {
	if b.off >= len(benchPayload) {
		return 0, io.EOF
	}
	n := copy(p, benchPayload[b.off:])
	b.off += n
	return n, nil
}

func (b *benchCannedBody) Close() error {
	b.rt.pool.Put(b.c)
	return nil
}

// benchRoundTrip sends req through rt, reads the body to its end into buf and closes it, as a
// well-behaved caller does. buf is the caller's, allocated once per goroutine: a buffer declared
// here would escape (it is passed to an interface method) and cost an allocation per request.
func benchRoundTrip(rt http.RoundTripper, req *http.Request, buf []byte) error {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	for {
		if _, err = resp.Body.Read(buf); err != nil {
			break
		}
	}
	resp.Body.Close()
	if err != io.EOF {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// benchRun runs benchRoundTrip in a loop, serially or with b.RunParallel. Each goroutine builds its
// own request once; RoundTrip never modifies it, so it is reused for every op.
func benchRun(b *testing.B, rt http.RoundTripper, url string, parallel bool) {
	b.Helper()
	b.ReportAllocs()
	if !parallel {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 512)
		b.ResetTimer()
		for b.Loop() {
			if err := benchRoundTrip(rt, req, buf); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	var failed atomic.Pointer[error]
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			failed.CompareAndSwap(nil, &err)
			return
		}
		buf := make([]byte, 512)
		for pb.Next() {
			if err := benchRoundTrip(rt, req, buf); err != nil {
				e := err // a copy, so that only this branch moves an error to the heap
				failed.CompareAndSwap(nil, &e)
			}
		}
	})
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
}

// BenchmarkMiddleware measures the transport's own cost per request: "bare" calls the canned base
// directly; "ours" is a Transport over the same base (WithBase), with 16 exits and every other
// option at its default (header timeout on, default classifier, no observers), on one origin.
// Both read the body to EOF and close it. Target: ours − bare < 1.5 µs and a handful of allocs.
func BenchmarkMiddleware(b *testing.B) {
	base := newBenchCannedRT()
	exits := make([]*Exit, 16)
	for i := range exits {
		exits[i] = MustParseExit(fmt.Sprintf("10.0.0.%d:3128", i+1))
	}
	ours, err := New(WithExits(exits...), WithBase(base))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ours.Close() })
	const url = "http://origin.bench.example/item"
	for _, mode := range []string{"serial", "parallel"} {
		parallel := mode == "parallel"
		b.Run("mode="+mode+"/impl=bare", func(b *testing.B) { benchRun(b, base, url, parallel) })
		b.Run("mode="+mode+"/impl=ours", func(b *testing.B) { benchRun(b, ours, url, parallel) })
	}
}

// ---------------------------------------------------------------------------------------------
// BenchmarkLoopback

// BenchmarkLoopback is a real round trip through one in-process proxytest proxy to a loopback
// httptest origin: "bare" is an http.Transport with Proxy: http.ProxyURL(proxy); "ours" is
// New(WithExits(that proxy)) with its default per-exit base. Both hit the same proxy and origin in
// the same run, keep connections to the proxy alive, and read and close every body. The proxy
// opens a fresh upstream connection per request (see proxytest), for both alike.
func BenchmarkLoopback(b *testing.B) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	}))
	b.Cleanup(origin.Close)
	px, err := proxytest.Start(proxytest.Config{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { px.Close() })

	bare := &http.Transport{Proxy: http.ProxyURL(px.URL())}
	b.Cleanup(bare.CloseIdleConnections)
	exit, err := NewExit(px.URL())
	if err != nil {
		b.Fatal(err)
	}
	ours, err := New(WithExits(exit))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ours.Close() })

	url := origin.URL + "/"
	// One request each before timing, so that neither pays for its first connection in the run.
	for _, rt := range []http.RoundTripper{bare, ours} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if err := benchRoundTrip(rt, req, make([]byte, 512)); err != nil {
			b.Fatal(errors.Join(errors.New("warm-up"), err))
		}
	}
	for _, mode := range []string{"serial", "parallel"} {
		parallel := mode == "parallel"
		b.Run("mode="+mode+"/impl=bare", func(b *testing.B) { benchRun(b, bare, url, parallel) })
		b.Run("mode="+mode+"/impl=ours", func(b *testing.B) { benchRun(b, ours, url, parallel) })
	}
}
