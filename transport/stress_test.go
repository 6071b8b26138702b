package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// stressLease is the probe lease of every breaker in the stress test: the pair and exit breakers
// take it from the pair settings, the origin guard from breaker.DefaultProbeLease.
const stressLease = breaker.DefaultProbeLease

type stressProbeKey struct{}

// stressProbe is one attempt that holds a probe slot. ended is set as soon as the attempt's verdict
// is about to be applied (the base returned a failure, or the body ended), which is before the pool
// frees the slot; so the tracked interval lies inside the slot's real holding time.
type stressProbe struct {
	key   string
	at    time.Time
	ended atomic.Bool
}

// stressTracker is an Observer that checks, at every attempt that starts with a probe, that no
// other probe for the same (exit, origin) pair is out, unless one of the two leases had run out
// when the other was admitted (then the breaker has counted it as failed and may admit another).
type stressTracker struct {
	transport.NopObserver
	mu         sync.Mutex
	live       map[string][]*stressProbe
	violations []string
	probes     int
	started    atomic.Int64
	finished   atomic.Int64
}

func (s *stressTracker) AttemptStarted(ctx context.Context, a transport.AttemptInfo) context.Context {
	s.started.Add(1)
	if !a.Probe {
		return ctx
	}
	p := &stressProbe{key: a.Exit.Label() + " " + a.Origin, at: a.At}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probes++
	kept := s.live[p.key][:0]
	for _, q := range s.live[p.key] {
		if q.ended.Load() {
			continue
		}
		kept = append(kept, q)
		// Attempts may reach the observer in another order than they took their permits, and
		// with instants read a little apart: two probes are in conflict when neither's lease could
		// have run out when the other was admitted.
		if d := a.At.Sub(q.at).Abs(); d < stressLease {
			s.violations = append(s.violations, fmt.Sprintf("pair %s: a probe at %v while the one from %v is still out",
				p.key, a.At.Sub(scriptedT0), q.at.Sub(scriptedT0)))
		}
	}
	s.live[p.key] = append(kept, p)
	return context.WithValue(ctx, stressProbeKey{}, p)
}

func (s *stressTracker) AttemptFinished(ctx context.Context, _ transport.AttemptResult) {
	s.finished.Add(1)
	stressEnd(ctx)
}

func stressEnd(ctx context.Context) {
	if p, ok := ctx.Value(stressProbeKey{}).(*stressProbe); ok {
		p.ended.Store(true)
	}
}

// stressFinishedAtHeaders reports whether DefaultClassifier gives this outcome its verdict when the
// headers arrive (everything but a success, which waits for the body).
func stressFinishedAtHeaders(resp *http.Response, err error) bool {
	return err != nil || resp.StatusCode == http.StatusProxyAuthRequired ||
		resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
}

// stressReply draws a random outcome for one attempt.
func stressReply(c testkit.Call) (testkit.Reply, bool) {
	if _, ok := c.Req.Context().Deadline(); ok {
		return testkit.Reply{Hang: true}, true // the caller's deadline ends it
	}
	switch r := rand.IntN(1000); {
	case r < 2:
		return testkit.Reply{Status: http.StatusProxyAuthRequired}, true
	case r < 22:
		return testkit.Reply{Status: http.StatusTooManyRequests, Header: testkit.RetryAfter(1 + rand.IntN(120))}, true
	case r < 52:
		return testkit.Reply{Err: testkit.ErrTimeout}, true
	case r < 67:
		return testkit.Reply{Err: testkit.ErrReset}, true
	case r < 117:
		return testkit.Reply{Status: http.StatusInternalServerError, Body: "bug"}, true
	case r < 137:
		return testkit.Reply{Status: http.StatusServiceUnavailable}, true
	case r < 142:
		return testkit.Reply{Err: &transport.ProxyConnectError{Exit: c.Exit, StatusCode: http.StatusBadGateway}}, true
	case r < 152:
		return testkit.Reply{Body: "partial", BodyErr: io.ErrUnexpectedEOF}, true
	case r < 177:
		return testkit.Reply{Status: http.StatusNotFound, Body: "nope"}, true
	}
	return testkit.Reply{Body: strings.Repeat("ok", 1+rand.IntN(64))}, true
}

