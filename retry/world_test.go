package retry_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
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

// world is a set of local proxies, named like the exits that point at them, and one origin that
// knows which proxy carried each request (proxytest.Registry) and answers through handle.
type world struct {
	reg     *proxytest.Registry
	origin  *httptest.Server
	exits   []*pool.Exit
	proxies map[string]*proxytest.Proxy
	clk     *clock.Fake // nil: real time

	mu   sync.Mutex
	seen []served // every request the origin answered, in order
}

type served struct {
	via    string
	path   string
	status int
	at     time.Time // on the world's clock
}

// proxySpec is one proxy and the exit that dials it.
type proxySpec struct {
	name      string
	user      string // the proxy demands Basic credentials user:right
	wrongPass bool   // the exit dials with a wrong password (407)
	hang      bool   // the proxy accepts and never answers
	dead      bool   // nothing listens where the exit points (refused)
}

// handler decides the origin's answer to a request that came via the named proxy; it writes the
// status it returns, or returns 0 to let the origin answer 200 "via NAME".
type handler func(w http.ResponseWriter, r *http.Request, via string) int

func newWorld(t *testing.T, tlsOrigin bool, clk *clock.Fake, specs []proxySpec, h handler) *world {
	t.Helper()
	w := &world{reg: &proxytest.Registry{}, proxies: map[string]*proxytest.Proxy{}, clk: clk}
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
	// Dead exits get their closed addresses last, so that no proxy started here is handed the port.
	urls := make([]*url.URL, len(specs))
	for i, s := range specs {
		if s.dead {
			continue
		}
		cfg := proxytest.Config{Name: s.name, Registry: w.reg, Hang: s.hang}
		if s.user != "" {
			cfg.User, cfg.Pass = s.user, "right"
		}
		p, err := proxytest.Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		w.proxies[s.name] = p
		urls[i] = p.URL()
		if s.wrongPass {
			urls[i] = p.URLWithCredentials(s.user, "wrong")
		}
	}
	for i, s := range specs {
		if s.dead {
			addr, err := proxytest.ClosedAddr()
			if err != nil {
				t.Fatal(err)
			}
			urls[i] = &url.URL{Scheme: "http", Host: addr}
		}
		e, err := pool.NewExit(urls[i])
		if err != nil {
			t.Fatal(err)
		}
		w.exits = append(w.exits, e.WithLabel(s.name))
	}
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
// timeout is off: it would run on that clock (a pending timer for every attempt in flight), and
// the tests that advance the clock whenever a timer waits would fire it. No exit of a fake-clock
// world hangs, so nothing needs it.
func (w *world) transportWith(t *testing.T, popts []pool.Option, opts ...transport.Option) *transport.Transport {
	t.Helper()
	tmpl := transport.DefaultBaseTemplate()
	if c := w.origin.Certificate(); c != nil && w.origin.TLS != nil {
		roots := x509.NewCertPool()
		roots.AddCert(c)
		tmpl.TLSClientConfig = &tls.Config{RootCAs: roots}
	}
	popts = append([]pool.Option{pool.WithExits(w.exits...)}, popts...)
	opts = append([]transport.Option{transport.WithBaseTemplate(tmpl)}, opts...)
	if w.clk != nil {
		popts = append(popts, pool.WithClock(w.clk))
		opts = append(opts, transport.WithHeaderTimeout(-1))
	}
	p, err := pool.New(popts...)
	if err != nil {
		t.Fatalf("pool.New = %v", err)
	}
	tr, err := transport.New(p, opts...)
	if err != nil {
		t.Fatalf("transport.New = %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
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
