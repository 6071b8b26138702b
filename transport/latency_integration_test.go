package transport_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// slowWorld is local forward proxies (a, b, c, d unless named) in front of origins whose handler answers
// after slow(origin index, proxy name) — real time, through real proxies — and counts what each
// proxy carried per origin.
type slowWorld struct {
	origins []*httptest.Server
	client  *http.Client
	mu      sync.Mutex
	carried []map[string]int // per origin index: proxy name → requests served
}

func newSlowWorld(t testing.TB, nOrigins int, slow func(origin int, exit string) time.Duration, exitNames ...string) *slowWorld {
	t.Helper()
	reg := &proxytest.Registry{}
	w := &slowWorld{carried: make([]map[string]int, nOrigins)}
	for o := range nOrigins {
		w.carried[o] = map[string]int{}
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			name, _ := reg.Lookup(r)
			if d := slow(o, name); d > 0 {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
				}
			}
			w.mu.Lock()
			w.carried[o][name]++
			w.mu.Unlock()
			io.WriteString(rw, "ok")
		}))
		t.Cleanup(srv.Close)
		w.origins = append(w.origins, srv)
	}
	if len(exitNames) == 0 {
		exitNames = []string{"a", "b", "c", "d"}
	}
	exits := registeredExits(t, reg, exitNames...)
	tr, err := build(pool.WithExits(exits...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	w.client = &http.Client{Transport: tr}
	return w
}

// run sends requests to origin o with workers goroutines until n requests were sent or d passed
// (real time), and returns how many succeeded.
func (w *slowWorld) run(o, workers, n int, d time.Duration) int {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var sent, ok atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sent.Add(1) <= int64(n) {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.origins[o].URL, nil)
				resp, err := w.client.Do(req)
				if err != nil {
					return // the run's deadline
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	return int(ok.Load())
}

func (w *slowWorld) counts(o int) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.carried[o] {
		out[k] = v
	}
	return out
}

// TestIntegSlowExitCarriesLess: one of four exits answers in 1.5 s (always 200), eight workers:
// once its first answers came, it is left out but for a trickle, so it holds few of the workers —
// with latency-blind least-loaded picks it held about six of the eight, and carried a quarter of
// the requests it was offered while the others were busy. The throughput ratio itself (against the
// same pool without the slow exit) is measured in BenchmarkSlowExit, not asserted here.
func TestIntegSlowExitCarriesLess(t *testing.T) {
	w := newSlowWorld(t, 1, func(_ int, exit string) time.Duration {
		if exit == "a" {
			return 1500 * time.Millisecond
		}
		return 0
	})
	served := w.run(0, 8, 600, 6*time.Second)
	got := w.counts(0)
	t.Logf("%d requests served: %v", served, got)
	if got[""] > 0 {
		t.Errorf("%d requests reached the origin without a proxy", got[""])
	}
	if got["a"] == 0 {
		t.Errorf("the slow exit carried nothing: it was never tried (%v)", got)
	}
	// Eight workers, each request through "a" holding one for 1.5 s: a quarter of the picks on it
	// would be ≥ 150 of 600. A slow exit is tried while it has no answer yet, and then at a trickle.
	if total := served; got["a"]*20 > total {
		t.Errorf("the slow exit carried %d of %d requests, want at most 5 %%", got["a"], total)
	}
}

// TestIntegSlowForOneSiteKeepsItsShareOfAnother: an exit that is slow for site A only keeps its
// share of site B's requests, where it is as fast as the others (latency is judged per (exit,
// origin); it got 4–11 % of B's requests when a pick counted load per exit across sites and had
// no latency). Fair is 25 %; the bound leaves room for the draws' noise over a few hundred picks.
func TestIntegSlowForOneSiteKeepsItsShareOfAnother(t *testing.T) {
	w := newSlowWorld(t, 2, func(origin int, exit string) time.Duration {
		if origin == 0 && exit == "a" {
			return 1500 * time.Millisecond
		}
		return 0
	})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.run(0, 4, 400, 5*time.Second) }()
	var servedB int
	go func() { defer wg.Done(); servedB = w.run(1, 4, 400, 5*time.Second) }()
	wg.Wait()
	a, b := w.counts(0), w.counts(1)
	t.Logf("site A (a slow): %v; site B (%d served): %v", a, servedB, b)
	if b["a"]*5 < servedB {
		t.Errorf("site B: exit a carried %d of %d requests, want at least 20 %% (fair share 25 %%)", b["a"], servedB)
	}
	if a["a"]*10 > a["a"]+a["b"]+a["c"]+a["d"] {
		t.Errorf("site A: the exit slow for it carried %v, want under 10 %%", a)
	}
}
