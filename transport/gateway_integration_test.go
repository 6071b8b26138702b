package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Integration tests of provider gateways: a real http.Transport through proxytest.Gateway, which
// binds each session to its own 127.0.0.x source address, to origins that judge clients by the
// address they see (proxytest.BanOrigin) — never by anything the library tells them.

// gatewayRig is one gateway fixture, the pool of its template line and a transport on it.
type gatewayRig struct {
	gw     *proxytest.Gateway
	pool   *pool.Pool
	tr     *transport.Transport
	client *http.Client
	clk    integClock
	moves  *sessionMoves
}

// sessionMoves records the attempts' LeaseInfo.SessionMoved and the pool's session rotations.
type sessionMoves struct {
	pool.NopObserver
	mu        sync.Mutex
	moved     []bool
	rotations []pool.SessionRotation
}

func (m *sessionMoves) AttemptStarted(ctx context.Context, a transport.AttemptInfo) context.Context {
	m.mu.Lock()
	m.moved = append(m.moved, a.SessionMoved)
	m.mu.Unlock()
	return ctx
}
func (m *sessionMoves) AttemptFinished(context.Context, transport.AttemptResult) {}
func (m *sessionMoves) SessionRotated(r pool.SessionRotation) {
	m.mu.Lock()
	m.rotations = append(m.rotations, r)
	m.mu.Unlock()
}
func (m *sessionMoves) snapshot() ([]bool, []pool.SessionRotation) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]bool(nil), m.moved...), append([]pool.SessionRotation(nil), m.rotations...)
}

// newGatewayRig starts a gateway with gc (its Now the rig's clock), and a transport whose pool is
// the gateway's template line with attrs, trusting servers.
func newGatewayRig(t *testing.T, gc proxytest.GatewayConfig, attrs string, servers []*httptest.Server, popts ...pool.Option) *gatewayRig {
	t.Helper()
	clk := newIntegClock()
	gc.Now = clk.Now
	gw, err := proxytest.StartGateway(gc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gw.Close() })
	line := gw.Template() + " label=gw " + attrs
	if gc.User == "" {
		t.Fatal("gateway config without a user")
	}
	exits, err := pool.ReadExits(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	moves := &sessionMoves{}
	// transport.WithObserver adds moves to the pool too: it is a pool.Observer (and SessionObserver).
	opts := []any{pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(1), transport.WithObserver(moves)}
	for _, o := range popts {
		opts = append(opts, o)
	}
	tr, client := integNew(t, servers, opts...)
	return &gatewayRig{gw: gw, pool: tr.Pool(), tr: tr, client: client, clk: clk, moves: moves}
}

// wrongPass returns gc whose clients will send pass: a template line with another password.
func gatewayWithWrongPass(t *testing.T, servers []*httptest.Server) (*gatewayRig, *proxytest.Gateway) {
	t.Helper()
	r := newGatewayRig(t, proxytest.GatewayConfig{User: "acct", Pass: "right"}, "sessions=5", servers)
	// Rebuild the pool on the same gateway with the wrong password.
	line := strings.Replace(r.gw.Template(), ":right@", ":wrong@", 1) + " label=gw sessions=5"
	exits, err := pool.ReadExits(strings.NewReader(line))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.pool.Sync(exits); err != nil {
		t.Fatal(err)
	}
	return r, r.gw
}

