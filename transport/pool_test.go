package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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

// The pool's breakers: which verdict opens what, for how long, and the pool's own upkeep.

const (
	poolOriginA = "a.example"
	poolOriginB = "b.example"
	poolURLA    = "http://a.example/"
	poolURLB    = "http://b.example/"
)

// poolHit sends requests for rawURL until one goes through exit (at most limit), and returns the
// index of the AttemptInfo of that attempt in env.obs.Started().
func poolHit(t *testing.T, env *scriptedEnv, rawURL, exit string, limit int) int {
	t.Helper()
	for range limit {
		if l, _, _ := env.get(t, nil, rawURL); l == exit {
			return len(env.obs.Started()) - 1
		}
	}
	t.Fatalf("no request for %s went through %s in %d tries", rawURL, exit, limit)
	return -1
}

// poolNever sends n requests for rawURL and fails if any goes through exit.
func poolNever(t *testing.T, env *scriptedEnv, rawURL, exit string, n int, why string) {
	t.Helper()
	if got := pickCount(t, env, rawURL, n); got[exit] != 0 {
		t.Errorf("%s: %s went through %s %d times of %d (%v)", why, rawURL, exit, got[exit], n, got)
	}
}

func TestPoolRetryAfterOpensOnlyThePair(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 3))
	env.base.On("x0", poolOriginA, testkit.Reply{Status: 429, Header: testkit.RetryAfter(120)})
	poolHit(t, env, poolURLA, "x0", 100)
	tripped := env.clock.Now()
	p, _ := env.pair("x0", poolOriginA)
	if p.Breaker.State != breaker.Open || p.Breaker.NextProbe.Sub(tripped) < 120*time.Second {
		t.Fatalf("pair (x0, a.example) = %v until +%v, want open at least 120 s", p.Breaker.State, p.Breaker.NextProbe.Sub(tripped))
	}
	if p.Breaker.LastCause != breaker.CauseRetryAfter {
		t.Errorf("pair LastCause = %q, want %q", p.Breaker.LastCause, breaker.CauseRetryAfter)
	}
	if e := env.exitStatus(t, "x0").Breaker; e.State != breaker.Closed || e.FailuresInWindow != 0 {
		t.Errorf("exit x0 = %v with %d failures: a 429 is not the exit's trouble", e.State, e.FailuresInWindow)
	}
	if got := pickCount(t, env, poolURLB, 150); got["x0"] == 0 {
		t.Errorf("b.example never went through x0: %v", got)
	}
	if st := env.pairState("x0", poolOriginB); st != breaker.Closed {
		t.Errorf("pair (x0, b.example) = %v, want closed", st)
	}
	poolNever(t, env, poolURLA, "x0", 100, "pair open")

	env.clock.Set(tripped.Add(120*time.Second - time.Millisecond))
	poolNever(t, env, poolURLA, "x0", 100, "just before Retry-After")
	if st := env.pairState("x0", poolOriginA); st != breaker.Open {
		t.Fatalf("pair just before Retry-After = %v, want open", st)
	}

	env.advancePast(p.Breaker.NextProbe)
	env.base.Reset()
	i := poolHit(t, env, poolURLA, "x0", 200)
	if info := env.obs.Started()[i]; !info.Probe || info.PairState != breaker.HalfOpen {
		t.Errorf("first attempt through x0 after the cooldown: Probe %v, PairState %v; want a half_open probe", info.Probe, info.PairState)
	}
	if st := env.pairState("x0", poolOriginA); st != breaker.Closed {
		t.Errorf("pair after a good probe = %v, want closed", st)
	}
}

