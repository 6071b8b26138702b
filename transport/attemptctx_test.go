package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// White-box tests of the attempt as a context (attemptctx.go) and of its watchdog's reuse
// (watchdog.go): what net/http and package context rely on, step by step.

// awaitDone waits, bounded in real time, for ctx to end: the hand-off of a goroutine package
// context starts, not a wait for a decision.
func awaitDone(t *testing.T, step string, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the context did not end", step)
	}
}

func TestAttemptContextCancel(t *testing.T) {
	a := &attempt{}
	a.initContext(context.Background())
	if a.Err() != nil || a.cause() != nil {
		t.Fatalf("step 0: Err() = %v, cause() = %v before the end, want nil", a.Err(), a.cause())
	}
	if a.doneCh.Load() != nil {
		t.Error("step 0: a Done channel made before anyone asked for it")
	}
	d := a.Done()
	if a.Done() != d {
		t.Error("step 1: Done() returned two channels")
	}
	a.cancel(errHeaderTimeout)
	select {
	case <-d:
	default:
		t.Fatal("step 2: Done() not closed after cancel")
	}
	if a.Err() != context.Canceled || a.cause() != errHeaderTimeout {
		t.Errorf("step 2: Err() = %v, cause() = %v; want context.Canceled, errHeaderTimeout", a.Err(), a.cause())
	}
	a.cancel(nil) // the first end wins
	if a.cause() != errHeaderTimeout {
		t.Errorf("step 3: cause() = %v after a second cancel, want errHeaderTimeout", a.cause())
	}

	b := &attempt{}
	b.initContext(context.Background())
	b.cancel(nil) // before anyone asked for the channel
	if b.cause() != context.Canceled {
		t.Errorf("step 4: cause() = %v after cancel(nil), want context.Canceled", b.cause())
	}
	select {
	case <-b.Done():
	default:
		t.Error("step 4: Done() of an attempt cancelled before it was asked for is not closed")
	}
}

func TestAttemptContextParent(t *testing.T) {
	errCaller := errors.New("the caller's cause")
	type key struct{}
	parent, cancelParent := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
	a := &attempt{info: AttemptInfo{LeaseInfo: pool.LeaseInfo{Exit: pool.MustParseExit("http://10.0.0.1:3128")}}}
	a.initContext(parent)
	if got := a.Value(key{}); got != "v" {
		t.Errorf("Value(the caller's key) = %v, want v", got)
	}
	if e, ok := ExitFromContext(a); !ok || e != a.info.Exit {
		t.Errorf("ExitFromContext = %v, %v; want the attempt's exit", e, ok)
	}
	if a.Value(attemptKey) != a {
		t.Error("Value(attemptKey) is not the attempt")
	}
	cancelParent(errCaller)
	awaitDone(t, "the caller's end", a)
	if a.Err() != context.Canceled || a.cause() != errCaller {
		t.Errorf("after the caller's end: Err() = %v, cause() = %v; want context.Canceled, the caller's cause", a.Err(), a.cause())
	}
	if context.Cause(a) != errCaller {
		t.Errorf("context.Cause = %v, want the caller's cause", context.Cause(a))
	}

	// A cancel after the caller's end, before it reached the attempt, is the caller's end.
	parent, cancelParent = context.WithCancelCause(context.Background())
	b := &attempt{}
	b.initContext(parent)
	cancelParent(errCaller)
	b.cancel(errHeaderTimeout)
	if b.cause() != errCaller {
		t.Errorf("cancel after the caller's end: cause() = %v, want the caller's", b.cause())
	}

	// A caller's context that has ended already ends the attempt at once.
	c := &attempt{}
	c.initContext(parent)
	if c.Err() != context.Canceled || c.cause() != errCaller {
		t.Errorf("an ended caller's context: Err() = %v, cause() = %v; want context.Canceled, the caller's cause", c.Err(), c.cause())
	}

	// The attempt ending first stops watching the caller's context.
	parent, cancelParent = context.WithCancelCause(context.Background())
	defer cancelParent(nil)
	d := &attempt{}
	d.initContext(parent)
	d.cancel(nil)
	if d.stopParent != nil {
		t.Error("the attempt ended and still watches the caller's context")
	}
}

// TestAttemptContextChildren: contexts derived from the attempt's — net/http's own per-request
// one is context.WithCancelCause(req.Context()) — register with its AfterFunc and end with it.
func TestAttemptContextChildren(t *testing.T) {
	a := &attempt{}
	a.initContext(context.Background())
	first, cancelFirst := context.WithCancelCause(a) // as net/http's
	if a.first == nil {
		t.Fatal("step 0: the first child did not register with AfterFunc")
	}
	second, cancelSecond := context.WithCancel(a)
	third, cancelThird := context.WithCancel(a)
	defer cancelThird()
	if len(a.afters) != 2 {
		t.Fatalf("step 1: %d later registrations, want 2", len(a.afters))
	}
	cancelSecond() // a later child's end takes it off
	if len(a.afters) != 1 || second.Err() == nil {
		t.Errorf("step 2: %d later registrations after a child's end, want 1", len(a.afters))
	}
	cancelFirst(nil) // the first stays on, and is cancelled already when the attempt ends
	ran := make(chan struct{})
	stop := context.AfterFunc(a, func() { close(ran) })
	stopped := context.AfterFunc(a, func() { t.Error("step 3: a stopped AfterFunc ran") })
	if !stopped() {
		t.Error("step 3: stop of a pending AfterFunc = false, want true")
	}
	a.cancel(errHeaderTimeout)
	if third.Err() != context.Canceled || context.Cause(third) != context.Canceled {
		t.Errorf("step 4: a child after the end: Err() = %v, Cause = %v; want context.Canceled", third.Err(), context.Cause(third))
	}
	if first.Err() != context.Canceled {
		t.Errorf("step 4: the first child: Err() = %v, want context.Canceled", first.Err())
	}
	awaitDone(t, "step 5: context.AfterFunc", closedOn(ran))
	if stop() {
		t.Error("step 5: stop of an AfterFunc that ran = true, want false")
	}
	late, cancelLate := context.WithCancel(a) // after the end: ended at once
	defer cancelLate()
	if late.Err() == nil {
		t.Error("step 6: a child made after the end has not ended")
	}
	ranLate := make(chan struct{})
	a.AfterFunc(func() { close(ranLate) })
	awaitDone(t, "step 7: AfterFunc after the end", closedOn(ranLate))
}

