package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// This file holds the environment the pool and transport tests share: a transport over
// testkit.Scripted (no network, replies decided per exit label and origin), a fake clock and a
// recording observer.

// scriptedT0 is the instant every fake clock starts at.
var scriptedT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// scriptedEnv is a transport over a scripted base with a fake clock.
type scriptedEnv struct {
	tr    *transport.Transport
	pool  *pool.Pool
	base  *testkit.Scripted
	clock *clock.Fake
	obs   *scriptedObserver
}

// newTestPoolEnv builds a Transport over exits with a scripted base, a fake clock, a recording
// observer, a deterministic random source and a long idle TTL (so no background sweep interferes);
// opts come last and may override any of it.
func newTestPoolEnv(t *testing.T, exits []*pool.Exit, opts ...any) *scriptedEnv {
	t.Helper()
	env := &scriptedEnv{base: &testkit.Scripted{}, clock: clock.NewFake(scriptedT0), obs: &scriptedObserver{}}
	all := append([]any{
		pool.WithExits(exits...),
		transport.WithBase(env.base),
		pool.WithClock(env.clock),
		transport.WithObserver(env.obs),
		pool.WithSeed(uint64(len(t.Name()))),
		pool.WithIdleTTL(1000 * time.Hour),
	}, opts...)
	tr, err := build(all...)
	if err != nil {
		t.Fatalf("transport.New: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	env.tr, env.pool = tr, tr.Pool()
	return env
}

// do sends a GET for rawURL with ctx (context.Background if nil). It returns the response (body
// still open), the label of the exit that carried it ("" if none), and the error.
func (env *scriptedEnv) do(t *testing.T, ctx context.Context, rawURL string) (*http.Response, string, error) {
	t.Helper()
	if ctx == nil {
		ctx = context.Background()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := env.tr.RoundTrip(req)
	if resp != nil && err != nil {
		t.Fatalf("RoundTrip(%s) returned a response and an error: %v", rawURL, err)
	}
	if resp == nil && err == nil {
		t.Fatalf("RoundTrip(%s) returned neither a response nor an error", rawURL)
	}
	if resp == nil {
		var ae *transport.AttemptError
		if errors.As(err, &ae) {
			return nil, ae.Exit, err
		}
		return nil, "", err
	}
	if resp.Body == nil {
		t.Fatalf("RoundTrip(%s): nil Body", rawURL)
	}
	label := ""
	if e := transport.ExitFromResponse(resp); e != nil {
		label = e.Label()
	}
	return resp, label, nil
}

// get is do with the body read and closed; it returns the exit label, the status (0 on error) and
// the error.
func (env *scriptedEnv) get(t *testing.T, ctx context.Context, rawURL string) (string, int, error) {
	t.Helper()
	resp, label, err := env.do(t, ctx, rawURL)
	if err != nil {
		return label, 0, err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return label, resp.StatusCode, nil
}

// mustGet is get that fails the test on an error.
func (env *scriptedEnv) mustGet(t *testing.T, ctx context.Context, rawURL string) (string, int) {
	t.Helper()
	label, code, err := env.get(t, ctx, rawURL)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	return label, code
}

// pair returns the snapshot of the (exit, origin) pair, and whether the pool holds one.
func (env *scriptedEnv) pair(exit, origin string) (pool.PairStatus, bool) {
	for _, p := range env.pool.Snapshot().Pairs {
		if p.Exit == exit && p.Origin == origin {
			return p, true
		}
	}
	return pool.PairStatus{}, false
}

// pairState returns the pair's state: CLOSED when the pool holds no breaker for it.
func (env *scriptedEnv) pairState(exit, origin string) breaker.State {
	p, _ := env.pair(exit, origin)
	return p.Breaker.State
}

// exitStatus returns the snapshot of exit's own breaker.
func (env *scriptedEnv) exitStatus(t *testing.T, exit string) pool.ExitStatus {
	t.Helper()
	for _, e := range env.pool.Snapshot().Exits {
		if e.Exit == exit {
			return e
		}
	}
	t.Fatalf("no exit %q in the snapshot", exit)
	return pool.ExitStatus{}
}

// originStatus returns the snapshot of origin's guard.
func (env *scriptedEnv) originStatus(t *testing.T, origin string) pool.OriginStatus {
	t.Helper()
	for _, o := range env.pool.Snapshot().Origins {
		if o.Origin == origin {
			return o
		}
	}
	t.Fatalf("no origin %q in the snapshot", origin)
	return pool.OriginStatus{}
}

// scriptedObserver records every event.
type scriptedObserver struct {
	mu       sync.Mutex
	started  []transport.AttemptInfo
	finished []transport.AttemptResult
	changes  []pool.StateChange
	refused  []error
	// startCtx, if set, derives the context AttemptStarted returns.
	startCtx func(ctx context.Context, a transport.AttemptInfo) context.Context
	// finishedCtx receives the contexts AttemptFinished was called with.
	finishedCtx []context.Context
}

func (o *scriptedObserver) AttemptStarted(ctx context.Context, a transport.AttemptInfo) context.Context {
	o.mu.Lock()
	o.started = append(o.started, a)
	f := o.startCtx
	o.mu.Unlock()
	if f != nil {
		return f(ctx, a)
	}
	return ctx
}

func (o *scriptedObserver) AttemptFinished(ctx context.Context, r transport.AttemptResult) {
	o.mu.Lock()
	o.finished = append(o.finished, r)
	o.finishedCtx = append(o.finishedCtx, ctx)
	o.mu.Unlock()
}

// Throttled and ExitRemoved complete pool.Observer: the transport adds the observer to the pool.
func (o *scriptedObserver) Throttled(context.Context, pool.Throttle) {}

func (o *scriptedObserver) ExitRemoved(*pool.Exit) {}

func (o *scriptedObserver) StateChanged(c pool.StateChange) {
	o.mu.Lock()
	o.changes = append(o.changes, c)
	o.mu.Unlock()
}

func (o *scriptedObserver) Refused(_ context.Context, _ string, err error) {
	o.mu.Lock()
	o.refused = append(o.refused, err)
	o.mu.Unlock()
}

func (o *scriptedObserver) Started() []transport.AttemptInfo {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]transport.AttemptInfo(nil), o.started...)
}

func (o *scriptedObserver) Finished() []transport.AttemptResult {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]transport.AttemptResult(nil), o.finished...)
}

func (o *scriptedObserver) Changes() []pool.StateChange {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]pool.StateChange(nil), o.changes...)
}

func (o *scriptedObserver) Refusals() []error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]error(nil), o.refused...)
}

// changesFor returns the transitions of one scope and key ("" exit or origin matches any).
func (o *scriptedObserver) changesFor(scope pool.Scope, exit, origin string) []pool.StateChange {
	var out []pool.StateChange
	for _, c := range o.Changes() {
		if c.Scope != scope {
			continue
		}
		if exit != "" && (c.Exit == nil || c.Exit.Label() != exit) {
			continue
		}
		if origin != "" && c.Origin != origin {
			continue
		}
		out = append(out, c)
	}
	return out
}

// advancePast moves the clock to just after at (and never backwards).
func (env *scriptedEnv) advancePast(at time.Time) {
	if d := at.Sub(env.clock.Now()); d > 0 {
		env.clock.Advance(d)
	}
	env.clock.Advance(time.Millisecond)
}