func TestStressProbeLimitAndNoLeaks(t *testing.T) {
	const (
		goroutines = 32
		perG       = 300
		origins    = 6
	)
	var exits []*pool.Exit
	exits = append(exits, testkit.Exits("t0-", 6)...)
	for _, e := range testkit.Exits("t1-", 4) {
		exits = append(exits, e.WithTier(1))
	}
	tracker := &stressTracker{live: map[string][]*stressProbe{}}
	env := newTestPoolEnv(t, exits,
		transport.WithObserver(tracker),
		pool.WithPairSettings(breaker.Settings{HalfOpenProbes: 1, ProbeLease: stressLease}),
		pool.WithIdleTTL(10*time.Minute), // background sweeps run during the test
	)
	env.base.OnReturn = func(req *http.Request, resp *http.Response, err error) {
		if stressFinishedAtHeaders(resp, err) {
			stressEnd(req.Context())
		}
	}
	env.base.OnBodyEnd = func(req *http.Request) { stressEnd(req.Context()) }
	env.base.SetScript(stressReply)

	var (
		contract  = make(chan string, 64)
		tick      = make(chan struct{})
		done      = make(chan struct{})
		workers   sync.WaitGroup
		clockDone sync.WaitGroup
	)
	report := func(format string, args ...any) {
		select {
		case contract <- fmt.Sprintf(format, args...):
		default:
		}
	}

	// The clock moves on as requests complete, mostly by seconds, now and then past a lease.
	clockDone.Add(1)
	go func() {
		defer clockDone.Done()
		for step := 0; step < goroutines*perG; step++ {
			select {
			case <-tick:
			case <-done:
				return
			}
			d := time.Duration(rand.IntN(5000)) * time.Millisecond
			if rand.IntN(25) == 0 {
				d = stressLease + time.Duration(rand.IntN(30))*time.Second
			}
			env.clock.Advance(d)
			if step%32 == 0 {
				snap := env.pool.Snapshot()
				for _, p := range snap.Pairs {
					if p.Breaker.ProbesInFlight > 1 {
						report("snapshot: pair %s/%s has %d probes in flight", p.Exit, p.Origin, p.Breaker.ProbesInFlight)
					}
				}
				for _, e := range snap.Exits {
					if e.Breaker.ProbesInFlight > 1 || e.InFlight < 0 {
						report("snapshot: exit %s has %d probes, %d in flight", e.Exit, e.Breaker.ProbesInFlight, e.InFlight)
					}
				}
			}
		}
	}()

	for g := range goroutines {
		workers.Add(1)
		go func() {
			defer workers.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range perG {
				if i%4 == 0 {
					tick <- struct{}{} // the clock goroutine outlives every send
				}
				ctx, cancel := context.WithCancel(context.Background())
				switch m := rng.IntN(100); {
				case m < 4:
					cancel() // before the request leaves
				case m < 6:
					var stop context.CancelFunc
					ctx, stop = context.WithTimeout(ctx, time.Millisecond) // the base hangs until it passes
					defer stop()
				case m < 12:
					ctx = transport.ContextWithSession(ctx, fmt.Sprint("s", g))
				case m < 20:
					ctx = transport.ContextWithRetries(ctx)
				}
				url := fmt.Sprintf("http://o%d.example/", rng.IntN(origins))
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				resp, err := env.tr.RoundTrip(req)
				if (resp == nil) == (err == nil) {
					report("RoundTrip = %v, %v: want exactly one of them", resp, err)
				}
				if err != nil {
					var ae *transport.AttemptError
					var nh *pool.NoHealthyExitError
					var th *pool.ThrottledError
					switch {
					case errors.As(err, &ae), errors.Is(err, pool.ErrOriginUnhealthy):
					case errors.As(err, &th): // every pair's learned window spent (a pool paces by default)
						if th.RetryIn < 0 {
							report("ThrottledError.RetryIn = %v", th.RetryIn)
						}
					case errors.As(err, &nh):
						if nh.RetryIn < 0 {
							report("NoHealthyExitError.RetryIn = %v", nh.RetryIn)
						}
					default:
						report("unexpected error %T: %v", err, err)
					}
					cancel()
					continue
				}
				if resp.Body == nil {
					report("nil Body")
					cancel()
					continue
				}
				switch rng.IntN(10) {
				case 0, 1:
					cancel() // after the response, before the body
					io.Copy(io.Discard, resp.Body)
				case 2, 3, 4:
					io.CopyN(io.Discard, resp.Body, int64(rng.IntN(8)))
				case 5:
				default:
					io.Copy(io.Discard, resp.Body)
				}
				resp.Body.Close()
				cancel()
			}
		}()
	}
	workers.Wait()
	close(done)
	clockDone.Wait()
	close(contract)
	for msg := range contract {
		t.Error(msg)
	}

	tracker.mu.Lock()
	for _, v := range tracker.violations[:min(len(tracker.violations), 10)] {
		t.Error(v)
	}
	t.Logf("%d attempts, %d probes, fake time %v", tracker.started.Load(), tracker.probes, env.clock.Now().Sub(scriptedT0))
	if tracker.probes == 0 {
		t.Errorf("no probe ever went out: the stress test tested nothing")
	}
	tracker.mu.Unlock()
	if s, f := tracker.started.Load(), tracker.finished.Load(); s != f {
		t.Errorf("AttemptStarted %d times, AttemptFinished %d times", s, f)
	}
	stressNoneOut(t, env, "after the run")

	// Far beyond every lease, cooldown, park and Retry-After, everything admits traffic again.
	env.base.Reset()
	env.clock.Advance(3 * time.Hour)
	snap := env.pool.Snapshot()
	for _, p := range snap.Pairs {
		if p.Breaker.State == breaker.Open {
			t.Errorf("pair %s/%s still open after 3 h: %+v", p.Exit, p.Origin, p.Breaker)
		}
	}
	for _, e := range snap.Exits {
		if e.Breaker.State == breaker.Open {
			t.Errorf("exit %s still open after 3 h", e.Exit)
		}
	}
	stressDrive(t, env, origins, 0)
	var tier0 []string
	for _, e := range env.pool.Exits() {
		if e.Tier() == 0 {
			tier0 = append(tier0, e.Label())
		}
	}
	if err := env.pool.Remove(tier0...); err != nil {
		t.Fatal(err)
	}
	stressDrive(t, env, origins, 1)
	stressNoneOut(t, env, "at the end")
}