func TestIntegGatewayBannedSessionReplacedWithinOnePick(t *testing.T) {
	for _, tls := range []bool{false, true} {
		name := "http"
		if tls {
			name = "https"
		}
		t.Run(name, func(t *testing.T) {
			bo := &proxytest.BanOrigin{BanAfter: 1}
			srv := httptest.NewUnstartedServer(bo)
			if tls {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			r := newGatewayRig(t, proxytest.GatewayConfig{User: "acct", Pass: "pw"}, "sessions=1", []*httptest.Server{srv})

			first := integMustGet(t, r.client, srv.URL) // served, and its address banned from now on
			banned := integGet(r.client, srv.URL)
			if banned.status != http.StatusForbidden || banned.exit != first.exit {
				t.Fatalf("second request: %d via %s, want the ban (403) through %s", banned.status, banned.exit, first.exit)
			}
			next := integMustGet(t, r.client, srv.URL)
			if next.body == first.body || next.exit == first.exit {
				t.Errorf("after the ban: served from %s via %s, want a new address and session (first %s via %s)", next.body, next.exit, first.body, first.exit)
			}
			if got := bo.Blocks(); got != 1 {
				t.Errorf("origin blocked %d requests, want 1: the pool sent nothing more to the banned address", got)
			}
			if _, rot := r.moves.snapshot(); len(rot) != 1 || rot[0].Reason != pool.RotationBlocked {
				t.Errorf("rotations = %+v, want one, blocked", rot)
			}
		})
	}
}

func TestIntegGateway407ParksEverySessionAtOnce(t *testing.T) {
	srv := integOrigin(t, false, nil)
	r, gw := gatewayWithWrongPass(t, []*httptest.Server{srv})
	res := integGet(r.client, srv.URL)
	if res.err != nil || res.status != http.StatusProxyAuthRequired {
		t.Fatalf("first request: %d, %v; want the gateway's 407", res.status, res.err)
	}
	for i := range 4 {
		res := integGet(r.client, srv.URL)
		if !errors.Is(res.err, pool.ErrNoHealthyExit) {
			t.Fatalf("request %d after the 407: %v, want ErrNoHealthyExit: every session parked", i+2, res.err)
		}
	}
	if got := gw.Rejected(); got != 1 {
		t.Errorf("gateway answered %d 407s, want 1: one discovery, not one per session", got)
	}
}

func TestIntegGatewayRefusedParksEverySession(t *testing.T) {
	srv := integOrigin(t, false, nil)
	r := newGatewayRig(t, proxytest.GatewayConfig{User: "acct", Pass: "pw"}, "sessions=5", []*httptest.Server{srv})
	integMustGet(t, r.client, srv.URL)
	r.gw.Refuse()
	r.tr.CloseIdleConnections()
	res := integGet(r.client, srv.URL)
	if ae := integAttemptError(t, res.err); ae.Verdict.Class != pool.ClassProxyRefused {
		t.Fatalf("request to a refusing gateway: %v, want proxy_refused", res.err)
	}
	if res := integGet(r.client, srv.URL); !errors.Is(res.err, pool.ErrNoHealthyExit) {
		t.Errorf("next request: %v, want ErrNoHealthyExit: the gateway's sessions parked together", res.err)
	}
}

func TestIntegGatewayTTLRetiresSessionAndItsTunnel(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	bo := &proxytest.BanOrigin{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/slow" {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-req.Context().Done():
			}
		}
		bo.ServeHTTP(w, req)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	r := newGatewayRig(t, proxytest.GatewayConfig{User: "acct", Pass: "pw", SessionTTL: 10 * time.Minute}, "sessions=1 session-ttl=10m", []*httptest.Server{srv})

	before := integMustGet(t, r.client, srv.URL)
	// A slow body in flight through the session's tunnel.
	resp, err := r.client.Get(srv.URL + "/slow")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r.clk.Advance(10 * time.Minute)
	after := integMustGet(t, r.client, srv.URL)
	if after.exit == before.exit || after.body == before.body {
		t.Errorf("after the TTL: via %s from %s, want a new session and address (was %s from %s)", after.exit, after.body, before.exit, before.body)
	}
	// The retired session's tunnel is gone: the slow body ends with an error, not its bytes.
	var buf [64]byte
	done := make(chan error, 1)
	go func() {
		for {
			if _, err := resp.Body.Read(buf[:]); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if err == nil || errors.Is(err, context.Canceled) {
			t.Errorf("slow body read = %v, want the tunnel's closing", err)
		}
	case <-time.After(10 * time.Second): // a bound on a hang, not a performance limit
		t.Errorf("the retired session's tunnel still carries the slow body")
	}
	if _, rot := r.moves.snapshot(); len(rot) != 1 || rot[0].Reason != pool.RotationTTL {
		t.Errorf("rotations = %+v, want one for the TTL", rot)
	}
	if addr, _ := netip.ParseAddr(before.body); bo.Served(addr) != 2 {
		t.Errorf("old address served %d requests, want 2 (none after its TTL)", bo.Served(addr))
	}
}

func TestIntegGatewayStickySessionSeesRotation(t *testing.T) {
	bo := &proxytest.BanOrigin{}
	srv := httptest.NewServer(bo)
	t.Cleanup(srv.Close)
	r := newGatewayRig(t, proxytest.GatewayConfig{User: "acct", Pass: "pw"}, "sessions=3", []*httptest.Server{srv})
	login := transport.ContextWithSession(context.Background(), "login-1")
	get := func() integResult {
		req, _ := http.NewRequestWithContext(login, http.MethodGet, srv.URL, nil)
		resp, err := r.client.Do(req)
		if err != nil {
			return integResult{err: err}
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		res := integResult{status: resp.StatusCode, body: string(b), err: err}
		if e := transport.ExitFromResponse(resp); e != nil {
			res.exit = e.Label()
		}
		return res
	}
	first := get()
	if again := get(); again.body != first.body || again.exit != first.exit {
		t.Fatalf("sticky session moved from %s to %s before any ban", first.exit, again.exit)
	}
	bo.Ban(netip.MustParseAddr(first.body))
	if res := get(); res.status != http.StatusForbidden {
		t.Fatalf("after the ban: %d, want the 403", res.status)
	}
	next := get()
	if next.status != http.StatusOK || next.body == first.body {
		t.Fatalf("after the rotation: %d from %s, want 200 from a new address", next.status, next.body)
	}
	moved, rot := r.moves.snapshot()
	if len(rot) != 1 || rot[0].Followers != 1 || rot[0].New.Label() != next.exit {
		t.Errorf("rotations = %+v, want one followed by the login session to %s", rot, next.exit)
	}
	if want := []bool{false, false, false, true}; len(moved) != 4 || moved[3] != true || moved[1] || moved[2] {
		t.Errorf("attempts' SessionMoved = %v, want %v", moved, want)
	}
}
