package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// The body pace rule on a fake clock: a base whose bodies the test feeds chunk by chunk, and
// moves the clock only while the caller waits for the next one.

const paceURL, paceOrigin = "http://slow.example/file.bin", "slow.example"

// paceBody is a response body the test feeds. Each time the caller must wait for a chunk, Read
// first reports how many bytes it has delivered on entered, so the test knows the caller is
// waiting (and, since the transport notes the wait before it reads, that the transport knows it).
// Like net/http's bodies, it fails with the cause of the request's context once that is done.
type paceBody struct {
	ctx     context.Context
	chunks  chan string
	entered chan int64
	buf     string
	got     int64
}

func (b *paceBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.buf == "" {
		b.entered <- b.got
		select {
		case c, ok := <-b.chunks:
			if !ok {
				return 0, io.EOF
			}
			b.buf = c
		case <-b.ctx.Done():
			return 0, context.Cause(b.ctx)
		}
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	b.got += int64(n)
	return n, nil
}

func (b *paceBody) Close() error { return nil }

// paceBase answers every request 200 with a fresh paceBody, handed to the test on bodies.
type paceBase struct{ bodies chan *paceBody }

func (pb paceBase) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, ok := transport.ExitFromContext(req.Context()); !ok {
		return nil, errors.New("paceBase: no exit: refusing to go direct")
	}
	b := &paceBody{ctx: req.Context(), chunks: make(chan string, 64), entered: make(chan int64, 1024)}
	pb.bodies <- b
	return &http.Response{
		StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:  http.Header{"Content-Type": {"application/octet-stream"}},
		Body:    b,
		Request: req,
	}, nil
}

// paceEnv is a scripted environment over a paceBase, with one exit that has credentials (which
// no error may show).
type paceEnv struct {
	*scriptedEnv
	bodies chan *paceBody
}

func newPaceEnv(t *testing.T, opts ...any) *paceEnv {
	t.Helper()
	bodies := make(chan *paceBody, 16)
	exit := pool.MustParseExit("http://user:s3cret@10.0.0.1:3128").WithLabel("res-1")
	env := newTestPoolEnv(t, []*pool.Exit{exit}, append([]any{transport.WithBase(paceBase{bodies})}, opts...)...)
	return &paceEnv{scriptedEnv: env, bodies: bodies}
}

// pacedRead is a request in flight whose body a goroutine reads to its end.
type pacedRead struct {
	resp *http.Response
	body *paceBody
	done chan struct{}
	data string
	err  error
}

// start sends a GET with ctx (Background if nil) and starts reading its body.
func (env *paceEnv) start(t *testing.T, ctx context.Context) *pacedRead {
	t.Helper()
	resp, _, err := env.do(t, ctx, paceURL)
	if err != nil {
		t.Fatalf("RoundTrip = %v", err)
	}
	r := &pacedRead{resp: resp, body: <-env.bodies, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		b, err := io.ReadAll(resp.Body)
		r.data, r.err = string(b), err
	}()
	return r
}

// awaitWaiting waits until the caller waits for more after want bytes: a hand-off between
// goroutines (bounded in real time), not a wait for the rule's decision, which the clock makes.
func (r *pacedRead) awaitWaiting(t *testing.T, want int64) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-r.body.entered:
			if got == want {
				return
			}
		case <-r.done:
			t.Fatalf("the body ended (%q, %v) while waiting for the caller to wait after %d bytes", r.data, r.err, want)
		case <-timeout:
			t.Fatalf("the caller never waited after %d bytes", want)
		}
	}
}

// wait returns once the reading goroutine is done.
func (r *pacedRead) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the body's reader never returned")
	}
	r.resp.Body.Close()
}

// finished reports whether the reader has returned.
func (r *pacedRead) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// failures returns the failures counted against the pair and against the exit itself.
func (env *paceEnv) failures(t *testing.T) (pair, exit int) {
	t.Helper()
	p, _ := env.pair("res-1", paceOrigin)
	return p.Breaker.FailuresInWindow, env.exitStatus(t, "res-1").Breaker.FailuresInWindow
}

