package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
)

// cappedSite is an origin that allows each exit (told apart by the proxy that relayed it) n
// requests per window of the fake clock (fixed windows from integT0, as a clock-aligned limiter
// counts them) and answers 429 past that: with Retry-After (until the window ends, whole seconds
// rounded up) unless plain. It counts what it served per window and the 429s per exit.
type cappedSite struct {
	reg    *proxytest.Registry
	clk    integClock
	n      int
	window time.Duration
	plain  bool
	// block, when set, makes the site block an exit past its n for this long, whatever it sends
	// meanwhile (Cloudflare's mitigation timeout), its Retry-After what is left of the block.
	block time.Duration

	until map[string]time.Duration // blocked until, per exit

	mu      sync.Mutex
	count   map[string]int // served in the current window, per exit
	at      int64          // the current window's index
	served  map[int64]int  // served per window, all exits
	limited map[string]int // 429s per exit
}

func (s *cappedSite) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, _ := s.reg.Lookup(r)
	now := s.clk.Now().Sub(integT0)
	win := int64(now / s.window)
	s.mu.Lock()
	if win != s.at {
		s.at, s.count = win, map[string]int{}
	}
	if s.block > 0 && s.count[name] >= s.n && s.until[name] <= now {
		s.until[name] = now + s.block
	}
	if s.count[name] >= s.n || s.until[name] > now {
		s.limited[name]++
		s.mu.Unlock()
		left := time.Duration(win+1)*s.window - now
		if s.block > 0 {
			left = s.until[name] - now
		}
		if !s.plain {
			w.Header().Set("Retry-After", fmt.Sprint(int((left+time.Second-1)/time.Second)))
		}
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	s.count[name]++
	s.served[win]++
	s.mu.Unlock()
	io.WriteString(w, "ok")
}

// crawlCapped sends requests to a cappedSite through four real forward proxies from one loop, the
// pool's clock a fake one that moves 25 ms per request (its answer's latency) and, when the pool
// refuses, to when the refusal says the site has room next; it returns the site's counts of the
// first windows windows.
func crawlCapped(t *testing.T, site *cappedSite, windows int) (served []int, limited map[string]int) {
	t.Helper()
	site.count, site.served, site.limited, site.until = map[string]int{}, map[int64]int{}, map[string]int{}, map[string]time.Duration{}
	origin := httptest.NewServer(site)
	t.Cleanup(origin.Close)
	exits := registeredExits(t, site.reg, "a", "b", "c", "d")
	tr, c := integNew(t, nil, pool.WithExits(exits...), pool.WithClock(site.clk), pool.WithSeed(7), pool.WithInlineSweep())
	end := integT0.Add(time.Duration(windows) * site.window)
	for i := 0; i < 20000 && site.clk.Now().Before(end); i++ { // bounded: at most 20,000 requests
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, origin.URL, nil)
		resp, err := c.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			site.clk.Advance(25 * time.Millisecond)
			continue
		}
		wait := refusalWait(t, err)
		site.clk.Advance(max(wait, 10*time.Millisecond))
	}
	_ = tr
	site.mu.Lock()
	defer site.mu.Unlock()
	for w := range windows {
		served = append(served, site.served[int64(w)])
	}
	return served, site.limited
}

// refusalWait is how long a refused request's error says the site has no room through any exit
// (RoomIn: a token, or a probe that comes sooner), failing the test on any other error.
func refusalWait(t *testing.T, err error) time.Duration {
	t.Helper()
	var th *pool.ThrottledError
	var nh *pool.NoHealthyExitError
	switch {
	case errors.As(err, &th):
		return th.RoomIn
	case errors.As(err, &nh):
		return nh.RoomIn
	}
	t.Fatalf("request: %v, want a response or the pool's refusal", err)
	return 0
}

// TestIntegCapsServedAtCapacity (issue 35): four exits through real forward proxies to a site that
// allows each exit 20 requests per 10 s window. From the third window on the site counts at least
// 80 % of the 80 it allows per window, and each exit meets at most one 429 per minute; without
// Retry-After (a plain 429) at least 70 %. The loop waits, when the pool refuses, what the refusal
// says of when the site has room next through any exit (RoomIn): waiting RetryIn, the soonest
// token alone, it slept past the probes of the pairs resting after their 429s, and the plain
// site's fourth window got 40.
func TestIntegCapsServedAtCapacity(t *testing.T) {
	const n, windows = 20, 14
	for _, tc := range []struct {
		name  string
		plain bool
		share float64
		from  int // the first window each is judged on
	}{{"retry-after", false, 0.8, 2}, {"plain", true, 0.7, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			site := &cappedSite{reg: &proxytest.Registry{}, clk: newIntegClock(), n: n, window: 10 * time.Second, plain: tc.plain}
			served, limited := crawlCapped(t, site, windows)
			t.Logf("served per window: %v (capacity %d); 429s per exit: %v", served, 4*n, limited)
			total := 0
			for w, got := range served[2:] {
				total += got
				if w+2 >= tc.from && float64(got) < tc.share*4*n {
					t.Errorf("window %d: the site served %d, want at least %.0f (%.0f %% of %d)", w+2, got, tc.share*4*n, tc.share*100, 4*n)
				}
			}
			if want := tc.share * 4 * n * float64(windows-2); float64(total) < want {
				t.Errorf("windows 2-%d: the site served %d, want at least %.0f", windows-1, total, want)
			}
			minutes := float64(windows) * site.window.Minutes()
			for exit, k := range limited {
				if float64(k) > minutes+1 {
					t.Errorf("exit %s met %d 429s in %.1f min, want at most one a minute", exit, k, minutes)
				}
			}
		})
	}
}

// TestIntegBlockLongerThanThePeriod (issue 35): the same four exits and site, 20 per 10 s window
// each, but past its 20 an exit is blocked for 45 s whatever it sends, the Retry-After what is left
// of the block. A pair learns the period (10 s) from how fast it was served, not the span between
// two resets (a block apart): once the first exits learned it — two blocks, the first windows —
// the site counts at least 80 % of the 80 it allows per window, where a pace of 20 per block
// would give about a quarter.
func TestIntegBlockLongerThanThePeriod(t *testing.T) {
	const n, windows, from = 20, 24, 12
	site := &cappedSite{reg: &proxytest.Registry{}, clk: newIntegClock(), n: n, window: 10 * time.Second, block: 45 * time.Second}
	served, limited := crawlCapped(t, site, windows)
	t.Logf("served per window: %v (capacity %d); 429s per exit: %v", served, 4*n, limited)
	total := 0
	for _, got := range served[from:] {
		total += got
	}
	if want := 0.8 * 4 * n * float64(windows-from); float64(total) < want {
		t.Errorf("windows %d-%d: the site served %d, want at least %.0f (80 %% of %d a window)", from, windows-1, total, want, 4*n)
	}
}