// closedOn is a context whose Done is ch.
func closedOn(ch chan struct{}) context.Context { return chanContext(ch) }

type chanContext chan struct{}

func (chanContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c chanContext) Done() <-chan struct{}     { return c }
func (chanContext) Err() error                  { return nil }
func (chanContext) Value(any) any               { return nil }

// TestObservedContext: a child of an observer's context that only adds values registers with the
// attempt and ends with it; a child of one with an end of its own ends with that.
func TestObservedContext(t *testing.T) {
	type key struct{}
	a := &attempt{}
	a.initContext(context.Background())
	if got := a.observed(a); got != context.Context(a) {
		t.Errorf("observed(the attempt) = %v, want the attempt", got)
	}
	withSpan := a.observed(context.WithValue(a, key{}, "span"))
	if _, ok := withSpan.(interface{ AfterFunc(func()) func() bool }); !ok || withSpan.Value(key{}) != "span" {
		t.Errorf("observed(WithValue) = %T: want an AfterFunc and the observer's value", withSpan)
	}
	if a.doneCh.Load() != nil {
		t.Error("observed made the attempt's Done channel before anyone asked for it")
	}
	child, cancel := context.WithCancel(withSpan)
	defer cancel()
	if a.first == nil {
		t.Error("a child of the observers' context did not register with the attempt")
	}

	b := &attempt{}
	b.initContext(context.Background())
	own, cancelOwn := context.WithCancel(b)
	ownChild, cancelOwnChild := context.WithCancel(b.observed(valueless{own}))
	defer cancelOwnChild()
	cancelOwn()
	awaitDone(t, "a child of an observers' context with an end of its own", ownChild)
	if b.Err() != nil {
		t.Errorf("the observers' context's own end ended the attempt: Err() = %v", b.Err())
	}

	a.cancel(nil)
	if child.Err() == nil {
		t.Error("a child of the observers' context did not end with the attempt")
	}
}

// valueless hides its context's values, and so its *cancelCtx from package context, which must
// then ask the observers' context for an AfterFunc.
type valueless struct{ context.Context }

func (valueless) Value(any) any { return nil }

// TestAttemptFitsItsSizeClass: the attempt is a request's one allocation; with the 8-byte header
// the allocator puts before objects of more than 512 bytes it fills the 1,024-byte size class,
// and one word more would cost 128 bytes per request.
func TestAttemptFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(attempt{}); n > 1024-8 {
		t.Errorf("unsafe.Sizeof(attempt{}) = %d, want at most %d", n, 1024-8)
	}
}

// hangingBase waits for the request's context to end, and reports it was entered on entered.
type hangingBase chan struct{}

func (h hangingBase) RoundTrip(r *http.Request) (*http.Response, error) {
	h <- struct{}{}
	<-r.Context().Done()
	return nil, r.Context().Err()
}

// TestWatchdogReuse: a watchdog stopped before it fired serves the next attempt; one that fired
// does not go back.
func TestWatchdogReuse(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	hang := make(hangingBase, 1)
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if strings.HasSuffix(r.URL.Path, "/hang") {
			return hang.RoundTrip(r)
		}
		return &http.Response{
			StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/plain"}},
			Body: io.NopCloser(strings.NewReader("ok")), Request: r,
		}, nil
	})
	p, err := pool.New(pool.WithExits(pool.MustParseExit("http://10.0.0.1:3128")), pool.WithClock(fake))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := New(p, WithBase(base), WithHeaderTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	get := func(step int, path string) error {
		req, _ := http.NewRequest(http.MethodGet, "http://origin.example"+path, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.ReadAll(resp.Body); err != nil {
			return fmt.Errorf("step %d: body: %w", step, err)
		}
		return nil
	}
	if err := get(0, "/a"); err != nil {
		t.Fatal(err)
	}
	if n := len(tr.watchdogs); n != 1 {
		t.Fatalf("step 0: %d watchdogs kept after a request, want 1", n)
	}
	w := <-tr.watchdogs
	tr.watchdogs <- w
	if err := get(1, "/b"); err != nil {
		t.Fatal(err)
	}
	if got := <-tr.watchdogs; got != w || w.owner.Load() != nil {
		t.Errorf("step 1: the second request did not reuse the first's watchdog, or it kept its owner")
	}
	if fake.Timers() != 0 {
		t.Errorf("step 1: %d timers pending between requests, want 0", fake.Timers())
	}
	tr.watchdogs <- w
	errc := make(chan error, 1)
	go func() { errc <- get(2, "/hang") }()
	<-hang
	fake.Advance(time.Second)
	if err := <-errc; !errors.Is(err, errHeaderTimeout) {
		t.Fatalf("step 2: RoundTrip = %v, want the header timeout", err)
	}
	if n := len(tr.watchdogs); n != 0 {
		t.Errorf("step 2: %d watchdogs kept after one fired, want 0", n)
	}
}