// stressDrive sends good requests until every breaker of tier's exits, and every origin guard, is
// CLOSED: each HALF_OPEN one must admit its probe. Higher tiers see no traffic while tier serves.
func stressDrive(t *testing.T, env *scriptedEnv, origins, tier int) {
	t.Helper()
	inTier := map[string]bool{}
	for _, e := range env.pool.Exits() {
		inTier[e.Label()] = e.Tier() == tier
	}
	for round := range 500 {
		allClosed := true
		snap := env.pool.Snapshot()
		for _, p := range snap.Pairs {
			allClosed = allClosed && (!inTier[p.Exit] || p.Breaker.State == breaker.Closed)
		}
		for _, e := range snap.Exits {
			allClosed = allClosed && (!inTier[e.Exit] || e.Breaker.State == breaker.Closed)
		}
		for _, o := range snap.Origins {
			allClosed = allClosed && o.Breaker.State == breaker.Closed
		}
		if allClosed {
			return
		}
		for o := range origins {
			if _, _, err := env.get(t, nil, fmt.Sprintf("http://o%d.example/", o)); err != nil {
				t.Fatalf("tier %d, round %d: a good request failed: %v", tier, round, err)
			}
		}
	}
	for _, p := range env.pool.Snapshot().Pairs {
		if inTier[p.Exit] && p.Breaker.State != breaker.Closed {
			t.Errorf("tier %d: pair %s/%s never closed: %+v", tier, p.Exit, p.Origin, p.Breaker)
		}
	}
	t.Fatalf("tier %d: breakers still not closed after 500 rounds of good traffic", tier)
}

// stressNoneOut checks that no request and no probe is left in flight anywhere.
func stressNoneOut(t *testing.T, env *scriptedEnv, when string) {
	t.Helper()
	snap := env.pool.Snapshot()
	for _, e := range snap.Exits {
		if e.InFlight != 0 || e.Breaker.ProbesInFlight != 0 {
			t.Errorf("%s: exit %s has %d in flight, %d probes", when, e.Exit, e.InFlight, e.Breaker.ProbesInFlight)
		}
	}
	for _, p := range snap.Pairs {
		if p.Breaker.ProbesInFlight != 0 {
			t.Errorf("%s: pair %s/%s has %d probes in flight", when, p.Exit, p.Origin, p.Breaker.ProbesInFlight)
		}
	}
	for _, o := range snap.Origins {
		if o.Breaker.ProbesInFlight != 0 {
			t.Errorf("%s: origin %s has %d probes in flight", when, o.Origin, o.Breaker.ProbesInFlight)
		}
	}
}