func TestPoolExitScopedFailureParksTheExit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply func(t *testing.T) testkit.Reply
		class pool.Class
	}{
		{"407_response", func(*testing.T) testkit.Reply { return testkit.Reply{Status: http.StatusProxyAuthRequired} }, pool.ClassProxyAuth},
		{"407_connect", func(*testing.T) testkit.Reply {
			return testkit.Reply{Err: &transport.ProxyConnectError{Exit: "x0", StatusCode: http.StatusProxyAuthRequired}}
		}, pool.ClassProxyAuth},
		{"gateway_refused", func(t *testing.T) testkit.Reply { return testkit.Reply{Err: testkit.RefusedErr(t)} }, pool.ClassProxyRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestPoolEnv(t, testkit.Exits("x", 3))
			env.base.On("x0", "*", tc.reply(t))
			i := poolHit(t, env, poolURLA, "x0", 100)
			parkedAt := env.clock.Now()
			if f := env.obs.Finished()[i]; f.Verdict.Outcome != pool.Permanent || f.Verdict.Scope != pool.ScopeExit || f.Verdict.Class != tc.class {
				t.Errorf("verdict = %+v, want permanent, exit scope, %s", f.Verdict, tc.class)
			}
			e := env.exitStatus(t, "x0").Breaker
			parkFor := 15 * time.Minute // DefaultExitSettings leave ParkFor at MaxCooldown's default
			if e.State != breaker.Open || !e.Parked || e.NextProbe.Sub(parkedAt) < parkFor {
				t.Fatalf("exit x0 = %v parked %v until +%v, want parked at least %v", e.State, e.Parked, e.NextProbe.Sub(parkedAt), parkFor)
			}
			if p, _ := env.pair("x0", poolOriginA); p.Breaker.FailuresInWindow != 0 || p.Breaker.State != breaker.Closed {
				t.Errorf("pair (x0, a.example) = %+v: an exit-scoped failure must not charge the pair", p.Breaker)
			}
			for _, u := range []string{poolURLA, poolURLB, "http://c.example/"} {
				poolNever(t, env, u, "x0", 60, "exit parked")
			}
			env.clock.Set(parkedAt.Add(parkFor - time.Millisecond))
			poolNever(t, env, "http://d.example/", "x0", 60, "just before ParkFor")

			env.advancePast(e.NextProbe)
			env.base.Reset()
			i = poolHit(t, env, "http://e.example/", "x0", 200)
			if info := env.obs.Started()[i]; !info.Probe || info.ExitState != breaker.HalfOpen {
				t.Errorf("first attempt through x0 after ParkFor: Probe %v, ExitState %v; want an exit probe", info.Probe, info.ExitState)
			}
			if e := env.exitStatus(t, "x0").Breaker; e.State != breaker.Closed {
				t.Errorf("exit after a good probe = %v, want closed", e.State)
			}
		})
	}
}

func TestPoolExitRollUpAcrossOrigins(t *testing.T) {
	t.Run("half_fail", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 1)) // DefaultExitSettings: 5 failures in a minute
		env.base.SetScript(func(c testkit.Call) (testkit.Reply, bool) {
			var n int
			fmt.Sscanf(c.Origin, "o%d.example", &n)
			if n%2 == 1 {
				return testkit.Reply{Err: testkit.ErrTimeout}, true
			}
			return testkit.Reply{}, false
		})
		for i := range 10 {
			url := fmt.Sprintf("http://o%d.example/", i)
			if _, _, err := env.get(t, nil, url); errors.Is(err, pool.ErrNoHealthyExit) {
				t.Fatalf("request %d refused: the exit tripped before its 5th failure in 10 attempts", i)
			}
			st := env.exitStatus(t, "x0").Breaker
			if want := i == 9; (st.State == breaker.Open) != want {
				t.Fatalf("after request %d (%d failures): exit = %v, want open only after the 10th", i, (i+1)/2, st.State)
			}
		}
		for _, p := range env.pool.Snapshot().Pairs {
			if p.Breaker.State != breaker.Closed || p.Breaker.FailuresInWindow > 1 {
				t.Errorf("pair (%s, %s) = %v with %d failures, want closed with at most 1", p.Exit, p.Origin, p.Breaker.State, p.Breaker.FailuresInWindow)
			}
		}
		e := env.exitStatus(t, "x0").Breaker
		if e.Parked || e.LastCause != breaker.CauseFailures {
			t.Errorf("exit = %+v, want tripped by failures, not parked", e)
		}
		if _, _, err := env.get(t, nil, "http://fresh.example/"); !errors.Is(err, pool.ErrNoHealthyExit) {
			t.Errorf("request for a fresh origin: err = %v, want ErrNoHealthyExit", err)
		}
		env.advancePast(e.NextProbe)
		env.base.Reset()
		env.mustGet(t, nil, "http://after.example/")
		if info := env.obs.Started(); !info[len(info)-1].Probe || info[len(info)-1].ExitState != breaker.HalfOpen {
			t.Errorf("first attempt after the exit's cooldown = %+v, want an exit probe", info[len(info)-1])
		}
		if st := env.exitStatus(t, "x0").Breaker.State; st != breaker.Closed {
			t.Errorf("exit after a good probe = %v, want closed", st)
		}
	})
	t.Run("third_fail", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 1))
		env.base.SetScript(func(c testkit.Call) (testkit.Reply, bool) {
			var n int
			fmt.Sscanf(c.Origin, "o%d.example", &n)
			if n%3 == 2 {
				return testkit.Reply{Err: testkit.ErrReset}, true
			}
			return testkit.Reply{}, false
		})
		// No ratio: a busy exit that fails a third of its attempts trips on its fifth failure, and
		// rests at most ExitRest.
		for i := range 15 {
			env.get(t, nil, fmt.Sprintf("http://o%d.example/", i))
			e := env.exitStatus(t, "x0").Breaker
			if want := i == 14; (e.State == breaker.Open) != want {
				t.Fatalf("after request %d (%d failures): exit = %v, want open only after the 15th", i, (i+1)/3, e.State)
			}
		}
		if e := env.exitStatus(t, "x0").Breaker; e.NextProbe.Sub(env.clock.Now()) > pool.ExitRest*5/4 {
			t.Errorf("exit tripped by connection failures: next probe in %v, want at most ExitRest %v (and jitter)", e.NextProbe.Sub(env.clock.Now()), pool.ExitRest)
		}
	})
}

