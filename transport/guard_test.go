package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// The origin guard: when most of the exits that tried an origin fail it, the origin is to blame.

const (
	guardOriginA = "a.example"
	guardOriginB = "b.example"
	guardURLA    = "http://a.example/"
	guardURLB    = "http://b.example/"
)

// guardTrip sends requests for rawURL, each answered with r, through distinct exits (a retry
// context makes each avoid the exits that already failed) until origin's guard opens. It returns
// the exits that failed it.
func guardTrip(t *testing.T, env *scriptedEnv, rawURL, origin string, r testkit.Reply) []string {
	t.Helper()
	env.base.On("*", origin, r)
	defer env.base.Reset()
	ctx := transport.ContextWithRetries(context.Background())
	var failed []string
	for range 16 {
		label, _, err := env.get(t, ctx, rawURL)
		if label == "" {
			t.Fatalf("guardTrip: request refused before the guard opened: %v", err)
		}
		failed = append(failed, label)
		if env.originStatus(t, origin).Breaker.State == breaker.Open {
			return failed
		}
	}
	t.Fatalf("guardTrip: the guard for %s never opened after %v", origin, failed)
	return nil
}

func TestGuardTripsWhenManyExitsFailTheOrigin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply testkit.Reply
	}{
		{"503", testkit.Reply{Status: http.StatusServiceUnavailable, Body: "down"}},
		{"timeout", testkit.Reply{Err: testkit.ErrTimeout}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestPoolEnv(t, testkit.Exits("x", 5))
			// One request is in flight when the guard trips: its failure belongs to the episode.
			hold := make(chan struct{})
			entered := make(chan string, 1)
			late := tc.reply
			late.Hold = hold
			var once sync.Once
			env.base.SetScript(func(c testkit.Call) (r testkit.Reply, ok bool) {
				once.Do(func() { r, ok = late, true; entered <- c.Exit })
				return r, ok
			})
			lateDone := make(chan error, 1)
			go func() {
				req, _ := http.NewRequest(http.MethodGet, guardURLA, nil)
				resp, err := env.tr.RoundTrip(req)
				if resp != nil {
					resp.Body.Close()
				}
				lateDone <- err
			}()
			heldExit := <-entered

			failed := guardTrip(t, env, guardURLA, guardOriginA, tc.reply)
			if len(failed) != 3 {
				t.Fatalf("the guard opened after %d failing exits (%v), want 3", len(failed), failed)
			}
			atTrip := env.pool.Snapshot()
			close(hold)
			<-lateDone

			og := env.originStatus(t, guardOriginA).Breaker
			if og.State != breaker.Open {
				t.Fatalf("guard = %v, want open", og.State)
			}
			calls := env.base.Count("*", "*")
			_, _, err := env.do(t, nil, guardURLA)
			if !errors.Is(err, pool.ErrOriginUnhealthy) {
				t.Fatalf("request for a.example: err = %v, want ErrOriginUnhealthy", err)
			}
			var ou *pool.OriginUnhealthyError
			if !errors.As(err, &ou) {
				t.Fatalf("err = %T, want *OriginUnhealthyError", err)
			}
			if ou.Origin != guardOriginA || ou.FailingExits != 3 || ou.RetryIn != og.NextProbe.Sub(env.clock.Now()) {
				t.Errorf("OriginUnhealthyError = %+v, want Origin %s, 3 failing exits, RetryIn %v",
					ou, guardOriginA, og.NextProbe.Sub(env.clock.Now()))
			}
			if n := env.base.Count("*", "*"); n != calls {
				t.Errorf("a fail-fast request reached the base")
			}
			if r := env.obs.Refusals(); len(r) != 1 || !errors.Is(r[0], pool.ErrOriginUnhealthy) {
				t.Errorf("Refused = %v, want one ErrOriginUnhealthy", r)
			}

			// The pairs were not charged for the episode: no trips, and the late failure through
			// heldExit changed nothing.
			after := env.pool.Snapshot()
			for _, p := range after.Pairs {
				if p.Origin != guardOriginA {
					continue
				}
				if p.Breaker.Trips != 0 || p.Breaker.State != breaker.Closed {
					t.Errorf("pair (%s, a.example) = %v with %d trips, want closed, untripped", p.Exit, p.Breaker.State, p.Breaker.Trips)
				}
				for _, q := range atTrip.Pairs {
					if q.Exit == p.Exit && q.Origin == p.Origin && q.Breaker.FailuresInWindow != p.Breaker.FailuresInWindow {
						t.Errorf("pair (%s, a.example) failures went %d → %d after the trip (held exit %s)",
							p.Exit, q.Breaker.FailuresInWindow, p.Breaker.FailuresInWindow, heldExit)
					}
				}
			}

			// Another origin is unaffected, through every exit.
			if got := pickCount(t, env, guardURLB, 100); len(got) != 5 {
				t.Errorf("b.example went %v, want every exit", got)
			}

			// After the cooldown one probe goes out; while it is out the origin stays refused; its
			// success closes the guard.
			env.advancePast(og.NextProbe)
			probe, _, err := env.do(t, nil, guardURLA)
			if err != nil {
				t.Fatalf("probe: %v", err)
			}
			if st := env.obs.Started(); !st[len(st)-1].Probe {
				t.Errorf("the guard's probe has AttemptInfo.Probe = false")
			}
			if _, _, err := env.do(t, nil, guardURLA); !errors.Is(err, pool.ErrOriginUnhealthy) {
				t.Errorf("second request while the probe is out: err = %v, want ErrOriginUnhealthy", err)
			}
			io.Copy(io.Discard, probe.Body)
			probe.Body.Close()
			if st := env.originStatus(t, guardOriginA).Breaker.State; st != breaker.Closed {
				t.Fatalf("guard after a good probe = %v, want closed", st)
			}
			if _, code := env.mustGet(t, nil, guardURLA); code != 200 {
				t.Errorf("a.example after the guard closed: %d", code)
			}
		})
	}
}

