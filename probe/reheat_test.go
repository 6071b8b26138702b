package probe_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
	"github.com/proxybreaker/proxybreaker/transport"
)

// leakCheck makes the test fail if it leaves goroutines behind: registered first, it runs after
// every other cleanup (proxies, origins, transports, reheaters closed).
func leakCheck(t *testing.T) {
	t.Helper()
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// reheatEnv is a transport with exits x and y on a fake clock, and an origin that answers
// requests carried by x as x's behaviour says.
type reheatEnv struct {
	fake      *clock.Fake
	tr        *transport.Transport
	originURL string
	originKey string
	// probes counts requests for the probe URL (/robots.txt) through x; live the others.
	probes, live atomic.Int32
	// limited makes x's live requests 429 with Retry-After 60; hold, when set, makes x's probe
	// requests wait for it to close (and arrived receive a value first).
	limited atomic.Bool
	hold    chan struct{}
	arrived chan struct{}
	held    atomic.Int32 // probe requests waiting on hold now
	maxHeld atomic.Int32
}

const probePath = "/robots.txt"

func newReheatEnv(t *testing.T, holdProbes, holdLive bool) *reheatEnv {
	t.Helper()
	env := &reheatEnv{fake: clock.NewFake(goldenT0), hold: make(chan struct{}), arrived: make(chan struct{}, 16)}
	env.limited.Store(true)
	wait := func(r *http.Request) {
		n := env.held.Add(1)
		defer env.held.Add(-1)
		for m := env.maxHeld.Load(); n > m && !env.maxHeld.CompareAndSwap(m, n); m = env.maxHeld.Load() {
		}
		env.arrived <- struct{}{}
		select {
		case <-env.hold:
		case <-r.Context().Done():
		}
	}
	reg := &proxytest.Registry{}
	x := func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == probePath {
			env.probes.Add(1)
			if holdProbes {
				wait(r)
			}
			w.WriteHeader(http.StatusNotFound) // a 404 proves the pipe
			return true
		}
		env.live.Add(1)
		if holdLive && !env.limited.Load() {
			wait(r)
		}
		if env.limited.Load() {
			return throttle(60)(w, r)
		}
		return false
	}
	origin := startOrigin(t, false, reg, map[string]behaviour{"x": x})
	env.originURL = origin.URL
	env.originKey = transport.OriginHost(mustURL(t, origin.URL))
	exits := []*pool.Exit{
		exitVia(t, startProxy(t, proxytest.Config{Name: "x", Registry: reg}).URL(), "x"),
		exitVia(t, startProxy(t, proxytest.Config{Name: "y", Registry: reg}).URL(), "y"),
	}
	p, err := pool.New(pool.WithExits(exits...), pool.WithClock(env.fake),
		pool.WithPairSettings(breaker.Settings{Jitter: -1}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	tr, err := transport.New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	env.tr = tr
	return env
}

// pinned sends a GET of path through exit x, as live traffic pinned to it would.
func (env *reheatEnv) pinned(path string) (int, error) {
	req, _ := http.NewRequestWithContext(transport.ContextWithExit(context.Background(), "x"), http.MethodGet, env.originURL+path, nil)
	resp, err := env.tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// trip opens the pair (x, origin) with a 429 carrying Retry-After: 60.
func (env *reheatEnv) trip(t *testing.T) {
	t.Helper()
	if code, err := env.pinned("/"); code != http.StatusTooManyRequests || err != nil {
		t.Fatalf("tripping request = %d, %v; want 429", code, err)
	}
	if st := env.pairState("x"); st != breaker.Open {
		t.Fatalf("after a 429 with Retry-After the pair is %v, want open", st)
	}
}

func (env *reheatEnv) pair(exit string) (pool.PairStatus, bool) {
	for _, p := range env.tr.Pool().Snapshot().Pairs {
		if p.Exit == exit && p.Origin == env.originKey {
			return p, true
		}
	}
	return pool.PairStatus{}, false
}

// pairState is the pair's breaker state; a pair the pool holds no breaker for is CLOSED.
func (env *reheatEnv) pairState(exit string) breaker.State {
	p, ok := env.pair(exit)
	if !ok {
		return breaker.Closed
	}
	return p.Breaker.State
}

// start starts a reheater on env, reporting its probes on the returned channel.
func (env *reheatEnv) start(t *testing.T) (*probe.Reheater, chan probe.ReheatEvent) {
	t.Helper()
	events := make(chan probe.ReheatEvent, 16)
	rh, err := probe.StartReheater(context.Background(), probe.ReheatConfig{
		Transport: env.tr, Interval: time.Second, // the loop runs on the pool's clock: env.fake
		ProbeURLs: map[string]string{env.originKey: env.originURL + probePath},
		OnProbe:   func(ev probe.ReheatEvent) { events <- ev },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rh.Close() })
	return rh, events
}

// advance waits until the reheater's loop is waiting on its timer — after its previous round —
// then moves the fake clock by d.
func (env *reheatEnv) advance(t *testing.T, d time.Duration) {
	t.Helper()
	env.awaitLoop(t)
	env.fake.Advance(d)
}

// awaitLoop waits until the reheater's loop is waiting on its timer. The fake clock also holds the
// header timeout of every request in flight (the transport runs it on the pool's clock): each
// request held at the origin has one, so the loop's timer is there once the fake holds one more.
// A request is counted as held only after it reached the origin, that is after its timer was
// made, so the count never runs ahead of the timers.
func (env *reheatEnv) awaitLoop(t *testing.T) {
	t.Helper()
	awaitTimers(t, env.fake, 1+int(env.held.Load()))
}

// awaitTimers waits until fake holds at least n timers.
func awaitTimers(t *testing.T, fake *clock.Fake, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); fake.Timers() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("the fake clock holds %d timers, want %d: the reheater never waited on its timer", fake.Timers(), n)
		}
		time.Sleep(time.Millisecond) // a hand-off between goroutines, not a wait for state
	}
}