func TestPoolSoftFailuresCountHalf(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 1))
	env.base.On("*", poolOriginA, testkit.Reply{Status: http.StatusBadGateway})
	for i := 1; i <= 6; i++ {
		_, code := env.mustGet(t, nil, poolURLA)
		if code != 502 {
			t.Fatalf("status %d", code)
		}
		p, _ := env.pair("x0", poolOriginA)
		wantOpen := i == 6 // three failures, two halves each
		if (p.Breaker.State == breaker.Open) != wantOpen {
			t.Fatalf("after %d soft failures: pair = %v, want open only after 6", i, p.Breaker.State)
		}
		if !wantOpen && p.Breaker.FailuresInWindow != i/2 {
			t.Errorf("after %d soft failures: %d failures in the window, want %d", i, p.Breaker.FailuresInWindow, i/2)
		}
	}
	if e := env.exitStatus(t, "x0").Breaker; e.FailuresInWindow != 0 {
		t.Errorf("502s charged the exit: %d failures", e.FailuresInWindow)
	}
}

func TestPoolDryRun(t *testing.T) {
	t.Run("pairs", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 2), pool.WithDryRun())
		env.base.On("x0", poolOriginA, testkit.Reply{Status: 429, Header: testkit.RetryAfter(300)})
		poolHit(t, env, poolURLA, "x0", 100)
		if st := env.pairState("x0", poolOriginA); st != breaker.Open {
			t.Fatalf("pair (x0, a.example) = %v, want open", st)
		}
		env.base.Reset()
		env.base.On("x1", poolOriginA, testkit.Reply{Err: testkit.ErrTimeout})
		from := len(env.obs.Started())
		got := pickCount2(t, env, poolURLA, 200)
		if got["x0"] == 0 || got["x1"] == 0 {
			t.Fatalf("dry run: a.example went %v, want both exits", got)
		}
		if st := env.pairState("x1", poolOriginA); st != breaker.Open {
			t.Errorf("dry run: pair (x1, a.example) after timeouts = %v, want open (breakers still move)", st)
		}
		x1Open := false
		for _, info := range env.obs.Started()[from:] {
			if !info.DryRun {
				t.Fatalf("AttemptInfo.DryRun = false in a dry run")
			}
			switch info.Exit.Label() {
			case "x0":
				if !info.WouldRefuse || info.PairState != breaker.Open {
					t.Errorf("attempt through the open pair x0: WouldRefuse %v, PairState %v", info.WouldRefuse, info.PairState)
				}
			case "x1":
				if info.PairState == breaker.Open {
					x1Open = true
				}
				if info.WouldRefuse != (info.PairState == breaker.Open) {
					t.Errorf("attempt through x1 with pair %v: WouldRefuse %v", info.PairState, info.WouldRefuse)
				}
			}
		}
		if !x1Open {
			t.Errorf("no attempt went through x1 once its pair opened")
		}
	})
	// Regression: the origin guard's refusal was not reported as WouldRefuse.
	t.Run("origin_guard", func(t *testing.T) {
		env := newTestPoolEnv(t, testkit.Exits("x", 3), pool.WithDryRun())
		guardTrip(t, env, poolURLA, poolOriginA, testkit.Reply{Status: 503})
		env.mustGet(t, nil, poolURLA)
		info := env.obs.Started()
		if last := info[len(info)-1]; !last.WouldRefuse {
			t.Errorf("attempt for an origin the guard holds open: WouldRefuse = false")
		}
		if refusals := env.obs.Refusals(); len(refusals) != 0 {
			t.Errorf("dry run refused requests: %v", refusals)
		}
	})
}