func TestGuardFailedProbeReopensWithoutChargingThePair(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 4))
	guardTrip(t, env, guardURLA, guardOriginA, testkit.Reply{Status: 503})
	first := env.originStatus(t, guardOriginA).Breaker
	env.advancePast(first.NextProbe)
	before := env.pool.Snapshot()
	env.base.On("*", guardOriginA, testkit.Reply{Status: 503})
	label, code := env.mustGet(t, nil, guardURLA)
	if code != 503 {
		t.Fatalf("probe status %d", code)
	}
	og := env.originStatus(t, guardOriginA).Breaker
	if og.State != breaker.Open || og.Level != first.Level+1 {
		t.Errorf("guard after a failed probe: %v level %d, want open level %d", og.State, og.Level, first.Level+1)
	}
	for _, q := range before.Pairs {
		if p, _ := env.pair(q.Exit, q.Origin); q.Exit == label && p.Breaker.FailuresInWindow != q.Breaker.FailuresInWindow {
			t.Errorf("the failed guard probe charged pair (%s, %s): %d → %d", q.Exit, q.Origin, q.Breaker.FailuresInWindow, p.Breaker.FailuresInWindow)
		}
	}
}

func TestGuardNeedsMostOfTheTriedExits(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 8))
	seen := map[string]bool{}
	for i := 0; len(seen) < 8; i++ {
		if i > 500 {
			t.Fatalf("only reached %v", seen)
		}
		l, _ := env.mustGet(t, nil, guardURLA)
		seen[l] = true
	}
	env.base.On("*", guardOriginA, testkit.Reply{Status: 503})
	ctx := transport.ContextWithRetries(context.Background())
	for i := range 4 { // 4 of the 8 exits that tried it: not more than half
		env.get(t, ctx, guardURLA)
		if st := env.originStatus(t, guardOriginA).Breaker.State; st != breaker.Closed {
			t.Fatalf("guard opened after %d failing exits of 8", i+1)
		}
	}
	// The same retry context avoids the four that failed: a fifth exit fails, and that is most.
	env.get(t, ctx, guardURLA)
	if st := env.originStatus(t, guardOriginA).Breaker.State; st != breaker.Open {
		t.Errorf("guard = %v with 5 of 8 exits failing, want open", st)
	}
}

