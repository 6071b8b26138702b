package transport_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// integT0 is the instant every integration test's fake clock starts at.
var integT0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// integClock is the integration tests' clock: breakers read a fake instant the test moves, while
// the header timeout — a timer that must fire while a real socket hangs — runs in real time.
type integClock struct{ *clock.Fake }

func newIntegClock() integClock { return integClock{clock.NewFake(integT0)} }

func (integClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return clock.System.AfterFunc(d, f)
}

// integHalf is a jitter source that always draws 0.5: with the default Jitter of 0.25 every OPEN
// window is exactly 1.125 times its base, so tests can name the instant a breaker turns HALF_OPEN.
func integHalf() float64 { return 0.5 }

// integJittered is d as a breaker with integHalf and the default Jitter stretches it.
func integJittered(d time.Duration) time.Duration {
	return d + time.Duration(float64(d)*breaker.DefaultJitter*0.5)
}

// integFromHeader carries the source IP an origin saw, so a test can tell which tinyproxy (each
// bound to its own loopback address) carried a request, through CONNECT tunnels too.
const integFromHeader = "X-Integ-From"

// integOrigin starts an httptest origin that answers 200 "from=IP via=VIA" and sets
// integFromHeader. hook, when not nil, runs first and may answer instead (returning true). With
// h2 the origin speaks TLS and offers HTTP/2.
func integOrigin(t *testing.T, h2 bool, hook func(w http.ResponseWriter, r *http.Request, from string) bool) *httptest.Server {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from, _, _ := net.SplitHostPort(r.RemoteAddr)
		w.Header().Set(integFromHeader, from)
		if hook != nil && hook(w, r, from) {
			return
		}
		fmt.Fprintf(w, "from=%s via=%s", from, r.Header.Get("Via"))
	})
	srv := httptest.NewUnstartedServer(h)
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// integOriginKey is the origin key OriginHost gives srv's URLs.
func integOriginKey(srv *httptest.Server) string {
	u, _ := url.Parse(srv.URL)
	return u.Host
}