// pickCount2 is pickCount that tolerates errors (a dry run never refuses, but attempts fail).
func pickCount2(t *testing.T, env *scriptedEnv, rawURL string, n int) map[string]int {
	t.Helper()
	got := map[string]int{}
	for range n {
		label, _, err := env.get(t, nil, rawURL)
		if label == "" {
			t.Fatalf("request refused: %v", err)
		}
		got[label]++
	}
	return got
}

func TestPoolAddRemoveWhileTrafficFlows(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 4))
	var (
		removed    atomic.Bool
		violations atomic.Int32
		failures   atomic.Int32
		wg         sync.WaitGroup
		perExit    sync.Map
	)
	var warm sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		warm.Add(1)
		go func() {
			defer wg.Done()
			ctx := transport.ContextWithSession(context.Background(), fmt.Sprint("s", g))
			post := 0
			for i := range 5000 { // until 200 requests after Remove
				if i == 20 {
					warm.Done()
				}
				after := removed.Load()
				if after {
					if post++; post > 200 {
						break
					}
				}
				c := ctx
				if i%2 == 0 {
					c = context.Background()
				}
				req, _ := http.NewRequestWithContext(c, http.MethodGet, fmt.Sprintf("http://o%d.example/", i%5), nil)
				resp, err := env.tr.RoundTrip(req)
				if err != nil {
					failures.Add(1)
					continue
				}
				resp.Body.Close()
				label := transport.ExitFromResponse(resp).Label()
				if after && label == "x0" {
					violations.Add(1)
				}
				n, _ := perExit.LoadOrStore(label, new(atomic.Int32))
				n.(*atomic.Int32).Add(1)
			}
		}()
	}
	warm.Wait() // traffic is flowing
	added := testkit.Exits("n", 2)
	if err := env.pool.Add(added...); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if err := env.pool.Remove("x0"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	removed.Store(true)
	wg.Wait()
	if n := violations.Load(); n != 0 {
		t.Errorf("%d requests that started after Remove returned went through x0", n)
	}
	if n := failures.Load(); n != 0 {
		t.Errorf("%d requests failed", n)
	}
	for _, l := range []string{"n0", "n1"} {
		if _, ok := perExit.Load(l); !ok {
			t.Errorf("added exit %s never carried a request", l)
		}
	}
	before := env.base.Count("x0", "*")
	poolNever(t, env, poolURLA, "x0", 100, "after Remove")
	if n := env.base.Count("x0", "*"); n != before {
		t.Errorf("the base saw %d requests through x0 after Remove", n-before)
	}
	var labels []string
	for _, e := range env.pool.Exits() {
		labels = append(labels, e.Label())
	}
	if got, want := strings.Join(labels, ","), "x1,x2,x3,n0,n1"; got != want {
		t.Errorf("Exits() = %s, want %s", got, want)
	}
	for _, e := range env.pool.Snapshot().Exits {
		if e.Exit == "x0" {
			t.Errorf("snapshot still lists the removed exit")
		}
	}
}

