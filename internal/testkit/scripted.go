package testkit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Reply is what a Scripted answers one request with. The zero Reply is 200 with an empty body.
type Reply struct {
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
	// Took advances Scripted.Clock by this much before the base answers: the attempt's latency on
	// a fake clock. A Took without a Clock fails the request.
	Took time.Duration
}

// Call is one request a Scripted received.
type Call struct {
	Exit   string // the exit's label, from transport.ExitFromContext
	Origin string // the request URL's host
	Req    *http.Request
}

// Scripted is a base http.RoundTripper standing in for the per-exit transports (transport.WithBase):
// it answers each request by rules set per (exit label, origin host), and records every call. It
// behaves like net/http where the RoundTripper contract is concerned: it answers only requests
// that carry an exit (anything else would go direct), closes the request body, answers a done
// context with the context's error, sets resp.Request, never returns a nil Body, and its bodies
// fail with the context's error once the request context is done.
//
// The zero value answers every request 200 with body "ok" and is ready to use; set the exported
// fields before the first request. A Scripted is safe for concurrent use and must not be copied.
type Scripted struct {
	// Clock is advanced by each Reply's Took. Nil is fine for scripts without Took.
	Clock *clock.Fake
	// OnReturn, if set, is called with the request just before the base returns a response or an
	// error.
	OnReturn func(req *http.Request, resp *http.Response, err error)
	// OnBodyEnd, if set, is called when a response body reaches its end or is closed, before the
	// transport sees it.
	OnBodyEnd func(req *http.Request)

	mu        sync.Mutex
	rules     map[[2]string]Reply // {exit, origin}; "*" matches any
	script    func(Call) (Reply, bool)
	calls     []Call
	idleClose atomic.Int32
}

var _ http.RoundTripper = (*Scripted)(nil)

// On sets the reply for requests through exit to origin; either may be "*". The most specific
// rule wins: (exit, origin), then (exit, "*"), ("*", origin), ("*", "*").
func (s *Scripted) On(exit, origin string, r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rules == nil {
		s.rules = map[[2]string]Reply{}
	}
	s.rules[[2]string{exit, origin}] = r
}

// Reset forgets every rule and the script: everything answers 200 "ok" again. The calls stay
// recorded.
func (s *Scripted) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = nil
	s.script = nil
}

// SetScript sets a function consulted before the rules; it answers ok=false to defer to them. It
// is called concurrently when requests are.
func (s *Scripted) SetScript(f func(c Call) (r Reply, ok bool)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = f
}

func (s *Scripted) reply(c Call) Reply {
	s.mu.Lock()
	script := s.script
	s.mu.Unlock()
	if script != nil {
		if r, ok := script(c); ok {
			return r
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range [][2]string{{c.Exit, c.Origin}, {c.Exit, "*"}, {"*", c.Origin}, {"*", "*"}} {
		if r, ok := s.rules[k]; ok {
			return r
		}
	}
	return Reply{Body: "ok"}
}

// Calls returns a copy of the calls so far, in the order they arrived.
func (s *Scripted) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Count returns how many calls went through exit to origin ("*" for any).
func (s *Scripted) Count(exit, origin string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if (exit == "*" || c.Exit == exit) && (origin == "*" || c.Origin == origin) {
			n++
		}
	}
	return n
}

// CloseIdleConnections counts the call; IdleCloses reports the count.
func (s *Scripted) CloseIdleConnections() { s.idleClose.Add(1) }

// IdleCloses returns how many times CloseIdleConnections was called.
func (s *Scripted) IdleCloses() int { return int(s.idleClose.Load()) }

// RoundTrip implements http.RoundTripper.
func (s *Scripted) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.roundTrip(req)
	if s.OnReturn != nil {
		s.OnReturn(req, resp, err)
	}
	return resp, err
}

func (s *Scripted) roundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	ctx := req.Context()
	e, ok := transport.ExitFromContext(ctx)
	if !ok {
		return nil, errors.New("testkit: scripted base: request carries no exit: it would go direct")
	}
	c := Call{Exit: e.Label(), Origin: req.URL.Host, Req: req}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	r := s.reply(c)
	if r.Took > 0 {
		if s.Clock == nil {
			return nil, errors.New("testkit: scripted base: Reply.Took needs Scripted.Clock")
		}
		s.Clock.Advance(r.Took)
	}
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
	if s.OnBodyEnd != nil {
		body.onEnd = func() { s.OnBodyEnd(req) }
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
		return 0, errors.New("testkit: scripted body: read after close")
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