// integNew builds a Transport on a template trusting servers, closed when the test ends, and an
// http.Client over it.
func integNew(t *testing.T, servers []*httptest.Server, opts ...any) (*transport.Transport, *http.Client) {
	t.Helper()
	opts = append([]any{transport.WithBaseTemplate(testkit.TLSTemplate(servers...))}, opts...)
	tr, err := build(opts...)
	if err != nil {
		t.Fatalf("transport.New = %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr, &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// integExit is the exit dialing u (credentials and all), labelled label.
func integExit(t testing.TB, u *url.URL, label string) *pool.Exit {
	t.Helper()
	e, err := pool.NewExit(u)
	if err != nil {
		t.Fatalf("NewExit(%s) = %v", u.Redacted(), err)
	}
	if label != "" {
		e = e.WithLabel(label)
	}
	return e
}

// countingOrigin is an origin on 127.0.0.1 that answers "ok" and counts the requests it got per
// proxy that relayed them (by reg; "" for none); count returns a copy of the counts.
func countingOrigin(t testing.TB, reg *proxytest.Registry) (srv *httptest.Server, count func() map[string]int) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, _ := reg.Lookup(r)
		mu.Lock()
		seen[name]++
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(seen)
	}
}

// registeredExits starts a forward proxy on 127.0.0.1 per name, known to reg by that name (so an
// origin can tell which proxy relayed a request), closed when the test ends, and returns the exits
// through them, labelled by name.
func registeredExits(t testing.TB, reg *proxytest.Registry, names ...string) []*pool.Exit {
	t.Helper()
	var exits []*pool.Exit
	for _, name := range names {
		px, err := proxytest.Start(proxytest.Config{Name: name, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { px.Close() })
		exits = append(exits, integExit(t, px.URL(), name))
	}
	return exits
}

// integWithPass returns a copy of u carrying user and pass.
func integWithPass(u *url.URL, user, pass string) *url.URL {
	c := *u
	c.User = url.UserPassword(user, pass)
	return &c
}

// integResult is what one request through the transport came to.
type integResult struct {
	status int
	proto  int
	exit   string // ExitFromResponse's label; "" without a response
	from   string // the source IP the origin saw; "" if the origin did not answer
	body   string
	header http.Header
	err    error
}

// integGet sends GET u through c and reads the whole body, so a success's verdict is applied by the
// time it returns.
func integGet(c *http.Client, u string) integResult {
	resp, err := c.Get(u)
	if err != nil {
		return integResult{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	r := integResult{status: resp.StatusCode, proto: resp.ProtoMajor, body: string(body), header: resp.Header,
		from: resp.Header.Get(integFromHeader), err: err}
	if e := transport.ExitFromResponse(resp); e != nil {
		r.exit = e.Label()
	}
	return r
}

// integMustGet is integGet that fails the test unless the origin answered 200 through an exit.
func integMustGet(t *testing.T, c *http.Client, u string) integResult {
	t.Helper()
	r := integGet(c, u)
	if r.err != nil || r.status != http.StatusOK || r.exit == "" {
		t.Fatalf("Get(%s) = %d %q via %q, err %v; want 200 through an exit", u, r.status, r.body, r.exit, r.err)
	}
	return r
}

// integAttemptError returns the *AttemptError in err, failing the test if there is none.
func integAttemptError(t *testing.T, err error) *transport.AttemptError {
	t.Helper()
	var ae *transport.AttemptError
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v, want a *transport.AttemptError", err)
	}
	return ae
}

// integExitStatus returns label's entry in s.
func integExitStatus(t *testing.T, s pool.Snapshot, label string) pool.ExitStatus {
	t.Helper()
	for _, e := range s.Exits {
		if e.Exit == label {
			return e
		}
	}
	t.Fatalf("Snapshot has no exit %q: %+v", label, s.Exits)
	return pool.ExitStatus{}
}

// integPairState returns the state of the (label, origin) pair in s; a pair the pool holds no
// breaker for is CLOSED.
func integPairState(s pool.Snapshot, label, origin string) (breaker.Snapshot, bool) {
	for _, p := range s.Pairs {
		if p.Exit == label && p.Origin == origin {
			return p.Breaker, true
		}
	}
	return breaker.Snapshot{}, false
}

// integObserver records every event. It is safe for concurrent use.
type integObserver struct {
	mu       sync.Mutex
	started  []transport.AttemptInfo
	finished []transport.AttemptResult
	changes  []pool.StateChange
	refused  []error
	rendered []string // every event in %+v and %#v
}

var _ transport.Observer = (*integObserver)(nil)

func (o *integObserver) render(v any) {
	o.rendered = append(o.rendered, fmt.Sprintf("%v", v), fmt.Sprintf("%+v", v), fmt.Sprintf("%#v", v))
}

func (o *integObserver) AttemptStarted(ctx context.Context, a transport.AttemptInfo) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.started = append(o.started, a)
	o.render(a)
	return ctx
}

func (o *integObserver) AttemptFinished(_ context.Context, a transport.AttemptResult) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished = append(o.finished, a)
	o.render(a)
}

// Throttled and ExitRemoved complete pool.Observer: the transport adds the observer to the pool.
func (o *integObserver) Throttled(context.Context, pool.Throttle) {}

func (o *integObserver) ExitRemoved(*pool.Exit) {}

func (o *integObserver) StateChanged(c pool.StateChange) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.changes = append(o.changes, c)
	o.render(c)
}

func (o *integObserver) Refused(_ context.Context, origin string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused = append(o.refused, err)
	o.render(origin)
	o.render(err)
}

// attempts counts the attempts started through the exit labelled label.
func (o *integObserver) attempts(label string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, a := range o.started {
		if a.Exit.Label() == label {
			n++
		}
	}
	return n
}

// last returns the latest finished attempt.
func (o *integObserver) last(t *testing.T) transport.AttemptResult {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.finished) == 0 {
		t.Fatal("observer saw no finished attempt")
	}
	return o.finished[len(o.finished)-1]
}

// integLockedBuffer is a strings.Builder safe for concurrent writes, for log.SetOutput.
type integLockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *integLockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *integLockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