func TestPoolAddRejectsAndRemoveUnknown(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 2))
	base := pool.MustParseExit("http://10.9.9.9:3128")
	for _, tc := range []struct {
		name  string
		exits []*pool.Exit
		want  string
	}{
		{"duplicate_of_pool", []*pool.Exit{base.WithLabel("x1")}, `duplicate exit label "x1"`},
		{"duplicate_in_call", []*pool.Exit{base.WithLabel("d"), base.WithLabel("d")}, `duplicate exit label "d"`},
		{"zero_weight", []*pool.Exit{base.WithLabel("w").WithWeight(0)}, "weight 0 must be positive"},
		{"negative_weight", []*pool.Exit{base.WithLabel("w").WithWeight(-2)}, "weight -2 must be positive"},
		{"nan_weight", []*pool.Exit{base.WithLabel("w").WithWeight(math.NaN())}, "weight NaN"},
		{"inf_weight", []*pool.Exit{base.WithLabel("w").WithWeight(math.Inf(1))}, "weight +Inf"},
		{"nil", []*pool.Exit{base.WithLabel("ok"), nil}, "exit 1 is nil"},
	} {
		err := env.pool.Add(tc.exits...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Add err = %v, want it to mention %q", tc.name, err, tc.want)
		}
		if n := len(env.pool.Exits()); n != 2 {
			t.Errorf("%s: a rejected Add changed the pool to %d exits", tc.name, n)
		}
	}
	if _, err := build(pool.WithExits(base.WithLabel("a"), base.WithLabel("a"))); err == nil ||
		!strings.Contains(err.Error(), "duplicate") {
		t.Errorf("New with duplicate labels: err = %v", err)
	}
	if err := env.pool.Remove("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Remove(unknown) err = %v, want it to name the label", err)
	}
	if err := env.pool.Remove("x1", "nope"); err == nil {
		t.Errorf("Remove(known, unknown) err = nil")
	}
	if ex := env.pool.Exits(); len(ex) != 1 || ex[0].Label() != "x0" {
		t.Errorf("after Remove(x1, nope): exits %v, want x0 only (known labels are removed anyway)", ex)
	}
}

func TestPoolSweepDropsIdleHealthyPairs(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 3), pool.WithIdleTTL(time.Minute))
	// A pair gets a breaker on its first failure: one 503 through each exit, one exit at a time
	// while the others serve (one failure each, which trips nothing whichever exits the picks
	// draw: a 429 would trip its pair at once, and its probe after the clock moves would then
	// leave it at level 1, not idle).
	for _, x := range []string{"x0", "x1", "x2"} {
		env.base.On(x, poolOriginA, testkit.Reply{Status: 503})
		for i := 0; ; i++ {
			if _, ok := env.pair(x, poolOriginA); ok {
				break
			}
			if i > 200 {
				t.Fatalf("never used %s", x)
			}
			env.mustGet(t, nil, poolURLA)
		}
		env.base.Reset()
	}
	// (x0, a.example) trips on failures (no Retry-After: those do not climb the backoff ladder) and
	// re-closes: its backoff level stays up for StablePeriod (5 min).
	env.base.On("x0", poolOriginA, testkit.Reply{Status: 429})
	for env.pairState("x0", poolOriginA) != breaker.Open {
		poolHit(t, env, poolURLA, "x0", 100)
	}
	env.base.Reset()
	p, _ := env.pair("x0", poolOriginA)
	env.advancePast(p.Breaker.NextProbe)
	poolHit(t, env, poolURLA, "x0", 200)
	if p, _ := env.pair("x0", poolOriginA); p.Breaker.State != breaker.Closed || p.Breaker.Level != 1 {
		t.Fatalf("pair (x0, a.example) = %v level %d, want closed at level 1", p.Breaker.State, p.Breaker.Level)
	}
	// (x1, b.example) is open for an hour.
	env.base.On("x1", poolOriginB, testkit.Reply{Status: 429, Header: testkit.RetryAfter(3600)})
	poolHit(t, env, poolURLB, "x1", 100)
	env.base.Reset()

	env.clock.Advance(2 * time.Minute)
	env.pool.Sweep(env.clock.Now())
	var kept []string
	for _, p := range env.pool.Snapshot().Pairs {
		kept = append(kept, p.Exit+"/"+p.Origin)
	}
	if got, want := strings.Join(kept, " "), "x0/a.example x1/b.example"; got != want {
		t.Fatalf("pairs after an idle sweep: %s, want %s", got, want)
	}

	env.clock.Advance(30 * time.Minute)
	env.pool.Sweep(env.clock.Now())
	snap := env.pool.Snapshot()
	if len(snap.Pairs) != 1 || snap.Pairs[0].Exit != "x1" {
		t.Errorf("pairs after the level decayed: %+v, want only x1/b.example (open for its hour)", snap.Pairs)
	}

	// An hour and a half later x1's window has been over, unused, for longer than the idle TTL:
	// nobody asked for b.example through it since, so it is forgotten too (else pairs of origins
	// seen once would be kept for ever).
	env.clock.Advance(90 * time.Minute)
	env.pool.Sweep(env.clock.Now())
	snap = env.pool.Snapshot()
	if len(snap.Pairs) != 0 {
		t.Errorf("pairs after x1's window had long ended: %+v, want none", snap.Pairs)
	}
	for _, o := range snap.Origins {
		if o.Origin == poolOriginA {
			t.Errorf("idle origin a.example still listed")
		}
	}
	if _, code := env.mustGet(t, nil, poolURLA); code != 200 {
		t.Errorf("a.example after its state was swept: %d", code)
	}
}

