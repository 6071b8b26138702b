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

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestIntegRecoveredPairRamps: through four real forward proxies, a site bans exit a (Cloudflare's
// challenge page), a's pair opens, the ban ends and a's probe closes the pair: a then takes its
// share of the site's requests back over the slow-start window — a little at first, more ten and
// twenty seconds on, all of it after forty (the pool's clock is a fake one, moved between rounds;
// the requests are real) — instead of its full share at once.
func TestIntegRecoveredPairRamps(t *testing.T) {
	reg := &proxytest.Registry{}
	var banned atomic.Bool
	var mu sync.Mutex
	seen := map[string]int{}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, _ := reg.Lookup(r)
		if name == "a" && banned.Load() {
			w.Header().Set("cf-mitigated", "challenge")
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "<html><title>Just a moment...</title></html>")
			return
		}
		mu.Lock()
		seen[name]++
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(origin.Close)
	exits := registeredExits(t, reg, "a", "b", "c", "d")
	clk := clock.NewFake(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC))
	tr, err := build(pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(9), pool.WithInlineSweep())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	client := &http.Client{Transport: tr}
	get := func(ctx context.Context) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, origin.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	pinned := transport.ContextWithExit(context.Background(), "a")

	banned.Store(true)
	get(pinned) // the challenge page: a's pair opens at once
	banned.Store(false)
	snap := tr.Pool().Snapshot()
	var next time.Time
	for _, ps := range snap.Pairs {
		if ps.Exit == "a" {
			next = ps.Breaker.NextProbe
		}
	}
	if next.IsZero() {
		t.Fatalf("a's pair after a challenge page: %+v, want it open with a probe time", snap.Pairs)
	}
	clk.Advance(next.Sub(clk.Now()))
	get(pinned) // the probe: served, the pair closes
	closed := clk.Now()

	var shares []int
	for _, at := range []time.Duration{0, 10 * time.Second, 20 * time.Second, 40 * time.Second} {
		clk.Advance(at - clk.Now().Sub(closed))
		mu.Lock()
		before := seen["a"]
		mu.Unlock()
		for range 400 {
			get(context.Background())
		}
		mu.Lock()
		shares = append(shares, seen["a"]-before)
		mu.Unlock()
	}
	t.Logf("a's requests of 400 at 0, 10, 20 and 40 s after its pair closed: %v (a full share: 100)", shares)
	if !(shares[0] < shares[1] && shares[1] < shares[2] && shares[2] < shares[3]) {
		t.Errorf("a's share after its pair closed: %v, want it to grow step by step", shares)
	}
	if shares[0] > 40 || shares[3] < 70 {
		t.Errorf("a's share after its pair closed: %v of 400, want at most 40 at first and at least 70 once ramped", shares)
	}
}