func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10 s", what)
		panic("unreachable")
	}
}

func none[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %s: %+v", what, v)
	default:
	}
}

// TestReheaterBringsARecoveredPairBack: a pair OPEN for a 429's Retry-After is probed by the
// reheater once its window has passed, with no live traffic, through its exit, and closes on the
// probe URL's 404; before the window it is left alone.
func TestReheaterBringsARecoveredPairBack(t *testing.T) {
	leakCheck(t)
	env := newReheatEnv(t, false, false)
	env.trip(t)
	env.limited.Store(false) // the origin has forgiven x; only a probe can find out
	rh, events := env.start(t)

	env.advance(t, 30*time.Second)
	env.awaitLoop(t) // the round at +30 s is over
	none(t, events, "probe before the Retry-After passed")
	if st := env.pairState("x"); st != breaker.Open {
		t.Fatalf("at +30 s the pair is %v, want open", st)
	}

	env.advance(t, 30*time.Second)
	ev := receive(t, events, "probe at +60 s")
	if ev.Target.Scope != pool.ScopePair || ev.Target.Exit.Label() != "x" || ev.Target.Origin != env.originKey ||
		ev.Status != http.StatusNotFound || ev.Verdict.Outcome != pool.Success || ev.Err != nil || ev.Refused {
		t.Fatalf("probe event = %+v, want a 404 through x proving the pipe", ev)
	}
	if st := env.pairState("x"); st != breaker.Closed {
		t.Errorf("after the probe the pair is %v, want closed", st)
	}
	if p, l := env.probes.Load(), env.live.Load(); p != 1 || l != 1 {
		t.Errorf("origin saw %d probes and %d live requests through x, want 1 and 1 (the trip)", p, l)
	}

	// Nothing is due any more: later rounds send nothing.
	for range 3 {
		env.advance(t, time.Second)
	}
	env.awaitLoop(t)
	none(t, events, "probe of a closed pair")
	if err := rh.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if err := rh.Close(); err != nil {
		t.Errorf("second Close() = %v", err)
	}
}

