package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Selection: which exit the pool picks for a request, seen through a scripted base.

const (
	pickOriginA = "a.example"
	pickOriginB = "b.example"
	pickURLA    = "http://a.example/"
	pickURLB    = "http://b.example/"
)

// pickCount sends n requests for rawURL (bodies read and closed) and counts them by exit.
func pickCount(t *testing.T, env *scriptedEnv, rawURL string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for i := range n {
		label, _, err := env.get(t, nil, rawURL)
		if err != nil {
			t.Fatalf("request %d for %s: %v", i, rawURL, err)
		}
		got[label]++
	}
	return got
}

// pickTrip makes one request for rawURL whose reply, whatever exit is picked, is r, and returns the
// exit that carried it.
func pickTrip(t *testing.T, env *scriptedEnv, rawURL, origin string, r testkit.Reply) string {
	t.Helper()
	env.base.On("*", origin, r)
	defer env.base.Reset()
	label, _, err := env.get(t, nil, rawURL)
	if label == "" {
		t.Fatalf("trip request for %s went nowhere: %v", rawURL, err)
	}
	return label
}

func TestPickSpreadsEvenlyAmongReadyExits(t *testing.T) {
	for _, sel := range []pool.Selection{pool.LeastLoaded, pool.Random} {
		t.Run(map[pool.Selection]string{pool.LeastLoaded: "least_loaded", pool.Random: "random"}[sel], func(t *testing.T) {
			const exits, picks = 5, 3000
			env := newTestPoolEnv(t, testkit.Exits("x", exits), pool.WithSelection(sel))
			got := pickCount(t, env, pickURLA, picks)
			want := picks / exits
			for _, e := range env.pool.Exits() {
				if n := got[e.Label()]; n < want*7/10 || n > want*13/10 {
					t.Errorf("exit %s picked %d times of %d, want about %d (all: %v)", e.Label(), n, picks, want, got)
				}
			}
		})
	}
}

func TestPickSkipsOpenPairAndParkedExit(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 4))
	// x1 is rate-limited by a.example only; x2 is rejected by its proxy for everything.
	env.base.On("x1", pickOriginA, testkit.Reply{Status: http.StatusTooManyRequests, Header: testkit.RetryAfter(300)})
	env.base.On("x2", "*", testkit.Reply{Status: http.StatusProxyAuthRequired})
	for i := 0; env.pairState("x1", pickOriginA) != breaker.Open || !env.exitStatus(t, "x2").Breaker.Parked; i++ {
		if i > 200 {
			t.Fatalf("x1 for a.example and x2 never tripped: %+v", env.pool.Snapshot())
		}
		env.get(t, nil, pickURLA)
	}
	before := env.base.Count("*", "*")
	gotA := pickCount(t, env, pickURLA, 300)
	gotB := pickCount(t, env, pickURLB, 300)
	if gotA["x1"] != 0 || gotA["x2"] != 0 {
		t.Errorf("a.example went through the open pair x1 or the parked exit x2: %v", gotA)
	}
	if gotB["x2"] != 0 {
		t.Errorf("b.example went through the parked exit x2: %v", gotB)
	}
	if gotB["x1"] == 0 {
		t.Errorf("b.example never went through x1, whose trouble was a.example's only: %v", gotB)
	}
	if n := env.base.Count("*", "*") - before; n != 600 {
		t.Errorf("base saw %d requests, want 600", n)
	}
}

func TestPickWeights(t *testing.T) {
	for _, sel := range []pool.Selection{pool.LeastLoaded, pool.Random} {
		t.Run(map[pool.Selection]string{pool.LeastLoaded: "least_loaded", pool.Random: "random"}[sel], func(t *testing.T) {
			ex := testkit.Exits("x", 2)
			ex[0] = ex[0].WithWeight(3)
			env := newTestPoolEnv(t, ex, pool.WithSelection(sel))
			got := pickCount(t, env, pickURLA, 4000)
			ratio := float64(got["x0"]) / float64(got["x1"])
			if ratio < 2.4 || ratio > 3.6 {
				t.Errorf("weight 3 vs 1: picked %v, ratio %.2f, want about 3", got, ratio)
			}
		})
	}
}

