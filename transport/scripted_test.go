package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// This file holds the scripted base RoundTripper and the helpers the pool and transport tests share:
// no network, a fake clock, and replies decided per (exit label, origin).

// scriptedT0 is the instant every fake clock starts at.
var scriptedT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// scriptedReply is what the scripted base answers one request with.
type scriptedReply struct {
	Status int // 0 means 200 (unless Err is set)
	Header http.Header
	Body   string
	// BodyErr, when set, is returned by the body's Read once Body has been served, instead of EOF.
	BodyErr error
	// Err makes the base return this error and no response.
	Err error
	// Hang makes the base block until the request's context is done, then return its error, as
	// net/http does for a proxy that never answers.
	Hang bool
	// Hold, when not nil, makes the base wait for it to be closed (or for the request's context)
	// before answering.
	Hold chan struct{}
}

// scriptedCall is one request the scripted base received.
type scriptedCall struct {
	Exit   string // the exit's label, from ExitFromContext
	Origin string // the request URL's host
	Req    *http.Request
}

// scriptedBase is an http.RoundTripper standing in for the per-exit transports. It behaves like
// net/http where the contract is concerned: it closes the request body, answers a done context
// with the context's error, sets resp.Request, and its bodies fail once the request context is done.
type scriptedBase struct {
	mu     sync.Mutex
	rules  map[[2]string]scriptedReply // {exit, origin}; "*" matches any
	script func(c scriptedCall) (scriptedReply, bool)
	calls  []scriptedCall

	closeIdle atomic.Int32
	// onReturn, if set, is called with the request just before the base returns a response or an
	// error (the stress test's probe tracker uses it); onBodyEnd when a body reaches its end or is
	// closed, before the transport sees it.
	onReturn  func(req *http.Request, resp *http.Response, err error)
	onBodyEnd func(req *http.Request)
}

func newScriptedBase() *scriptedBase {
	return &scriptedBase{rules: map[[2]string]scriptedReply{}}
}

// on sets the reply for requests through exit to origin; either may be "*".
func (b *scriptedBase) on(exit, origin string, r scriptedReply) {
	b.mu.Lock()
	b.rules[[2]string{exit, origin}] = r
	b.mu.Unlock()
}

// reset forgets every rule: everything answers 200 again.
func (b *scriptedBase) reset() {
	b.mu.Lock()
	b.rules = map[[2]string]scriptedReply{}
	b.script = nil
	b.mu.Unlock()
}

// setScript sets a function consulted before the rules; it answers ok=false to defer to them.
func (b *scriptedBase) setScript(f func(c scriptedCall) (scriptedReply, bool)) {
	b.mu.Lock()
	b.script = f
	b.mu.Unlock()
}

func (b *scriptedBase) reply(c scriptedCall) scriptedReply {
	b.mu.Lock()
	script := b.script
	b.mu.Unlock()
	if script != nil {
		if r, ok := script(c); ok {
			return r
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, k := range [][2]string{{c.Exit, c.Origin}, {c.Exit, "*"}, {"*", c.Origin}, {"*", "*"}} {
		if r, ok := b.rules[k]; ok {
			return r
		}
	}
	return scriptedReply{Body: "ok"}
}

// Calls returns a copy of the calls so far.
func (b *scriptedBase) Calls() []scriptedCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]scriptedCall(nil), b.calls...)
}

// count returns how many calls went through exit to origin ("*" for any).
func (b *scriptedBase) count(exit, origin string) int {
	n := 0
	for _, c := range b.Calls() {
		if (exit == "*" || c.Exit == exit) && (origin == "*" || c.Origin == origin) {
			n++
		}
	}
	return n
}

func (b *scriptedBase) CloseIdleConnections() { b.closeIdle.Add(1) }

func (b *scriptedBase) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.roundTrip(req)
	if b.onReturn != nil {
		b.onReturn(req, resp, err)
	}
	return resp, err
}