// wantNoVerdict fails the test if the attempt has had its verdict.
func (env *paceEnv) wantNoVerdict(t *testing.T, step string) {
	t.Helper()
	if f := env.obs.Finished(); len(f) != 0 {
		t.Fatalf("%s: AttemptFinished = %+v, want no verdict yet", step, f)
	}
	if p, e := env.failures(t); p != 0 || e != 0 {
		t.Fatalf("%s: failures pair %d, exit %d; want 0, 0", step, p, e)
	}
}

// wantSlow checks that the attempt ended once, as a body_read failure of the pair and the exit,
// with err a *SlowBodyError that names the exit by label only, and returns it.
func (env *paceEnv) wantSlow(t *testing.T, err error) *transport.SlowBodyError {
	t.Helper()
	var se *transport.SlowBodyError
	if !errors.As(err, &se) || !errors.Is(err, transport.ErrSlowBody) {
		t.Fatalf("body error = %v, want a *SlowBodyError matching ErrSlowBody", err)
	}
	if se.Exit != "res-1" || se.Origin != paceOrigin || strings.Contains(se.Error(), "s3cret") || !se.Timeout() {
		t.Errorf("SlowBodyError = %q (%+v): want exit res-1, origin %s, no credentials, Timeout", se, se, paceOrigin)
	}
	f := env.obs.Finished()
	if len(f) != 1 {
		t.Fatalf("AttemptFinished called %d times, want 1", len(f))
	}
	want := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBodyRead, ConnLevel: true}
	if f[0].Verdict != want || f[0].StatusCode != http.StatusOK || !errors.Is(f[0].Err, transport.ErrSlowBody) {
		t.Errorf("AttemptFinished = %+v, want %+v, status 200, the SlowBodyError", f[0], want)
	}
	if p, e := env.failures(t); p != 1 || e != 1 {
		t.Errorf("failures pair %d, exit %d; want 1, 1 (the pair, and the exit's own rate)", p, e)
	}
	return se
}

func TestBodyStallBlamesTheExit(t *testing.T) {
	env := newPaceEnv(t)
	r := env.start(t, nil)
	r.body.chunks <- "hello"
	r.awaitWaiting(t, 5)
	env.clock.Advance(transport.DefaultBodyStallTimeout - time.Millisecond)
	env.wantNoVerdict(t, "just before the stall timeout")
	env.clock.Advance(time.Millisecond)
	// The verdict is given as the clock reaches the stall (within Advance), not when the read returns.
	if f := env.obs.Finished(); len(f) != 1 || f[0].Verdict.Class != pool.ClassBodyRead {
		t.Fatalf("AttemptFinished at the stall = %+v, want one body_read", f)
	}
	r.wait(t)
	se := env.wantSlow(t, r.err)
	if !se.Stalled || se.Waited != transport.DefaultBodyStallTimeout || se.Read != 5 {
		t.Errorf("SlowBodyError = %+v, want stalled, waited %v, read 5", se, transport.DefaultBodyStallTimeout)
	}
	want := "transport: via res-1 to slow.example: response body stalled: no byte for 15s, after 5 bytes"
	if se.Error() != want {
		t.Errorf("Error() = %q, want %q", se.Error(), want)
	}
	if r.data != "hello" {
		t.Errorf("body read = %q, want %q", r.data, "hello")
	}
	if _, err := r.resp.Body.Read(make([]byte, 8)); !errors.Is(err, transport.ErrSlowBody) {
		t.Errorf("Read after the stall = %v, want the SlowBodyError again", err)
	}
	r.resp.Body.Close()
	env.wantSlow(t, r.err) // counted once, whatever follows
	if n := env.clock.Timers(); n != 0 {
		t.Errorf("%d timers left after the body ended", n)
	}
}