func TestPickTiersEscalatePerOriginAndComeBack(t *testing.T) {
	ex := []*pool.Exit{
		testkit.Exits("t0-", 2)[0], testkit.Exits("t0-", 2)[1],
		testkit.Exits("t1-", 2)[0].WithTier(1), testkit.Exits("t1-", 2)[1].WithTier(1),
	}
	env := newTestPoolEnv(t, ex)
	tierOf := map[string]int{"t0-0": 0, "t0-1": 0, "t1-0": 1, "t1-1": 1}

	got := pickCount(t, env, pickURLA, 200)
	if got["t1-0"]+got["t1-1"] != 0 || got["t0-0"] == 0 || got["t0-1"] == 0 {
		t.Fatalf("with tier 0 healthy, a.example went %v, want tier 0 only, both exits", got)
	}

	// Both tier-0 pairs for a.example trip (two distinct exits: the origin guard needs three).
	for i := range 2 {
		if l := pickTrip(t, env, pickURLA, pickOriginA, testkit.Reply{Status: 429, Header: testkit.RetryAfter(60 * (i + 1))}); tierOf[l] != 0 {
			t.Fatalf("trip %d went through %s, want tier 0", i, l)
		}
	}
	for _, l := range []string{"t0-0", "t0-1"} {
		if st := env.pairState(l, pickOriginA); st != breaker.Open {
			t.Fatalf("pair (%s, a.example) = %v, want open", l, st)
		}
	}
	gotA := pickCount(t, env, pickURLA, 200)
	gotB := pickCount(t, env, pickURLB, 200)
	if gotA["t0-0"]+gotA["t0-1"] != 0 || gotA["t1-0"] == 0 || gotA["t1-1"] == 0 {
		t.Errorf("tier 0 down for a.example: a.example went %v, want tier 1 only", gotA)
	}
	if gotB["t1-0"]+gotB["t1-1"] != 0 {
		t.Errorf("b.example went %v, want tier 0 only: its tier-0 pairs are healthy", gotB)
	}

	// The sooner tier-0 pair reheats: its probe goes first, and tier 0 serves again.
	p0, _ := env.pair("t0-0", pickOriginA)
	p1, _ := env.pair("t0-1", pickOriginA)
	first, second := "t0-0", p1.Breaker.NextProbe
	if p1.Breaker.NextProbe.Before(p0.Breaker.NextProbe) {
		first, second = "t0-1", p0.Breaker.NextProbe
	}
	firstPair, _ := env.pair(first, pickOriginA)
	env.advancePast(firstPair.Breaker.NextProbe)
	if !env.clock.Now().Before(second) {
		t.Fatalf("both tier-0 pairs reheated at once (%v, %v): the test needs them apart", p0.Breaker.NextProbe, p1.Breaker.NextProbe)
	}
	if l, _ := env.mustGet(t, nil, pickURLA); l != first {
		t.Fatalf("after %s reheated, a.example went through %s, want the probe through %s", first, l, first)
	}
	if st := env.pairState(first, pickOriginA); st != breaker.Closed {
		t.Fatalf("pair (%s, a.example) after a good probe = %v, want closed", first, st)
	}
	// A tier back from empty takes its share over the spillover's slow start (30 s), not at once.
	ramp := map[string]int{}
	for range 16 {
		env.clock.Advance(2 * time.Second)
		l, _ := env.mustGet(t, nil, pickURLA)
		ramp[l]++
	}
	if ramp[first] == 0 || ramp[first] == 16 {
		t.Errorf("tier 0 ramping back over 32 s: a.example went %v, want some through %s and some through tier 1", ramp, first)
	}
	// With one of its two exits healthy for a.example, tier 0 keeps min(1, 1.4 × ½) = 70 % of it
	// and spills the rest to tier 1 (Envoy's priority load).
	gotA = pickCount(t, env, pickURLA, 200)
	if n := gotA[first]; n < 110 || n > 170 || n+gotA["t1-0"]+gotA["t1-1"] != 200 {
		t.Errorf("tier 0 half healthy and ramped: a.example went %v, want about 140 of 200 through %s, the rest through tier 1", gotA, first)
	}
}