func TestGuardDisabled(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 3), pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}))
	env.base.On("*", guardOriginA, testkit.Reply{Err: testkit.ErrTimeout})
	ctx := transport.ContextWithRetries(context.Background())
	seen := map[string]bool{}
	for range 3 {
		l, _, err := env.get(t, ctx, guardURLA)
		if errors.Is(err, pool.ErrOriginUnhealthy) {
			t.Fatalf("disabled guard refused a request: %v", err)
		}
		seen[l] = true
	}
	if len(seen) != 3 {
		t.Fatalf("failures went through %v, want 3 distinct exits", seen)
	}
	env.base.Reset()
	if _, code := env.mustGet(t, nil, guardURLA); code != 200 {
		t.Errorf("a.example after 3 failing exits with the guard off: %d", code)
	}
	if o := env.pool.Snapshot().Origins; len(o) != 0 {
		t.Errorf("snapshot lists guards though disabled: %+v", o)
	}
	for l := range seen {
		if p, _ := env.pair(l, guardOriginA); p.Breaker.FailuresInWindow != 1 {
			t.Errorf("pair (%s, a.example) failures = %d, want 1: with no guard every pair is charged", l, p.Breaker.FailuresInWindow)
		}
	}
}

// Regression: when the guard blamed the origin, a 429's Retry-After was dropped for the pair, so a
// probe could go back through an exit the origin had asked to wait.
func TestGuardKeepsRetryAfterOnThePair(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 3))
	failed := guardTrip(t, env, guardURLA, guardOriginA, testkit.Reply{Status: 503, Header: testkit.RetryAfter(120)})
	if len(failed) != 3 {
		t.Fatalf("guard opened after %v, want 3 exits", failed)
	}
	now := env.clock.Now()
	for _, l := range failed {
		p, _ := env.pair(l, guardOriginA)
		if p.Breaker.State != breaker.Open || p.Breaker.NextProbe.Sub(now) < 120e9 {
			t.Errorf("pair (%s, a.example) = %v until %v, want open at least 120 s", l, p.Breaker.State, p.Breaker.NextProbe.Sub(now))
		}
	}
	env.advancePast(env.originStatus(t, guardOriginA).Breaker.NextProbe)
	calls := env.base.Count("*", "*")
	if _, _, err := env.get(t, nil, guardURLA); !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Errorf("guard reheated before the Retry-After: err = %v, want ErrNoHealthyExit", err)
	}
	if n := env.base.Count("*", "*"); n != calls {
		t.Errorf("a request went out before the origin's Retry-After had passed")
	}
}

// TestGuardIgnoresRateLimits: 429s and challenge pages judge one IP, not the origin. Every exit
// that gets one opens its own pair; the guard stays CLOSED however many exits get them.
func TestGuardIgnoresRateLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply testkit.Reply
	}{
		{"429", testkit.Reply{Status: 429, Header: testkit.RetryAfter(60)}},
		{"challenge", testkit.Reply{Status: 403, Header: http.Header{"Cf-Mitigated": {"challenge"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestPoolEnv(t, testkit.Exits("x", 4))
			env.base.On("*", guardOriginA, tc.reply)
			// Until every pair has been judged (one 429 each, or three challenges each), requests
			// go out; then the pairs refuse them. The guard never opens on the way.
			var err error
			for i := 0; i < 40 && err == nil; i++ {
				_, _, err = env.get(t, nil, guardURLA)
				if st := env.originStatus(t, guardOriginA).Breaker.State; st != breaker.Closed {
					t.Fatalf("request %d: guard for a.example = %v after %s, want closed", i, st, tc.name)
				}
			}
			if !errors.Is(err, pool.ErrNoHealthyExit) {
				t.Errorf("after every pair was judged: err = %v, want ErrNoHealthyExit (pairs open, not the origin)", err)
			}
		})
	}
}