// Regression: a sweep running while a request was being picked could drop the request's freshly
// made origin between lookup and acquire, and the request failed with a NoHealthyExitError though
// every exit was healthy.
func TestPoolSweepDuringPickDoesNotRefuse(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 2), pool.WithIdleTTL(time.Minute))
	far := env.clock.Now().Add(24 * time.Hour)
	stop := make(chan struct{})
	var sweeper sync.WaitGroup
	sweeper.Add(1)
	go func() {
		defer sweeper.Done()
		for {
			select {
			case <-stop:
				return
			default:
				env.pool.Sweep(far)
			}
		}
	}()
	var refused atomic.Int32
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1500 {
				req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://g%d-o%d.example/", g, i%3), nil)
				resp, err := env.tr.RoundTrip(req)
				if err != nil {
					if refused.Add(1) == 1 {
						firstErr.Store(err.Error())
					}
					continue
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	close(stop)
	sweeper.Wait()
	if n := refused.Load(); n != 0 {
		t.Errorf("%d requests refused while every exit was healthy, first: %v", n, firstErr.Load())
	}
}

func TestPoolSnapshotJSON(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 2))
	env.base.On("x0", poolOriginA, testkit.Reply{Status: 429, Header: testkit.RetryAfter(60)})
	poolHit(t, env, poolURLA, "x0", 100)
	env.mustGet(t, nil, poolURLB)
	snap := env.pool.Snapshot()
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	s := string(b)
	for _, want := range []string{`"exit":"x0"`, `"exit":"x1"`, `"origin":"a.example"`, `"state":"open"`, `"state":"closed"`, `"last_cause":"retry_after"`} {
		if !strings.Contains(s, want) {
			t.Errorf("snapshot JSON lacks %s: %s", want, s)
		}
	}
	for _, secret := range []string{"pw-0", "pw-1", "user0:"} {
		if strings.Contains(s, secret) {
			t.Errorf("snapshot JSON shows credentials (%q): %s", secret, s)
		}
	}
	var back pool.Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("json.Unmarshal: %v", err)
	}
	if len(back.Pairs) != len(snap.Pairs) || back.Pairs[0].Breaker.State != snap.Pairs[0].Breaker.State {
		t.Errorf("snapshot did not survive a JSON round trip: %+v", back.Pairs)
	}
	// Labels that are redacted URLs never show the password either.
	env2 := newTestPoolEnv(t, []*pool.Exit{pool.MustParseExit("http://bob:hunter2@10.0.0.9:8080")})
	env2.mustGet(t, nil, poolURLA)
	b, _ = json.Marshal(env2.pool.Snapshot())
	if strings.Contains(string(b), "hunter2") || !strings.Contains(string(b), "bob:xxxxx@10.0.0.9:8080") {
		t.Errorf("snapshot JSON = %s, want the redacted label and no password", b)
	}
}