func TestPickLeastLoadedPrefersFewerInFlight(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sel      pool.Selection
		min, max float64 // share of the loaded exit
	}{
		// The two candidates are distinct exits: the loaded one never wins against the idle one
		// (two independent draws were both x0 one pick in four, and it won whatever its load).
		{"least_loaded", pool.LeastLoaded, 0, 0},
		{"random", pool.Random, 0.4, 0.6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestPoolEnv(t, testkit.Exits("x", 2), pool.WithSelection(tc.sel))
			var held []*http.Response
			for len(held) < 3 {
				resp, label, err := env.do(t, transport.ContextWithExit(context.Background(), "x0"), pickURLA)
				if err != nil || label != "x0" {
					t.Fatalf("a request pinned to x0 went through %q: %v", label, err)
				}
				held = append(held, resp)
			}
			if n := env.exitStatus(t, "x0").InFlight; n != 3 {
				t.Fatalf("x0 in flight = %d, want 3", n)
			}
			const n = 2000
			got := pickCount(t, env, pickURLA, n)
			if share := float64(got["x0"]) / n; share < tc.min || share > tc.max {
				t.Errorf("x0 holds 3 requests: picked %v, share %.2f, want in [%.2f, %.2f]", got, share, tc.min, tc.max)
			}
			for _, r := range held {
				r.Body.Close()
			}
			if n := env.exitStatus(t, "x0").InFlight; n != 0 {
				t.Errorf("x0 in flight after closing = %d, want 0", n)
			}
		})
	}
}

func TestPickWithoutTiersUsesEveryTier(t *testing.T) {
	ex := testkit.Exits("x", 2)
	ex[1] = ex[1].WithTier(1)
	env := newTestPoolEnv(t, ex, pool.WithoutTiers())
	got := pickCount(t, env, pickURLA, 1000)
	for _, l := range []string{"x0", "x1"} {
		if got[l] < 350 {
			t.Errorf("WithoutTiers: picked %v, want both tiers about evenly", got)
		}
	}
}

// Regression: picking used to acquire a probe permit on every HALF_OPEN candidate it looked at, so
// a pick that chose another exit burnt their probe slots. Each must still admit exactly one probe.
func TestPickPassingOverHalfOpenDoesNotConsumeProbeSlots(t *testing.T) {
	const n = 4
	for _, tc := range []struct {
		name  string
		trip  testkit.Reply
		probe func(t *testing.T, env *scriptedEnv, exit string) breaker.Snapshot
	}{
		{"pair", testkit.Reply{Status: 429, Header: testkit.RetryAfter(30)},
			func(_ *testing.T, env *scriptedEnv, exit string) breaker.Snapshot {
				p, _ := env.pair(exit, pickOriginA)
				return p.Breaker
			}},
		{"exit", testkit.Reply{Status: http.StatusProxyAuthRequired},
			func(t *testing.T, env *scriptedEnv, exit string) breaker.Snapshot {
				return env.exitStatus(t, exit).Breaker
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestPoolEnv(t, testkit.Exits("x", n), pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}))
			labels := make([]string, n)
			for i := range labels {
				labels[i] = env.pool.Exits()[i].Label()
			}
			tripped := map[string]bool{}
			for range n {
				tripped[pickTrip(t, env, pickURLA, pickOriginA, tc.trip)] = true
			}
			if len(tripped) != n {
				t.Fatalf("tripped %v, want all %d exits", tripped, n)
			}
			var last time.Time
			for _, l := range labels {
				if s := tc.probe(t, env, l); s.NextProbe.After(last) {
					last = s.NextProbe
				}
			}
			env.advancePast(last)
			gens := map[string]uint64{}
			for _, l := range labels {
				s := tc.probe(t, env, l)
				if s.State != breaker.HalfOpen || s.ProbesInFlight != 0 {
					t.Fatalf("%s after its cooldown: state %v, %d probes, want half_open with none", l, s.State, s.ProbesInFlight)
				}
				gens[l] = s.Generation
			}

			held := map[string]*http.Response{}
			for i := range n {
				resp, label, err := env.do(t, nil, pickURLA)
				if err != nil {
					t.Fatalf("probe %d: %v", i, err)
				}
				if held[label] != nil {
					t.Fatalf("probe %d went through %s, which already has its probe out", i, label)
				}
				held[label] = resp
				if st := env.obs.Started(); !st[len(st)-1].Probe {
					t.Errorf("probe %d through %s: AttemptInfo.Probe = false", i, label)
				}
				for _, l := range labels {
					s := tc.probe(t, env, l)
					want := 0
					if held[l] != nil {
						want = 1
					}
					if s.ProbesInFlight != want {
						t.Errorf("after probe %d: %s has %d probes in flight, want %d", i, l, s.ProbesInFlight, want)
					}
					if held[l] == nil && s.Generation != gens[l] {
						t.Errorf("after probe %d: %s moved from generation %d to %d though it was only looked at", i, l, gens[l], s.Generation)
					}
				}
			}
			_, _, err := env.do(t, nil, pickURLA)
			var nh *pool.NoHealthyExitError
			if !errors.As(err, &nh) {
				t.Fatalf("with every probe out, RoundTrip err = %v, want a *NoHealthyExitError", err)
			}
			if want := 30 * time.Second; nh.RetryIn != want { // breaker.DefaultProbeLease
				t.Errorf("RetryIn with every probe out = %v, want the lease, %v", nh.RetryIn, want)
			}
			for _, r := range held {
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
			}
			for _, l := range labels {
				if s := tc.probe(t, env, l); s.State != breaker.Closed {
					t.Errorf("%s after a good probe: %v, want closed", l, s.State)
				}
			}
		})
	}
}

