package store_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
	sqlitestore "github.com/proxybreaker/proxybreaker/store/sqlite"
	"github.com/proxybreaker/proxybreaker/transport"
)

// variants are the transports a request-path benchmark compares.
var variants = []string{"bare", "observer", "sqlite", "redis"}

// newVariant builds the transport of one variant for one workload, on the canned base; addr is
// the Redis the "redis" variant uses. The transport and its store are closed when b ends.
func newVariant(b *testing.B, workload, variant, addr string, runs *atomic.Int64) *transport.Transport {
	b.Helper()
	quiet := slog.New(slog.DiscardHandler)
	// The base answers at once, 200 — and 429 through x0 when flapping — allocating nothing, so
	// that the variants' allocations are their own.
	base := testkit.NewCanned(testkit.CannedReply{})
	popts := []pool.Option{pool.WithExits(storetest.Exits("x", 10)...)}
	if workload == "flapping" {
		base = testkit.NewCanned(testkit.CannedReply{},
			testkit.CannedRule{When: testkit.ViaExit("x0"), Reply: testkit.CannedReply{Status: http.StatusTooManyRequests}})
		popts = append(popts, pool.WithPairSettings(breaker.Settings{
			BaseCooldown: time.Millisecond, MaxCooldown: 4 * time.Millisecond, Jitter: -1, FailureThreshold: 1,
		}))
	}
	topts := []transport.Option{transport.WithHeaderTimeout(-1), transport.WithBase(base)}
	var st store.Store
	switch variant {
	case "observer":
		topts = append(topts, transport.WithObserver(transport.NopObserver{})) // the pool's events too
	case "sqlite":
		s, err := sqlitestore.Open(filepath.Join(b.TempDir(), "state.db"), sqlitestore.Settings{Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		st = s
	case "redis":
		c := goredis.NewClient(&goredis.Options{Addr: addr})
		b.Cleanup(func() { c.Close() })
		// A namespace per run: a run must not inherit the previous run's trips and claims.
		ns := fmt.Sprintf("bench-%s-%d", workload, runs.Add(1))
		s, err := redisstore.New(c, redisstore.Settings{Namespace: ns, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		st = s
	}
	var p *pool.Pool
	var err error
	if st != nil {
		b.Cleanup(func() { st.Close() }) // after the transport's: cleanups run last first
		p, err = store.NewPool(st, popts...)
	} else {
		p, err = pool.New(popts...)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(p.Close)
	tr, err := transport.New(p, topts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tr.Close() })
	return tr
}

func roundTrip(b *testing.B, tr *transport.Transport, req *http.Request) {
	resp, err := tr.RoundTrip(req)
	if err != nil {
		b.Error(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// BenchmarkRequestPath is the store's cost on the request path: the same transport, on the same
// canned base, without a store ("bare"), with an observer that does nothing ("observer": what any
// observer costs the transport), with the SQLite store and with the Redis store. "steady": every
// exit healthy, no transition. "flapping": one of ten exits answers 429 and its pair trips, probes
// and trips again every few milliseconds, so the store's StateChanged, its goroutine and (Redis)
// a probe claim per window are busy throughout; "trips" is how many there were in the run.
//
//	go test -run '^$' -bench '^BenchmarkRequestPath$' -benchmem -count 6 ./store
//
// On a shared machine the sub-benchmarks, run one after another, drift apart with the load; the
// ratios are better read from BenchmarkRequestPathInterleaved.
func BenchmarkRequestPath(b *testing.B) {
	addr := servertest.Redis(b)
	var runs atomic.Int64
	for _, workload := range []string{"steady", "flapping"} {
		for _, variant := range variants {
			b.Run(workload+"/"+variant, func(b *testing.B) {
				tr := newVariant(b, workload, variant, addr, &runs)
				req, _ := http.NewRequest(http.MethodGet, "http://a.example/", nil)
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						roundTrip(b, tr, req)
					}
				})
				b.StopTimer()
				if workload == "flapping" {
					p, _ := storetest.Pair(tr.Pool(), "x0", "a.example")
					b.ReportMetric(float64(p.Trips), "trips")
				}
			})
		}
	}
}

// BenchmarkRequestPathInterleaved measures the four variants of BenchmarkRequestPath in one loop,
// a request through each in turn, timing each request, so that a change in the machine's load
// falls on all four alike: it reports each variant's mean ns per request and the stores' ratios
// to "bare", from one run.
//
//	go test -run '^$' -bench '^BenchmarkRequestPathInterleaved$' -count 6 ./store
func BenchmarkRequestPathInterleaved(b *testing.B) {
	addr := servertest.Redis(b)
	var runs atomic.Int64
	for _, workload := range []string{"steady", "flapping"} {
		b.Run(workload, func(b *testing.B) {
			trs := make([]*transport.Transport, len(variants))
			for i, v := range variants {
				trs[i] = newVariant(b, workload, v, addr, &runs)
			}
			req, _ := http.NewRequest(http.MethodGet, "http://a.example/", nil)
			spent := make([]time.Duration, len(variants))
			b.ResetTimer()
			for i := range b.N {
				k := i % len(variants)
				start := time.Now()
				roundTrip(b, trs[k], req)
				spent[k] += time.Since(start)
			}
			b.StopTimer()
			per := make([]float64, len(variants))
			for k, v := range variants {
				per[k] = float64(spent[k].Nanoseconds()) / float64(max(b.N/len(variants), 1))
				b.ReportMetric(per[k], v+"-ns/req")
			}
			b.ReportMetric(per[2]/per[0], "sqlite/bare")
			b.ReportMetric(per[3]/per[0], "redis/bare")
			b.ReportMetric(per[1]/per[0], "observer/bare")
		})
	}
}