func TestBodyStallClockRestartsWithEachByte(t *testing.T) {
	env := newPaceEnv(t)
	r := env.start(t, nil)
	r.body.chunks <- "a"
	r.awaitWaiting(t, 1)
	env.clock.Advance(10 * time.Second)
	r.body.chunks <- "b"
	r.awaitWaiting(t, 2) // waiting since t0+10s
	env.clock.Advance(5 * time.Second)
	env.wantNoVerdict(t, "t0+15s, 5s into the second wait") // the header timer fired and re-armed
	env.clock.Advance(10*time.Second - time.Millisecond)
	env.wantNoVerdict(t, "t0+25s-1ms")
	env.clock.Advance(time.Millisecond)
	r.wait(t)
	if se := env.wantSlow(t, r.err); !se.Stalled || se.Waited != 15*time.Second || se.Read != 2 {
		t.Errorf("SlowBodyError = %+v, want stalled 15s after 2 bytes", se)
	}
}

// TestBodyNotReadIsNotBlamed: a caller that holds a body without reading is not waiting for the
// exit; the body holds no timer meanwhile, and its later reads are judged from then on.
func TestBodyNotReadIsNotBlamed(t *testing.T) {
	env := newPaceEnv(t)
	resp, _, err := env.do(t, nil, paceURL)
	if err != nil {
		t.Fatal(err)
	}
	body := <-env.bodies
	env.clock.Advance(transport.DefaultHeaderTimeout) // the header timer, now the watchdog, fires
	if n := env.clock.Timers(); n != 0 {
		t.Errorf("%d timers held by a body nobody reads, want 0", n)
	}
	env.clock.Advance(time.Hour)
	body.chunks <- strings.Repeat("x", 64<<10)
	close(body.chunks)
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(b) != 64<<10 || err != nil {
		t.Fatalf("ReadAll = %d bytes, %v; want 64 KiB, nil", len(b), err)
	}
	if f := env.obs.Finished(); len(f) != 1 || f[0].Verdict.Outcome != pool.Success {
		t.Errorf("AttemptFinished = %+v, want one success", f)
	}
	if n := env.clock.Timers(); n != 0 {
		t.Errorf("%d timers left after the body ended", n)
	}
}

// TestBodySlowReaderIsNotBlamed: the exit delivers at once and the caller takes its time between
// reads: the rate counts the caller's waiting, not its pauses.
func TestBodySlowReaderIsNotBlamed(t *testing.T) {
	env := newPaceEnv(t)
	resp, _, err := env.do(t, nil, paceURL)
	if err != nil {
		t.Fatal(err)
	}
	body := <-env.bodies
	const chunks = 40
	for range chunks {
		body.chunks <- strings.Repeat("x", 100) // 100 bytes a second of the clock: 1/40 of the minimum
	}
	close(body.chunks)
	buf := make([]byte, 100)
	total := 0
	for i := 0; ; i++ {
		n, err := resp.Body.Read(buf)
		total += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Read %d = %v after %d bytes, want no error", i, err, total)
		}
		env.clock.Advance(time.Second) // the caller's own work
	}
	resp.Body.Close()
	if total != chunks*100 {
		t.Errorf("read %d bytes, want %d", total, chunks*100)
	}
	if f := env.obs.Finished(); len(f) != 1 || f[0].Verdict.Outcome != pool.Success {
		t.Errorf("AttemptFinished = %+v, want one success", f)
	}
}

