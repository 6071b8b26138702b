package retry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

// The hooks are plain funcs of the shapes retryablehttp names.
var (
	_ retryablehttp.CheckRetry   = (*retry.Policy)(nil).CheckRetry
	_ retryablehttp.Backoff      = (*retry.Policy)(nil).Backoff
	_ retryablehttp.PrepareRetry = (*retry.Policy)(nil).PrepareRetry
)

// world is a set of local proxies (testkit.World), named like the exits that point at them, and
// one origin that knows which proxy carried each request (proxytest.Registry) and answers through
// handle.
type world struct {
	*testkit.World
	reg    *proxytest.Registry
	origin *httptest.Server
	clk    *clock.Fake // nil: real time

	mu   sync.Mutex
	seen []served // every request the origin answered, in order
}

type served struct {
	via    string
	path   string
	status int
	at     time.Time // on the world's clock
}

// handler decides the origin's answer to a request that came via the named proxy; it writes the
// status it returns, or returns 0 to let the origin answer 200 "via NAME".
type handler func(w http.ResponseWriter, r *http.Request, via string) int

func newWorld(t *testing.T, tlsOrigin bool, clk *clock.Fake, specs []testkit.ExitSpec, h handler) *world {
	t.Helper()
	w := &world{reg: &proxytest.Registry{}, clk: clk}
	w.origin = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		via, _ := w.reg.Lookup(r)
		status := 0
		if h != nil {
			status = h(rw, r, via)
		}
		if status == 0 {
			status = http.StatusOK
			fmt.Fprintf(rw, "via %s", via)
		}
		w.mu.Lock()
		w.seen = append(w.seen, served{via: via, path: r.URL.Path, status: status, at: w.now()})
		w.mu.Unlock()
	}))
	if tlsOrigin {
		w.origin.StartTLS()
	} else {
		w.origin.Start()
	}
	t.Cleanup(w.origin.Close)
	w.World = testkit.StartWorld(t, w.reg, specs...)
	return w
}

func (w *world) now() time.Time {
	if w.clk != nil {
		return w.clk.Now()
	}
	return time.Now()
}

func (w *world) served() []served {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]served(nil), w.seen...)
}

// transport returns a Transport over a new pool of the world's exits, closed when the test ends.
func (w *world) transport(t *testing.T, opts ...transport.Option) *transport.Transport {
	t.Helper()
	return w.transportWith(t, nil, opts...)
}

// transportWith is transport with pool options too. On a fake clock the transport's header
// timeout and body pace rule are off: they would run on that clock (a pending timer for every
// attempt in flight, and for every body being read), and the tests that advance the clock whenever
// a timer waits would fire them. No exit of a fake-clock world hangs or trickles, so nothing needs
// them.
func (w *world) transportWith(t *testing.T, popts []pool.Option, opts ...transport.Option) *transport.Transport {
	t.Helper()
	if w.clk != nil {
		popts = append(popts, pool.WithClock(w.clk))
		opts = append(opts, transport.WithHeaderTimeout(-1), transport.WithBodyPace(transport.NoBodyPace))
	}
	return w.Transport(t, w.origin, popts, opts...)
}

// client is a real retryablehttp client over tr with p's hooks. The client's own sleeps are
// real and short (RetryWaitMin 1 ms); the waits that matter run on p's clock.
func client(tr http.RoundTripper, p *retry.Policy, retryMax int, waitMax time.Duration) *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	c.HTTPClient = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	c.RetryWaitMin, c.RetryWaitMax, c.RetryMax = time.Millisecond, waitMax, retryMax
	c.CheckRetry, c.Backoff, c.PrepareRetry = p.CheckRetry, p.Backoff, p.PrepareRetry
	return c
}

type reqKey struct{}

// attempts records, per logical request (reqKey in its context), the exits its attempts went
// through, in order.
type attempts struct {
	transport.NopObserver
	mu     sync.Mutex
	byReq  map[int][]string
	result map[int][]pool.Class
}

func newAttempts() *attempts {
	return &attempts{byReq: map[int][]string{}, result: map[int][]pool.Class{}}
}

func (a *attempts) AttemptStarted(ctx context.Context, info transport.AttemptInfo) context.Context {
	if id, ok := ctx.Value(reqKey{}).(int); ok {
		a.mu.Lock()
		a.byReq[id] = append(a.byReq[id], info.Exit.Label())
		a.mu.Unlock()
	}
	return ctx
}

func (a *attempts) AttemptFinished(ctx context.Context, r transport.AttemptResult) {
	if id, ok := ctx.Value(reqKey{}).(int); ok {
		a.mu.Lock()
		a.result[id] = append(a.result[id], r.Verdict.Class)
		a.mu.Unlock()
	}
}

func (a *attempts) of(id int) ([]string, []pool.Class) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.byReq[id]...), append([]pool.Class(nil), a.result[id]...)
}

// get sends one logical request through c and reads the body.
func get(ctx context.Context, c *retryablehttp.Client, u string) (body string, exit string, err error) {
	req, err := retryablehttp.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return "", "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if e := transport.ExitFromResponse(resp); e != nil {
		exit = e.Label()
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), exit, fmt.Errorf("status %d", resp.StatusCode)
	}
	return string(b), exit, err
}

// getDriven is get on a fake-clock world: it sends one logical request through c in another
// goroutine and moves clk by step whenever that request waits on it (testkit.DriveClock), until
// the request is done.
func getDriven(t *testing.T, clk *clock.Fake, step time.Duration, c *retryablehttp.Client, u string) (body, exit string, err error) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		body, exit, err = get(transport.ContextWithRetries(context.Background()), c, u)
	}()
	testkit.DriveClock(t, clk, step, done)
	return body, exit, err
}