func TestPickNoHealthyExit(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 3), pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}))
	for i := range 3 {
		pickTrip(t, env, pickURLA, pickOriginA, testkit.Reply{Status: 429, Header: testkit.RetryAfter(30 * (i + 1))})
	}
	env.clock.Advance(5 * time.Second)
	snap := env.pool.Snapshot()
	var soonest time.Time
	for _, p := range snap.Pairs {
		if p.Breaker.State != breaker.Open {
			t.Fatalf("pair %s/%s = %v, want open", p.Exit, p.Origin, p.Breaker.State)
		}
		if soonest.IsZero() || p.Breaker.NextProbe.Before(soonest) {
			soonest = p.Breaker.NextProbe
		}
	}
	calls := env.base.Count("*", "*")
	body := testkit.NewTrackedBody("payload")
	req, _ := http.NewRequest(http.MethodPost, pickURLA, body)
	resp, err := env.tr.RoundTrip(req)
	if resp != nil {
		t.Fatalf("RoundTrip returned a response with every pair open: %v", resp.Status)
	}
	if !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Fatalf("RoundTrip err = %v, want ErrNoHealthyExit", err)
	}
	var nh *pool.NoHealthyExitError
	if !errors.As(err, &nh) {
		t.Fatalf("RoundTrip err = %T, want *NoHealthyExitError", err)
	}
	if nh.Origin != pickOriginA || nh.Exits != 3 {
		t.Errorf("NoHealthyExitError = %+v, want Origin %q, Exits 3", nh, pickOriginA)
	}
	if want := soonest.Sub(env.clock.Now()); nh.RetryIn != want {
		t.Errorf("RetryIn = %v, want %v (the soonest NextProbe in the snapshot)", nh.RetryIn, want)
	}
	if body.Closes() != 1 {
		t.Errorf("request body closed %d times, want 1", body.Closes())
	}
	if n := env.base.Count("*", "*"); n != calls {
		t.Errorf("base called %d times for a refused request", n-calls)
	}
	if r := env.obs.Refusals(); len(r) != 1 || !errors.Is(r[0], pool.ErrNoHealthyExit) {
		t.Errorf("Refused calls = %v, want one ErrNoHealthyExit", r)
	}
	// Another origin is unaffected.
	if _, code := env.mustGet(t, nil, pickURLB); code != 200 {
		t.Errorf("b.example status %d, want 200", code)
	}
}

