package transport_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// integEnteredBody wraps the body the exit's own *http.Transport returned, beneath the transport's
// wrapper: each Read reports, on entry, how many bytes it has delivered, so the test knows when
// the caller waits on the socket for bytes the origin has not sent yet.
type integEnteredBody struct {
	rc      io.ReadCloser
	entered chan<- int64
	got     int64
}

func (b *integEnteredBody) Read(p []byte) (int, error) {
	b.entered <- b.got
	n, err := b.rc.Read(p)
	b.got += int64(n)
	return n, err
}

func (b *integEnteredBody) Close() error { return b.rc.Close() }

// TestIntegSlowBodyBlamesTheExitBeforeTheCallersDeadline: an origin behind a real tinyproxy on
// 127.0.0.1 trickles its body (100 B per second of the clock) or stops sending it; the body pace
// rule fails the read with a *SlowBodyError and counts it once against the exit — its pair, and
// its own failure rate — at 15 s on the pool's clock, while the caller's deadline (30 s on the
// same clock) has not come. Without the rule only that deadline would end the body, blaming
// nobody. The clock is a plain clock.Fake: it moves only while the caller waits on the socket.
func TestIntegSlowBodyBlamesTheExitBeforeTheCallersDeadline(t *testing.T) {
	t.Parallel()
	const callerDeadline = 30 * time.Second
	for _, tc := range []struct {
		name    string
		chunk   int           // bytes sent per second of the clock; 0: one chunk of 100, then nothing
		stalled bool          // the rule that ends it: the stall, or the rate
		at      time.Duration // when, on the clock: after 5 s of grace and a 10 s window; 15 s into the wait
	}{
		{name: "trickle", chunk: 100, at: 15 * time.Second},
		{name: "stall", chunk: 0, stalled: true, at: 16 * time.Second}, // it waits from 1 s on
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			feed := make(chan int)
			origin := integOrigin(t, false, func(w http.ResponseWriter, r *http.Request, _ string) bool {
				w.Header().Set("Content-Type", "application/octet-stream") // not a page: never peeked at
				w.WriteHeader(http.StatusOK)
				w.(http.Flusher).Flush()
				for {
					select {
					case n := <-feed:
						w.Write(bytes.Repeat([]byte("x"), n))
						w.(http.Flusher).Flush()
					case <-r.Context().Done():
						return true
					}
				}
			})
			exit := integExit(t, servertest.Tinyproxy(t, servertest.TinyproxyConfig{}), "tiny")
			entered := make(chan int64, 1024)
			watch := func(_ *pool.Exit, next http.RoundTripper) http.RoundTripper {
				return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
					resp, err := next.RoundTrip(req)
					if resp != nil {
						resp.Body = &integEnteredBody{rc: resp.Body, entered: entered}
					}
					return resp, err
				})
			}
			fc := clock.NewFake(integT0)
			obs := &integObserver{}
			tr, client := integNew(t, []*httptest.Server{origin}, pool.WithExits(exit), pool.WithClock(fc),
				transport.WithExitMiddleware(watch), transport.WithObserver(obs))

			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			fc.AfterFunc(callerDeadline, cancel) // the caller's deadline, on the pool's clock
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, origin.URL+"/file.bin", nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("GET through tinyproxy = %v", err)
			}
			defer resp.Body.Close()
			type read struct {
				n   int
				err error
			}
			done := make(chan read, 1)
			go func() {
				b, err := io.ReadAll(resp.Body)
				done <- read{len(b), err}
			}()

			// Each step: once the caller waits for bytes the origin has not sent, a second passes on
			// the clock, then the origin sends the next chunk (the stall: only the first).
			verdict := func() bool {
				obs.mu.Lock()
				defer obs.mu.Unlock()
				return len(obs.finished) > 0
			}
			var ended *read
			sent, waiting := int64(0), false
			for ended == nil && !verdict() {
				if fc.Now().Sub(integT0) >= callerDeadline {
					t.Fatalf("the caller's deadline came first: %d bytes sent, no verdict", sent)
				}
				if !waiting {
					select {
					case got := <-entered:
						if got != sent {
							continue // still reading what was sent
						}
					case r := <-done:
						ended = &r
						continue
					case <-time.After(10 * time.Second):
						t.Fatalf("the caller never waited after %d bytes", sent)
					}
				}
				fc.Advance(time.Second)
				if tc.chunk > 0 || sent == 0 {
					n := max(tc.chunk, 100)
					feed <- n
					sent += int64(n)
					waiting = false
				} else {
					waiting = true // it waits still: only the clock moves
				}
			}
			at := fc.Now().Sub(integT0)
			if ended == nil {
				select {
				case r := <-done:
					ended = &r
				case <-time.After(10 * time.Second):
					t.Fatal("the body's reader never returned after the verdict")
				}
			}

			var se *transport.SlowBodyError
			if !errors.As(ended.err, &se) || se.Stalled != tc.stalled || se.Exit != "tiny" {
				t.Fatalf("reading the body = %d bytes, %v; want a *SlowBodyError (stalled %v) naming exit tiny",
					ended.n, ended.err, tc.stalled)
			}
			if at != tc.at || ctx.Err() != nil {
				t.Errorf("the rule ended the body at %v on the clock (caller's context: %v), want %v, before the caller's deadline at %v",
					at, ctx.Err(), tc.at, callerDeadline)
			}
			s := tr.Pool().Snapshot()
			p, ok := integPairState(s, "tiny", integOriginKey(origin))
			if !ok || p.FailuresInWindow != 1 || p.LastFailure != string(pool.ClassBodyRead) {
				t.Errorf("pair (tiny, origin) = %+v (held %v), want 1 body_read failure", p, ok)
			}
			if e := integExitStatus(t, s, "tiny"); e.Breaker.FailuresInWindow != 1 {
				t.Errorf("exit tiny: %d failures, want 1 (a body's failure counts toward the exit's own rate)", e.Breaker.FailuresInWindow)
			}
			if last := obs.last(t); last.Verdict.Class != pool.ClassBodyRead || !errors.Is(last.Err, transport.ErrSlowBody) {
				t.Errorf("AttemptFinished = %+v, want body_read with the SlowBodyError", last)
			}
		})
	}
}
