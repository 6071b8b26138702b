package transport_test

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// gateLoad sends requests through n local proxies with 8 workers for d (real time), each exit
// limited to perSecond with the given burst, and returns what the origin counted per proxy and
// the time the run really took.
func gateLoad(t *testing.T, n int, perSecond float64, burst int, d time.Duration) (map[string]int, time.Duration) {
	t.Helper()
	reg := &proxytest.Registry{}
	origin, count := countingOrigin(t, reg)
	var names []string
	for i := range n {
		names = append(names, string(rune('a'+i)))
	}
	exits := registeredExits(t, reg, names...)
	tr, err := build(pool.WithExits(exits...),
		pool.WithRateLimits(ratelimit.Limits{PerExit: ratelimit.PerSecond(perSecond, burst)}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	client := &http.Client{Transport: tr}

	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	var sent atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for sent.Add(1) <= 5000 { // bounded, whatever the clock does
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, origin.URL, nil)
				resp, err := client.Do(req)
				if err != nil {
					return // the run's deadline: a wait for a token that would end past it
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	return count(), elapsed
}

// TestGateLoopbackRates: through real proxies, each exit's observed request count stays within
// what its bucket allows (rate × elapsed + burst), while four exits carry more than one bucket
// allows: the picker spreads requests to exits that have tokens instead of queueing on one.
func TestGateLoopbackRates(t *testing.T) {
	const (
		perSecond = 20.0
		burst     = 5
		run       = 1500 * time.Millisecond
	)
	one, el1 := gateLoad(t, 1, perSecond, burst, run)
	four, el4 := gateLoad(t, 4, perSecond, burst, run)
	for _, c := range []struct {
		counts  map[string]int
		elapsed time.Duration
	}{{one, el1}, {four, el4}} {
		// Exact, not truncated: every take fell between start and the run's end, so an exit
		// can have had at most burst + rate × elapsed tokens.
		allowed := perSecond*c.elapsed.Seconds() + burst
		for name, got := range c.counts {
			if name == "" {
				t.Errorf("%d requests reached the origin without a proxy", got)
				continue
			}
			if float64(got) > allowed {
				t.Errorf("exit %s carried %d requests in %v, more than rate × time + burst = %.2f", name, got, c.elapsed, allowed)
			}
		}
	}
	total := func(m map[string]int) (n int) {
		for _, v := range m {
			n += v
		}
		return n
	}
	t.Logf("1 exit: %d requests in %v; 4 exits: %d in %v (%v)", total(one), el1.Round(time.Millisecond), total(four), el4.Round(time.Millisecond), four)
	if len(four) != 4 {
		t.Errorf("4 exits: requests went through %d of them", len(four))
	}
	// The spreading, not a throughput figure (this machine may be loaded): four exits carried more
	// than any one bucket could have allowed over their run, so requests went to the exits that
	// had tokens instead of queueing on one.
	if oneMax := perSecond*el4.Seconds() + burst; float64(total(four)) <= oneMax {
		t.Errorf("4 exits carried %d requests in %v, no more than one exit's rate × time + burst = %.2f: requests queued instead of spreading", total(four), el4, oneMax)
	}
}
