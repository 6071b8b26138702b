package measure

import (
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// canned answers every request at once: 200, or 429 Retry-After 1 s for hosts starting "f". It
// allocates nothing per request (testkit.Canned), so the figures are ours alone.
var canned = testkit.NewCanned(testkit.CannedReply{}, testkit.CannedRule{
	When:  func(req *http.Request) bool { return strings.HasPrefix(req.URL.Host, "f") },
	Reply: testkit.CannedReply{Status: http.StatusTooManyRequests, Header: testkit.RetryAfter(1)},
})

// newOurs returns a Transport over base and a pool made with opts.
func newOurs(base http.RoundTripper, opts ...pool.Option) (*transport.Transport, error) {
	p, err := pool.New(opts...)
	if err != nil {
		return nil, err
	}
	return transport.New(p, transport.WithBase(base))
}

// ScaleRow is the cost of one request through ours over a canned base, at one pool size.
type ScaleRow struct {
	Exits, Origins   int
	Serial, Parallel Timing
}

// Scale measures RoundTrip over a canned base for each exits × origins, a random origin per
// request (all pairs healthy: they hold no breaker).
func Scale(exitCounts, originCounts []int) ([]ScaleRow, error) {
	var rows []ScaleRow
	for _, ne := range exitCounts {
		for _, no := range originCounts {
			t, err := newOurs(canned, pool.WithExits(testkit.Exits("x", ne)...))
			if err != nil {
				return nil, err
			}
			urls := make([]string, no)
			for i := range urls {
				urls[i] = "http://o" + strconv.Itoa(i) + ".test/"
			}
			one := func(i int) {
				req, _ := http.NewRequest(http.MethodGet, urls[i%no], nil)
				resp, err := t.RoundTrip(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			for i := range no { // every origin seen once before timing
				one(i)
			}
			row := ScaleRow{Exits: ne, Origins: no}
			row.Serial = timing(testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					i = i*1103515245 + 12345
					one(int(uint32(i) >> 8))
				}
			}))
			row.Parallel = timing(testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					i := 7
					for pb.Next() {
						i = i*1103515245 + 12345
						one(int(uint32(i) >> 8))
					}
				})
			}))
			t.Close()
			rows = append(rows, row)
		}
	}
	return rows, nil
}

func heap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// ChurnPoint is the heap after Seen distinct origins.
type ChurnPoint struct {
	Seen      int
	HeapBytes uint64
	Origins   int // origins the pool still tracks
	Pairs     int // pair breakers it still holds
}

// Churn sends one request to each of n distinct origins through 100 exits on a fake clock
// advancing 1 ms a request, every failEvery-th answered 429 (so its pair holds a breaker), with
// an idle TTL of one minute and Pool.Sweep every step origins; it samples the heap after each step.
func Churn(n, step, failEvery int) ([]ChurnPoint, error) {
	fake := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	t, err := newOurs(canned, pool.WithExits(testkit.Exits("x", 100)...), pool.WithClock(fake), pool.WithIdleTTL(time.Minute))
	if err != nil {
		return nil, err
	}
	defer t.Close()
	var pts []ChurnPoint
	for i := range n {
		host := "o" + strconv.Itoa(i) + ".test"
		if failEvery > 0 && i%failEvery == 0 {
			host = "f" + host
		}
		req, _ := http.NewRequest(http.MethodGet, "http://"+host+"/", nil)
		if resp, err := t.RoundTrip(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		fake.Advance(time.Millisecond)
		if (i+1)%step == 0 {
			t.Pool().Close() // background sweeps done
			t.Pool().Sweep(fake.Now())
			s := t.Pool().Snapshot()
			pts = append(pts, ChurnPoint{Seen: i + 1, HeapBytes: heap(), Origins: len(s.Origins), Pairs: len(s.Pairs)})
		}
	}
	return pts, nil
}