// Regression: when an exit's own breaker was open, the soonest-probe time took the exit's cooldown
// and ignored a pair that stays open longer, so RetryIn sent callers back too early.
func TestPickNoHealthyExitRetryInWaitsForBothBreakers(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 1),
		pool.WithExitSettings(breaker.Settings{FailureThreshold: 1, BaseCooldown: 10 * time.Second, Jitter: -1}),
		pool.WithPairSettings(breaker.Settings{Jitter: -1}))
	pickTrip(t, env, pickURLA, pickOriginA, testkit.Reply{Status: 429, Header: testkit.RetryAfter(600)})
	pickTrip(t, env, pickURLB, pickOriginB, testkit.Reply{Err: testkit.ErrTimeout})
	if s := env.exitStatus(t, "x0").Breaker; s.State != breaker.Open {
		t.Fatalf("exit x0 = %v, want open after a timeout with FailureThreshold 1", s.State)
	}
	_, _, err := env.do(t, nil, pickURLA)
	var nh *pool.NoHealthyExitError
	if !errors.As(err, &nh) {
		t.Fatalf("err = %v, want *NoHealthyExitError", err)
	}
	if want := 600 * time.Second; nh.RetryIn != want {
		t.Errorf("RetryIn = %v, want %v: the pair stays open after the exit reheats", nh.RetryIn, want)
	}
	_, _, err = env.do(t, nil, pickURLB)
	if !errors.As(err, &nh) || nh.RetryIn != 10*time.Second {
		t.Errorf("b.example: err = %v, want RetryIn 10s (the exit's cooldown)", err)
	}
}

func TestPickSessionSticksUntilPairTrips(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 4))
	ctx := transport.ContextWithSession(context.Background(), "cart-42")
	first, _ := env.mustGet(t, ctx, pickURLA)
	for i := range 30 {
		if l, _ := env.mustGet(t, ctx, pickURLA); l != first {
			t.Fatalf("session request %d went through %s, want the pinned %s", i, l, first)
		}
	}
	// Requests without the session spread over every exit.
	if got := pickCount(t, env, pickURLA, 200); len(got) < 4 {
		t.Errorf("requests without a session went %v, want every exit", got)
	}
	// The pinned pair trips: the session moves, and sticks to its new exit.
	env.base.On(first, pickOriginA, testkit.Reply{Status: 429, Header: testkit.RetryAfter(120)})
	if l, code := env.mustGet(t, ctx, pickURLA); l != first || code != 429 {
		t.Fatalf("tripping request went %s (%d), want %s (429)", l, code, first)
	}
	second, _ := env.mustGet(t, ctx, pickURLA)
	if second == first {
		t.Fatalf("after its pair tripped the session still went through %s", first)
	}
	for i := range 30 {
		if l, _ := env.mustGet(t, ctx, pickURLA); l != second {
			t.Fatalf("session request %d after the move went through %s, want %s", i, l, second)
		}
	}
	// For another origin the tripped exit is fine and the session may pin anything; it sticks.
	b0, _ := env.mustGet(t, ctx, pickURLB)
	for range 10 {
		if l, _ := env.mustGet(t, ctx, pickURLB); l != b0 {
			t.Fatalf("session for b.example moved from %s to %s", b0, l)
		}
	}
}

func TestPickRetriesAvoidTheExitThatFailed(t *testing.T) {
	t.Run("another_ready", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 3))
		for i := range 50 {
			ctx := transport.ContextWithRetries(context.Background())
			env.base.On("*", pickOriginA, testkit.Reply{Err: testkit.ErrReset})
			failed, _, err := env.get(t, ctx, pickURLA)
			if err == nil || failed == "" {
				t.Fatalf("round %d: first attempt err = %v, exit %q; want a reset through an exit", i, err, failed)
			}
			env.base.Reset()
			if l, _ := env.mustGet(t, ctx, pickURLA); l == failed {
				t.Fatalf("round %d: the retry went through %s, which failed it, while others were ready", i, l)
			}
			env.clock.Advance(time.Hour) // forget the resets: no pair trips
		}
	})
	t.Run("only_exit", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 1))
		ctx := transport.ContextWithRetries(context.Background())
		env.base.On("*", pickOriginA, testkit.Reply{Err: testkit.ErrReset})
		env.get(t, ctx, pickURLA)
		env.base.Reset()
		if l, _, err := env.get(t, ctx, pickURLA); err != nil || l != "x0" {
			t.Fatalf("retry with the failed exit the only one: exit %q, err %v; want x0", l, err)
		}
	})
}