func (b *scriptedBase) roundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	ctx := req.Context()
	e, ok := transport.ExitFromContext(ctx)
	if !ok {
		return nil, errors.New("scripted base: request carries no exit: it would go direct")
	}
	c := scriptedCall{Exit: e.Label(), Origin: req.URL.Host, Req: req}
	b.mu.Lock()
	b.calls = append(b.calls, c)
	b.mu.Unlock()
	r := b.reply(c)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch {
	case r.Hang:
		<-ctx.Done()
		return nil, ctx.Err()
	case r.Hold != nil:
		select {
		case <-r.Hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if r.Err != nil {
		return nil, r.Err
	}
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	h := http.Header{}
	for k, v := range r.Header {
		h[k] = append([]string(nil), v...)
	}
	body := &scriptedBody{ctx: ctx, data: r.Body, err: r.BodyErr}
	if b.onBodyEnd != nil {
		body.onEnd = func() { b.onBodyEnd(req) }
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          body,
		ContentLength: -1,
		Request:       req,
	}, nil
}

// scriptedBody serves data, then err (EOF when nil). Like net/http's bodies it fails with the
// context's error once the request context is done.
type scriptedBody struct {
	ctx    context.Context
	mu     sync.Mutex
	data   string
	off    int
	err    error
	closed bool
	onEnd  func()
	ended  bool
}

func (b *scriptedBody) end() {
	if !b.ended {
		b.ended = true
		if b.onEnd != nil {
			b.onEnd()
		}
	}
}

func (b *scriptedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return 0, errors.New("scripted body: read after close")
	}
	if err := b.ctx.Err(); err != nil {
		b.end()
		return 0, err
	}
	if b.off < len(b.data) {
		n := copy(p, b.data[b.off:])
		b.off += n
		return n, nil
	}
	b.end()
	if b.err != nil {
		return 0, b.err
	}
	return 0, io.EOF
}

func (b *scriptedBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.end()
	return nil
}

// scriptedTrackedBody is a request body that records whether it was closed.
type scriptedTrackedBody struct {
	io.Reader
	closed atomic.Int32
}

func newScriptedTrackedBody(s string) *scriptedTrackedBody {
	return &scriptedTrackedBody{Reader: strings.NewReader(s)}
}

func (b *scriptedTrackedBody) Close() error { b.closed.Add(1); return nil }

// Errors the scripted base returns, shaped like the ones net/http produces.
var (
	scriptedTimeoutErr = &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	scriptedResetErr   = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
)

// scriptedRefusedErr returns a real ECONNREFUSED dial error, made by dialing a loopback port that
// was just closed.
func scriptedRefusedErr(t *testing.T) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback: %v", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
		t.Skip("a closed loopback port accepted a connection")
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Skipf("dialing a closed port gave %v, not ECONNREFUSED", err)
	}
	return err
}

// scriptedRetryAfter returns a header with Retry-After set to secs seconds.
func scriptedRetryAfter(secs int) http.Header {
	return http.Header{"Retry-After": {fmt.Sprint(secs)}}
}

// scriptedExits returns n exits labelled prefix0…prefix(n-1), each with credentials.
func scriptedExits(prefix string, n int) []*pool.Exit {
	out := make([]*pool.Exit, n)
	for i := range out {
		out[i] = pool.MustParseExit(fmt.Sprintf("http://user%d:pw-%d@10.1.%d.%d:3128", i, i, i/250, i%250+1)).
			WithLabel(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// scriptedEnv is a transport over a scripted base with a fake clock.
type scriptedEnv struct {
	tr    *transport.Transport
	pool  *pool.Pool
	base  *scriptedBase
	clock *clock.Fake
	obs   *scriptedObserver
}

// newTestPoolEnv builds a Transport over exits with a scripted base, a fake clock, a recording
// observer, a deterministic random source and a long idle TTL (so no background sweep interferes);
// opts come last and may override any of it.
func newTestPoolEnv(t *testing.T, exits []*pool.Exit, opts ...any) *scriptedEnv {
	t.Helper()
	env := &scriptedEnv{base: newScriptedBase(), clock: clock.NewFake(scriptedT0), obs: &scriptedObserver{}}
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
