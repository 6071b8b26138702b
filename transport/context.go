package transport

import (
	"context"
	"net/http"
	"sync"
)

type ctxKey int

const (
	exitKey ctxKey = iota
	attemptKey
	sessionKey
	retryKey
	pinKey
)

// PinExit returns a context whose requests go through the exit labelled label and no other: if
// that exit's breakers or buckets do not admit the request, RoundTrip fails (or waits for the
// exit's token) rather than picking another. It takes the exit's permits by the same path as any
// request, so a reheat loop that probes through it never holds a probe slot twice, and never
// competes unfairly with live traffic for one.
func PinExit(ctx context.Context, label string) context.Context {
	return context.WithValue(ctx, pinKey, label)
}

// ExitFromContext returns the exit the transport picked for the request whose context this is.
// A custom base RoundTripper (WithBase) must send the request through it.
func ExitFromContext(ctx context.Context) (*Exit, bool) {
	e, ok := ctx.Value(exitKey).(*Exit)
	return e, ok && e != nil
}

// ExitFromResponse returns the exit that carried resp, or nil if resp did not come through a
// Transport.
func ExitFromResponse(resp *http.Response) *Exit {
	if resp == nil || resp.Request == nil {
		return nil
	}
	e, _ := ExitFromContext(resp.Request.Context())
	return e
}

// attemptContext carries the picked exit without a separate context.WithValue allocation.
type attemptContext struct {
	context.Context
	exit *Exit
	att  *attempt
}

func (c *attemptContext) Value(key any) any {
	switch key {
	case exitKey:
		return c.exit
	case attemptKey:
		return c.att
	}
	return c.Context.Value(key)
}

// VerdictFromResponse returns how the transport classified resp when its headers arrived: the
// class of a 429 (rate_limited), a challenge page (blocked, with the Detector), a 407 from the proxy
// (proxy_auth), and so on. ok is false if resp did not come through a Transport. A success can still
// turn into a body_read failure if the body dies mid-read; observers see that final verdict.
func VerdictFromResponse(resp *http.Response) (v Verdict, ok bool) {
	if resp == nil || resp.Request == nil {
		return Verdict{}, false
	}
	a, _ := resp.Request.Context().Value(attemptKey).(*attempt)
	if a == nil {
		return Verdict{}, false
	}
	return a.verdict, true
}

// WithSession returns a context whose requests stick to one exit per origin: the first request of
// the session for an origin picks an exit as usual, and later ones reuse it until that exit's
// breaker for the origin (or the exit's own) leaves CLOSED, when the session moves to another exit.
// Use it for logins and carts that must keep one IP.
func WithSession(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, sessionKey, key)
}

// WithRetries returns a context that remembers which exits failed the requests made with it, so
// that a retry of the same logical request goes out through another exit while one is ready.
// Retry layers (the collyext and retry hooks) call it once per logical request; every attempt then
// shares the memory.
func WithRetries(ctx context.Context) context.Context {
	if _, ok := ctx.Value(retryKey).(*retryMemo); ok {
		return ctx
	}
	return context.WithValue(ctx, retryKey, &retryMemo{})
}

// retryMemo remembers the last few exits that failed one logical request.
type retryMemo struct {
	mu     sync.Mutex
	failed [8]uint32 // exit ids + 1; 0 = empty
	next   int
}

func retryMemoFrom(ctx context.Context) *retryMemo {
	m, _ := ctx.Value(retryKey).(*retryMemo)
	return m
}

func (m *retryMemo) add(id uint32) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.failed[m.next] = id + 1
	m.next = (m.next + 1) % len(m.failed)
	m.mu.Unlock()
}

// avoids reports whether id failed this logical request. A nil memo avoids nothing.
func (m *retryMemo) avoids(id uint32) bool {
	if m == nil {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.failed {
		if f == id+1 {
			return true
		}
	}
	return false
}

func (m *retryMemo) empty() bool {
	if m == nil {
		return true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.failed[0] == 0
}