// TestReheaterNeverHoldsTwoProbeSlots: while the reheater's probe of a pair hangs at the origin,
// later rounds send no second probe, a live request pinned to the exit is refused (the single
// slot is taken by the same permit path), and the pool shows one probe in flight.
func TestReheaterNeverHoldsTwoProbeSlots(t *testing.T) {
	leakCheck(t)
	env := newReheatEnv(t, true, false)
	env.trip(t)
	env.limited.Store(false)
	_, events := env.start(t)

	env.advance(t, 60*time.Second)
	receive(t, env.arrived, "probe at the origin")
	for range 5 {
		env.advance(t, time.Second)
	}
	env.awaitLoop(t)
	if _, err := env.pinned("/"); !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Errorf("live request pinned to x while the probe is out: err = %v, want ErrNoHealthyExit", err)
	}
	if p, _ := env.pair("x"); p.Breaker.ProbesInFlight != 1 || p.Breaker.State != breaker.HalfOpen {
		t.Errorf("pair while probing = %+v, want half-open with 1 probe in flight", p.Breaker)
	}
	close(env.hold)
	ev := receive(t, events, "probe result")
	if ev.Verdict.Outcome != pool.Success {
		t.Errorf("probe = %+v, want success", ev)
	}
	if n, m := env.probes.Load(), env.maxHeld.Load(); n != 1 || m != 1 {
		t.Errorf("origin saw %d probes, at most %d at once; want 1 and 1", n, m)
	}
	none(t, events, "second probe event")
}

// TestReheaterLeavesALiveProbeAlone: when a live request has taken a due pair's probe slot, the
// reheater does not compete for it; the live request closes the pair.
func TestReheaterLeavesALiveProbeAlone(t *testing.T) {
	leakCheck(t)
	env := newReheatEnv(t, false, true)
	env.trip(t)
	env.limited.Store(false)
	env.fake.Advance(60 * time.Second) // due, and live traffic gets there first
	done := make(chan error, 1)
	go func() {
		_, err := env.pinned("/live")
		done <- err
	}()
	receive(t, env.arrived, "live probe at the origin")
	_, events := env.start(t)
	for range 5 {
		env.advance(t, time.Second)
	}
	env.awaitLoop(t)
	none(t, events, "reheater probe while live traffic holds the slot")
	close(env.hold)
	if err := receive(t, done, "live request"); err != nil {
		t.Fatalf("live request: %v", err)
	}
	if st := env.pairState("x"); st != breaker.Closed || env.probes.Load() != 0 {
		t.Errorf("pair %v after the live probe, reheater probes %d; want closed, 0", st, env.probes.Load())
	}
}

// TestReheaterStopsWithItsContext: cancelling the context stops the loop; Close then returns at
// once and nothing is left running.
func TestReheaterStopsWithItsContext(t *testing.T) {
	leakCheck(t)
	env := newReheatEnv(t, false, false)
	ctx, cancel := context.WithCancel(context.Background())
	rh, err := probe.StartReheater(ctx, probe.ReheatConfig{Transport: env.tr, Clock: env.fake,
		ProbeURLs: map[string]string{env.originKey: env.originURL + probePath}})
	if err != nil {
		t.Fatal(err)
	}
	env.awaitLoop(t)
	cancel()
	rh.Close()
}

// TestStartReheaterRejects: configuration errors are found up front.
func TestStartReheaterRejects(t *testing.T) {
	p, err := pool.New(pool.WithExits(pool.MustParseExit("127.0.0.1:1")))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	tr, err := transport.New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, tc := range []struct {
		cfg  probe.ReheatConfig
		want string
	}{
		{probe.ReheatConfig{ProbeURLs: map[string]string{"a.example": "http://a.example/"}}, "Transport is nil"},
		{probe.ReheatConfig{Transport: tr}, "ProbeURLs is empty"},
		{probe.ReheatConfig{Transport: tr, ProbeURLs: map[string]string{"a.example": "http://b.example/"}}, `on origin "b.example", not "a.example"`},
		{probe.ReheatConfig{Transport: tr, ProbeURLs: map[string]string{"a.example": "ftp://a.example/"}}, "want an http or https URL"},
		{probe.ReheatConfig{Transport: tr, ProbeURLs: map[string]string{"a.example": "http://a.example/"}, Interval: -1}, "Interval"},
	} {
		rh, err := probe.StartReheater(context.Background(), tc.cfg)
		if err == nil {
			rh.Close()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("StartReheater(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
	}
}
