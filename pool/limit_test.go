package pool

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
)

// loadedSite plays workers against one pool on a fake clock: each worker picks, holds its lease
// for latency(attempts in flight to the site when it started), reports a success and picks again;
// a worker throttled by the pool waits its RetryIn. It records the most attempts in flight at once.
type loadedSite struct {
	t       *testing.T
	clk     *clock.Fake
	p       *Pool
	origin  string
	busy    []time.Time // per worker: when its attempt ends (zero: idle, picks at once)
	leases  []Lease
	waiting []time.Time // per worker: when it may pick again after a refusal
	peak    int
}

func (s *loadedSite) inflight() int {
	n := 0
	for _, l := range s.leases {
		if l.p != nil {
			n++
		}
	}
	return n
}

// run plays the site for d with latency as the site's answer time.
func (s *loadedSite) run(d time.Duration, latency func(inflight int) time.Duration) {
	s.t.Helper()
	end := s.clk.Now().Add(d)
	for s.clk.Now().Before(end) {
		now := s.clk.Now()
		for w := range s.busy {
			if s.leases[w].p != nil && !s.busy[w].After(now) {
				s.leases[w].ReportAt(now, Verdict{Outcome: Success})
				s.leases[w] = Lease{}
			}
		}
		for w := range s.busy {
			if s.leases[w].p != nil || s.waiting[w].After(now) {
				continue
			}
			l, err := s.p.PickAt(context.Background(), now, Request{Origin: s.origin, FailFast: true})
			var te *ThrottledError
			switch {
			case errors.As(err, &te):
				s.waiting[w] = now.Add(max(te.RetryIn, time.Millisecond))
				continue
			case err != nil:
				s.t.Fatalf("pick at %v: %v", now, err)
			}
			s.leases[w] = l
			s.busy[w] = now.Add(latency(s.inflight()))
		}
		s.peak = max(s.peak, s.inflight())
		next := end
		for w := range s.busy {
			if s.leases[w].p != nil && s.busy[w].Before(next) {
				next = s.busy[w]
			}
			if s.leases[w].p == nil && s.waiting[w].After(now) && s.waiting[w].Before(next) {
				next = s.waiting[w]
			}
		}
		s.clk.Set(next)
	}
}

func newLoadedSite(t *testing.T, workers int, opts ...Option) *loadedSite {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC))
	opts = append([]Option{WithExits(MustParseExit("10.0.0.1:3128")), WithClock(clk), WithSeed(3), WithInlineSweep()}, opts...)
	p, err := New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return &loadedSite{t: t, clk: clk, p: p, origin: "slow.example",
		busy: make([]time.Time, workers), leases: make([]Lease, workers), waiting: make([]time.Time, workers)}
}

// TestConcurrencyLimitFollowsLatency checks the controller of limit.go on a fake clock: a site
// that answers slower the more requests it holds brings the pair's limit down from the worker
// count to where its answers take about Tolerance × their no-load time; when the site answers fast
// whatever its load, the limit grows back past the worker count.
func TestConcurrencyLimitFollowsLatency(t *testing.T) {
	const workers = 16
	s := newLoadedSite(t, workers, WithAdaptiveConcurrency(ConcurrencySettings{Initial: workers}))
	o := s.p.origin(s.origin)
	id := s.p.set.Load().all[0].id
	if got := o.limits.limitOf(id); got != 1 {
		t.Fatalf("limit before any answer = %d, want 1 (its first answer comes alone)", got)
	}
	s.run(150*time.Millisecond, func(int) time.Duration { return 100 * time.Millisecond })
	if got := o.limits.limitOf(id); got < workers {
		t.Fatalf("limit after the first answer = %d, want about Initial %d", got, workers)
	}
	// 100 ms alone, 50 ms more for each other request in flight: 850 ms with every worker on it.
	slowUnderLoad := func(n int) time.Duration { return 100*time.Millisecond + time.Duration(n-1)*50*time.Millisecond }
	s.run(2*time.Minute, slowUnderLoad)
	loaded := o.limits.limitOf(id)
	// Tolerance 2 × 100 ms is reached at 3 in flight: the limit settles near there.
	if loaded < 1 || loaded > 4 {
		t.Errorf("limit after 2 min of a site slower under load = %d, want 1–4 (answers take 2× their no-load time at 3)", loaded)
	}
	s.peak = 0
	s.run(time.Minute, slowUnderLoad)
	t.Logf("slower under load: limit %d, most in flight %d", loaded, s.peak)
	if s.peak >= workers/2 {
		t.Errorf("most in flight at once once the limit settled = %d, want under %d (workers %d)", s.peak, workers/2, workers)
	}

	s.run(time.Minute, func(int) time.Duration { return 100 * time.Millisecond })
	if got := o.limits.limitOf(id); got < workers {
		t.Errorf("limit after a minute of answers as fast as alone = %d, want it grown back to at least the %d workers (it was %d)", got, workers, loaded)
	}
	t.Logf("recovered: limit %d, in flight %d", o.limits.limitOf(id), s.inflight())
	if got := s.inflight(); got < workers-1 {
		t.Errorf("in flight once latency recovered = %d, want every worker (%d) busy", got, workers)
	}
}

// TestConcurrencyLimitRelearnsNoLoadLatency checks the pin of limit.go: a pair whose answers all
// come loaded for longer than noLoadMaxAge is held at a limit of 1 until one comes alone, which
// gives its no-load latency afresh — a site that became slower for everyone does not keep the
// limit at 1 for ever.
func TestConcurrencyLimitRelearnsNoLoadLatency(t *testing.T) {
	const workers = 8
	s := newLoadedSite(t, workers, WithAdaptiveConcurrency(ConcurrencySettings{}))
	o := s.p.origin(s.origin)
	id := s.p.set.Load().all[0].id
	s.run(30*time.Second, func(int) time.Duration { return 50 * time.Millisecond })
	if got := o.limits.limitOf(id); got < workers {
		t.Fatalf("limit on a fast site = %d, want at least the %d workers", got, workers)
	}
	// Now 10× slower for everyone, load or not: first the limit falls, then it is re-learned.
	s.run(5*time.Minute, func(int) time.Duration { return 500 * time.Millisecond })
	if got := o.limits.limitOf(id); got < workers {
		t.Errorf("limit 5 min after the site became slower for everyone = %d, want back to at least %d", got, workers)
	}
	if got := o.limits.slots[id%loadSlots].noLoad; got < 0.4 {
		t.Errorf("no-load latency = %.3fs, want the site's new 0.5 s re-learned", got)
	}
}

func TestWithAdaptiveConcurrencyRejectsBadSettings(t *testing.T) {
	for _, s := range []ConcurrencySettings{{Tolerance: 0.5}, {Initial: -1}, {Initial: 10, Max: 5}} {
		if _, err := New(WithAdaptiveConcurrency(s)); err == nil {
			t.Errorf("New(WithAdaptiveConcurrency(%+v)) = nil error, want one naming the field", s)
		}
	}
}
