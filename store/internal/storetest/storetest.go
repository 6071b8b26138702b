// Package storetest holds what the store packages' tests share: a scripted base RoundTripper (no
// network: replies decided per exit label and origin host), exits that are never dialled, and a
// pool environment to send requests through.
//
//	test → transport.Transport (pool + store) → Base (scripted reply) → classify → breaker → store
package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// T0 is the instant the tests' fake clocks start at.
var T0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Reply is what Base answers one request with. The zero Reply is 200 "ok".
type Reply struct {
	Status     int // 0 means 200
	RetryAfter int // seconds; 0 for no Retry-After header
	// Hold, when not nil, makes the base wait for it to be closed (or for the request's context)
	// before answering.
	Hold chan struct{}
}

// Base is an http.RoundTripper standing in for the per-exit transports: it answers by rules set per
// (exit label, origin host), "*" matching any, and counts the calls. Safe for concurrent use.
type Base struct {
	mu     sync.Mutex
	rules  map[[2]string]Reply
	counts map[[2]string]int
	// OnCall, if set, is called with each call's exit label and origin before the reply is chosen.
	OnCall func(exit, origin string)
}

// NewBase returns a Base that answers everything 200.
func NewBase() *Base { return &Base{rules: map[[2]string]Reply{}, counts: map[[2]string]int{}} }

// On sets the reply for requests through exit to origin.
func (b *Base) On(exit, origin string, r Reply) {
	b.mu.Lock()
	b.rules[[2]string{exit, origin}] = r
	b.mu.Unlock()
}

// Reset forgets every rule.
func (b *Base) Reset() {
	b.mu.Lock()
	b.rules = map[[2]string]Reply{}
	b.mu.Unlock()
}

// Count returns how many calls went through exit to origin ("*" for any).
func (b *Base) Count(exit, origin string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for k, c := range b.counts {
		if (exit == "*" || k[0] == exit) && (origin == "*" || k[1] == origin) {
			n += c
		}
	}
	return n
}

// RoundTrip implements http.RoundTripper.
func (b *Base) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		req.Body.Close()
	}
	ctx := req.Context()
	e, ok := transport.ExitFromContext(ctx)
	if !ok {
		return nil, errors.New("storetest: request carries no exit: it would go direct")
	}
	exit, origin := e.Label(), req.URL.Host
	if b.OnCall != nil {
		b.OnCall(exit, origin)
	}
	b.mu.Lock()
	b.counts[[2]string{exit, origin}]++
	var r Reply
	for _, k := range [][2]string{{exit, origin}, {exit, "*"}, {"*", origin}, {"*", "*"}} {
		if rr, ok := b.rules[k]; ok {
			r = rr
			break
		}
	}
	b.mu.Unlock()
	if r.Hold != nil {
		select {
		case <-r.Hold:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	status := r.Status
	if status == 0 {
		status = http.StatusOK
	}
	h := http.Header{}
	if r.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(r.RetryAfter))
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h,
		Body: io.NopCloser(strings.NewReader("ok")), ContentLength: 2, Request: req,
	}, nil
}

// Exits returns n exits labelled prefix0…prefixN-1. Their addresses are on 127.0.0.1 and are never
// dialled: Base answers for them.
func Exits(prefix string, n int) []*pool.Exit {
	out := make([]*pool.Exit, n)
	for i := range out {
		out[i] = pool.MustParseExit(fmt.Sprintf("http://127.0.0.1:%d", 9+i)).WithLabel(fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

// Get sends a GET for rawURL through rt, reads and closes the body, and returns the label of the
// exit that carried it.
func Get(ctx context.Context, rt http.RoundTripper, rawURL string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	label := ""
	if e := transport.ExitFromResponse(resp); e != nil {
		label = e.Label()
	}
	return label, nil
}

// MustGet is Get that fails the test on an error.
func MustGet(t testing.TB, rt http.RoundTripper, rawURL string) string {
	t.Helper()
	label, err := Get(context.Background(), rt, rawURL)
	if err != nil {
		t.Fatalf("GET %s: %v", rawURL, err)
	}
	return label
}

// Pair returns the snapshot of the (exit, origin) breaker in p; ok is false when p holds none.
func Pair(p *pool.Pool, exit, origin string) (breaker.Snapshot, bool) {
	for _, ps := range p.Snapshot().Pairs {
		if ps.Exit == exit && ps.Origin == origin {
			return ps.Breaker, true
		}
	}
	return breaker.Snapshot{}, false
}

// Exit returns the snapshot of exit's own breaker in p.
func Exit(p *pool.Pool, exit string) breaker.Snapshot {
	for _, es := range p.Snapshot().Exits {
		if es.Exit == exit {
			return es.Breaker
		}
	}
	return breaker.Snapshot{}
}

// PairState returns the state of the (exit, origin) breaker in p, CLOSED when p holds none.
func PairState(p *pool.Pool, exit, origin string) breaker.State {
	s, _ := Pair(p, exit, origin)
	return s.State
}

// Eventually polls cond every few milliseconds until it holds or within passes, and reports how
// long it took and whether it held. The loop is bounded by within.
func Eventually(within time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if cond() {
			return time.Since(start), true
		}
		if time.Since(start) > within {
			return time.Since(start), false
		}
		time.Sleep(2 * time.Millisecond) // polling another goroutine's (or process's) progress
	}
}