func TestBodyTrickleBlamesTheExit(t *testing.T) {
	env := newPaceEnv(t)
	r := env.start(t, nil)
	chunk := strings.Repeat("x", 100) // 100 B per second of waiting, far below 4 KiB/s
	// Grace: the first 5 s of waiting; then a 10 s window, judged when it ends, at 15 s.
	steps := int((transport.DefaultBodyRateGrace + transport.DefaultBodyRateWindow) / time.Second)
	for i := 1; i <= steps; i++ {
		r.awaitWaiting(t, int64(100*(i-1)))
		env.wantNoVerdict(t, "step "+strconv.Itoa(i))
		env.clock.Advance(time.Second)
		r.body.chunks <- chunk
	}
	r.wait(t)
	se := env.wantSlow(t, r.err)
	if se.Stalled || se.Waited != transport.DefaultBodyRateWindow || se.Rate != 100 ||
		se.MinRate != transport.DefaultMinBodyRate || se.Read != int64(100*steps) {
		t.Errorf("SlowBodyError = %+v, want 100 B/s over 10s, below %d, after %d bytes", se, transport.DefaultMinBodyRate, 100*steps)
	}
	want := "transport: via res-1 to slow.example: response body too slow: 100 B/s over 10s, below 4096 B/s, after 1500 bytes"
	if se.Error() != want {
		t.Errorf("Error() = %q, want %q", se.Error(), want)
	}
	if len(r.data) != 100*steps {
		t.Errorf("the caller got %d bytes, want all %d delivered, the last with the error", len(r.data), 100*steps)
	}
}

func TestBodyFastEnoughIsNotBlamed(t *testing.T) {
	env := newPaceEnv(t)
	r := env.start(t, nil)
	chunk := strings.Repeat("x", transport.DefaultMinBodyRate) // exactly the minimum: enough
	for i := 1; i <= 40; i++ {
		r.awaitWaiting(t, int64(len(chunk)*(i-1)))
		env.clock.Advance(time.Second)
		r.body.chunks <- chunk
	}
	r.awaitWaiting(t, int64(len(chunk)*40))
	close(r.body.chunks)
	r.wait(t)
	if r.err != nil || len(r.data) != 40*len(chunk) {
		t.Fatalf("ReadAll = %d bytes, %v; want %d, nil", len(r.data), r.err, 40*len(chunk))
	}
	if f := env.obs.Finished(); len(f) != 1 || f[0].Verdict.Outcome != pool.Success {
		t.Errorf("AttemptFinished = %+v, want one success", f)
	}
}

// TestBodyStallCallerWins: the caller's own cancellation blames nobody, even when it comes at the
// very instant of a stall.
func TestBodyStallCallerWins(t *testing.T) {
	t.Run("cancel_while_stalled", func(t *testing.T) {
		env := newPaceEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		r := env.start(t, ctx)
		r.body.chunks <- "x"
		r.awaitWaiting(t, 1)
		env.clock.Advance(10 * time.Second)
		cancel()
		r.wait(t)
		env.clock.Advance(time.Hour)
		if !errors.Is(r.err, context.Canceled) || errors.Is(r.err, transport.ErrSlowBody) {
			t.Errorf("body error = %v, want context.Canceled", r.err)
		}
		wantCanceled(t, env)
	})
	t.Run("deadline_at_the_stall", func(t *testing.T) {
		env := newPaceEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// The caller's deadline, on the same clock and made first: at equal instants it fires first.
		env.clock.AfterFunc(transport.DefaultBodyStallTimeout, cancel)
		r := env.start(t, ctx)
		r.awaitWaiting(t, 0)
		env.clock.Advance(transport.DefaultBodyStallTimeout)
		r.wait(t)
		if errors.Is(r.err, transport.ErrSlowBody) {
			t.Errorf("body error = %v, want the caller's cancellation", r.err)
		}
		wantCanceled(t, env)
	})
}

func wantCanceled(t *testing.T, env *paceEnv) {
	t.Helper()
	if f := env.obs.Finished(); len(f) != 1 || f[0].Verdict.Outcome != pool.Neutral || f[0].Verdict.Class != pool.ClassCanceled {
		t.Errorf("AttemptFinished = %+v, want one neutral canceled", f)
	}
	if p, e := env.failures(t); p != 0 || e != 0 {
		t.Errorf("failures pair %d, exit %d; want none", p, e)
	}
}

