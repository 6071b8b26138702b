// Package measure holds the bench command's measurements that run on real time: the loopback
// overhead of proxybreaker beside its peers, and its cost and memory at scale.
//
//	http.Client → (bare | ours: transport over a pool | Colly switcher | gobreaker | failsafe-go) → forward proxy → origin
package measure

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"sync"
	"testing"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/gocolly/colly/v2/proxy"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
	"github.com/sony/gobreaker/v2"
)

// ForwardProxy is a minimal plain-HTTP forward proxy on 127.0.0.1 (absolute-form requests only).
func ForwardProxy() *httptest.Server {
	out := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 256}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			http.Error(w, "absolute URL required", http.StatusBadRequest)
			return
		}
		req := r.Clone(r.Context())
		req.RequestURI = ""
		req.Header.Del("Proxy-Connection")
		resp, err := out.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
}

// Variant is one RoundTripper under test.
type Variant struct {
	Name string
	RT   http.RoundTripper
}

// Variants builds the loopback variants through proxyURL. The close func releases them.
func Variants(proxyURL string) ([]Variant, func(), error) {
	pu, err := url.Parse(proxyURL)
	if err != nil {
		return nil, nil, err
	}
	tmpl := func() *http.Transport {
		t := transport.DefaultBaseTemplate()
		t.MaxIdleConnsPerHost = 256
		return t
	}
	bare := tmpl()
	bare.Proxy = http.ProxyURL(pu)

	exit, err := pool.ParseExit(proxyURL)
	if err != nil {
		return nil, nil, err
	}
	p, err := pool.New(pool.WithExits(exit))
	if err != nil {
		return nil, nil, err
	}
	ours, err := transport.New(p, transport.WithBaseTemplate(tmpl()))
	if err != nil {
		return nil, nil, err
	}

	colly := tmpl()
	if colly.Proxy, err = proxy.RoundRobinProxySwitcher(proxyURL); err != nil {
		return nil, nil, err
	}

	gbBase := tmpl()
	gbBase.Proxy = http.ProxyURL(pu)
	gb := &gobreakerRT{base: gbBase, exit: proxyURL, breakers: map[string]*gobreaker.CircuitBreaker[*http.Response]{
		proxyURL: gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{Name: "exit"}),
	}}

	fsBase := tmpl()
	fsBase.Proxy = http.ProxyURL(pu)
	cb := circuitbreaker.NewBuilder[*http.Response]().HandleIf(func(r *http.Response, err error) bool {
		return err != nil || r.StatusCode >= 500
	}).Build()
	fs := failsafehttp.NewRoundTripper(fsBase, cb)

	vs := []Variant{{"bare http.Transport", bare}, {"ours (transport.New)", ours}, {"Colly RoundRobinProxySwitcher", colly},
		{"gobreaker/v2 per exit", gb}, {"failsafe-go circuit breaker", fs}}
	return vs, func() {
		for _, t := range []*http.Transport{bare, colly, gbBase, fsBase} {
			t.CloseIdleConnections()
		}
		ours.Close()
	}, nil
}

// gobreakerRT wraps each request in the breaker of its exit (one exit here; a map lookup as a
// per-exit wrapper would do). Status 5xx counts as a failure.
type gobreakerRT struct {
	base     http.RoundTripper
	exit     string
	mu       sync.RWMutex
	breakers map[string]*gobreaker.CircuitBreaker[*http.Response]
}

var errServer = errors.New("bench: server error")

func (g *gobreakerRT) RoundTrip(req *http.Request) (*http.Response, error) {
	g.mu.RLock()
	cb := g.breakers[g.exit]
	g.mu.RUnlock()
	var keep *http.Response
	resp, err := cb.Execute(func() (*http.Response, error) {
		r, err := g.base.RoundTrip(req)
		if err == nil && r.StatusCode >= 500 {
			keep = r
			return r, errServer
		}
		return r, err
	})
	if errors.Is(err, errServer) {
		return keep, nil
	}
	return resp, err
}

// Timing is one benchmark result.
type Timing struct {
	NsPerOp     float64
	AllocsPerOp int64
	BytesPerOp  int64
}

// OverheadRow is one variant's medians, serial and parallel.
type OverheadRow struct {
	Name             string
	Serial, Parallel Timing
}

// Overhead runs every variant, serial and with RunParallel, rounds times in turn (so that load
// on a shared machine falls on all alike), and returns the medians.
func Overhead(rounds int) ([]OverheadRow, error) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "hello") }))
	defer origin.Close()
	px := ForwardProxy()
	defer px.Close()
	vs, closeAll, err := Variants(px.URL)
	if err != nil {
		return nil, err
	}
	defer closeAll()
	target := origin.URL + "/"
	if _, p, _ := net.SplitHostPort(origin.Listener.Addr().String()); p == "" {
		return nil, fmt.Errorf("bench: origin address")
	}
	one := func(rt http.RoundTripper) error {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	for _, v := range vs { // warm up, and fail early if a variant cannot reach the origin
		if err := one(v.RT); err != nil {
			return nil, fmt.Errorf("bench: %s: %w", v.Name, err)
		}
	}
	ser := make([][]Timing, len(vs))
	par := make([][]Timing, len(vs))
	for range rounds {
		for i, v := range vs {
			ser[i] = append(ser[i], timing(testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if err := one(v.RT); err != nil {
						b.Fatal(err)
					}
				}
			})))
			par[i] = append(par[i], timing(testing.Benchmark(func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := one(v.RT); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})))
		}
	}
	rows := make([]OverheadRow, len(vs))
	for i, v := range vs {
		rows[i] = OverheadRow{Name: v.Name, Serial: median(ser[i]), Parallel: median(par[i])}
	}
	return rows, nil
}

func timing(r testing.BenchmarkResult) Timing {
	return Timing{NsPerOp: float64(r.T.Nanoseconds()) / float64(max(r.N, 1)), AllocsPerOp: r.AllocsPerOp(), BytesPerOp: r.AllocedBytesPerOp()}
}

// median returns the round of median time, with the fewest allocations of all the rounds.
func median(ts []Timing) Timing {
	s := append([]Timing(nil), ts...)
	sort.Slice(s, func(i, j int) bool { return s[i].NsPerOp < s[j].NsPerOp })
	m := s[len(s)/2]
	// Allocations are counted for the whole process — its origin, its proxy, the runtime — and
	// what runs beside the requests only adds to them: the fewest of the rounds is the requests'.
	// (Between two runs a median moved bare http.Transport from 123 to 125 a request.)
	for _, t := range s {
		m.AllocsPerOp, m.BytesPerOp = min(m.AllocsPerOp, t.AllocsPerOp), min(m.BytesPerOp, t.BytesPerOp)
	}
	return m
}
