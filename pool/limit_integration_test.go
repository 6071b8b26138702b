package pool_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestIntegConcurrencyLimitBoundsInFlight sends sixteen workers through a real forward proxy to an
// origin that answers 20 ms later for each other request it holds (20 ms alone, 320 ms with all
// sixteen): with WithAdaptiveConcurrency the pool learns the pair's limit from those answers, and
// once it has, the origin never holds as many requests at once as there are workers — the
// workers wait on throttled picks instead. Without the option every worker is on it at once.
func TestIntegConcurrencyLimitBoundsInFlight(t *testing.T) {
	const workers = 16
	for _, tc := range []struct {
		name    string
		opts    []pool.Option
		bounded bool
	}{
		{"adaptive", []pool.Option{pool.WithAdaptiveConcurrency(pool.ConcurrencySettings{Initial: workers})}, true},
		{"none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var holding, peak atomic.Int64
			var measuring atomic.Bool
			origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := holding.Add(1)
				defer holding.Add(-1)
				if measuring.Load() {
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
				}
				select {
				case <-time.After(time.Duration(n) * 20 * time.Millisecond):
				case <-r.Context().Done():
				}
				io.WriteString(w, "ok")
			}))
			defer origin.Close()
			px, err := proxytest.Start(proxytest.Config{Name: "a"})
			if err != nil {
				t.Fatal(err)
			}
			defer px.Close()
			exit, err := pool.NewExit(px.URL())
			if err != nil {
				t.Fatal(err)
			}
			p, err := pool.New(append([]pool.Option{pool.WithExits(exit)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			tr, err := transport.New(p)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			client := &http.Client{Transport: tr}

			// Each worker sends its share of requests, waiting out a throttled pick; the peak is
			// measured over the second half, once the limit had answers to learn from.
			const requests = 240
			var sent, served, throttled atomic.Int64
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						k := sent.Add(1)
						if k > requests {
							return
						}
						if k == requests/2 {
							measuring.Store(true)
						}
						for {
							resp, err := client.Get(origin.URL)
							var te *pool.ThrottledError
							if errors.As(err, &te) {
								throttled.Add(1)
								time.Sleep(te.RetryIn)
								continue
							}
							if err != nil {
								t.Error(err)
								return
							}
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							served.Add(1)
							break
						}
					}
				}()
			}
			wg.Wait()
			got := peak.Load()
			t.Logf("%s: %d served, %d picks throttled, most held by the origin at once in the second half: %d of %d workers", tc.name, served.Load(), throttled.Load(), got, workers)
			if served.Load() != requests {
				t.Errorf("served %d of %d requests", served.Load(), requests)
			}
			if tc.bounded && got >= workers/2 {
				t.Errorf("with adaptive concurrency the origin held %d requests at once, want fewer than %d (half the workers)", got, workers/2)
			}
			if !tc.bounded && got < workers-2 {
				t.Errorf("without a limit the origin held at most %d requests at once, want about every worker (%d): the test does not load it", got, workers)
			}
		})
	}
}