// TestBodyPaceSettings: the option, the per-request override, and the timer's hand-over whatever
// the header timeout.
func TestBodyPaceSettings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []any
		ctx   func(context.Context) context.Context
		stall time.Duration // 0: never stalls (within an hour)
	}{
		{name: "default", stall: transport.DefaultBodyStallTimeout},
		{name: "zero_keeps_default", opts: []any{transport.WithBodyPace(transport.BodyPace{})}, stall: transport.DefaultBodyStallTimeout},
		{name: "off", opts: []any{transport.WithBodyPace(transport.NoBodyPace)}},
		{name: "stall_off_rate_on", opts: []any{transport.WithBodyPace(transport.BodyPace{StallTimeout: -1})}},
		{name: "shorter", opts: []any{transport.WithBodyPace(transport.BodyPace{StallTimeout: 2 * time.Second})}, stall: 2 * time.Second},
		{name: "header_timeout_longer", opts: []any{transport.WithHeaderTimeout(time.Minute)}, stall: transport.DefaultBodyStallTimeout},
		{name: "header_timeout_off", opts: []any{transport.WithHeaderTimeout(-1)}, stall: transport.DefaultBodyStallTimeout},
		{name: "request_off", ctx: func(ctx context.Context) context.Context {
			return transport.ContextWithBodyPace(ctx, transport.NoBodyPace)
		}},
		{name: "request_longer", ctx: func(ctx context.Context) context.Context {
			return transport.ContextWithBodyPace(ctx, transport.BodyPace{StallTimeout: time.Minute})
		}, stall: time.Minute},
		{name: "request_on_where_transport_off", opts: []any{transport.WithBodyPace(transport.NoBodyPace)},
			ctx: func(ctx context.Context) context.Context {
				return transport.ContextWithBodyPace(ctx, transport.BodyPace{StallTimeout: 3 * time.Second})
			}, stall: 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newPaceEnv(t, tc.opts...)
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx(ctx)
			}
			r := env.start(t, ctx)
			r.awaitWaiting(t, 0)
			if tc.stall == 0 {
				for range 60 {
					env.clock.Advance(time.Minute)
				}
				env.wantNoVerdict(t, "an hour without a byte")
				close(r.body.chunks)
				r.wait(t)
				if r.err != nil {
					t.Errorf("body error = %v, want none", r.err)
				}
				return
			}
			env.clock.Advance(tc.stall - time.Millisecond)
			env.wantNoVerdict(t, "just before the stall")
			if r.finished() {
				t.Fatalf("the body ended before the stall: %v", r.err)
			}
			env.clock.Advance(time.Millisecond)
			r.wait(t)
			if se := env.wantSlow(t, r.err); se.Waited != tc.stall {
				t.Errorf("stalled after %v, want %v", se.Waited, tc.stall)
			}
		})
	}
	if _, err := build(pool.WithExits(testkit.Exits("x", 1)...),
		transport.WithBodyPace(transport.BodyPace{Window: -time.Second})); err == nil ||
		!strings.Contains(err.Error(), "WithBodyPace: Window -1s") {
		t.Errorf("New(WithBodyPace(Window: -1s)) = %v, want an error naming the option and the value", err)
	}
}

// TestBodyPaceAddsNoAllocations: the rule, idle, costs a request no allocation: the header timer
// it keeps watching the body is the one every request already had.
func TestBodyPaceAddsNoAllocations(t *testing.T) {
	base := newBenchCanned()
	allocs := func(opts ...transport.Option) float64 {
		p, err := pool.New(pool.WithExits(testkit.Exits("x", 4)...))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := transport.New(p, append([]transport.Option{transport.WithBase(base)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		req, _ := http.NewRequest(http.MethodGet, "http://origin.bench.example/item", nil)
		buf := make([]byte, 512)
		return testing.AllocsPerRun(1000, func() {
			if err := benchRoundTrip(tr, req, buf); err != nil {
				t.Fatal(err)
			}
		})
	}
	// AllocsPerRun counts the whole process's allocations: half an allocation per request of slack
	// absorbs a stray goroutine's, and still catches a timer (two) or a closure (one) per request.
	on, off := allocs(), allocs(transport.WithBodyPace(transport.NoBodyPace))
	if on >= off+0.5 {
		t.Errorf("allocations per request: %v with the body pace rule, %v without; want no more", on, off)
	}
}
