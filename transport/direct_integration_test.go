package transport_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// directBanned is the client IP the blocking origin challenges: the direct exit's, since a
// connection from 127.0.0.1 to 127.0.0.1 leaves from 127.0.0.1.
const directBanned = "127.0.0.1"

// directSeen records the client IPs an origin served, in order, and counts the bytes its sockets
// carried (a listener that wraps each connection).
type directSeen struct {
	mu            sync.Mutex
	from          []string
	read, written atomic.Int64
}

func (s *directSeen) add(ip string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.from = append(s.from, ip)
}

func (s *directSeen) count() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := map[string]int{}
	for _, ip := range s.from {
		n[ip]++
	}
	return n
}

// directCountedListener wraps each accepted connection so that seen counts its bytes.
type directCountedListener struct {
	net.Listener
	seen *directSeen
}

func (l directCountedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &directCountedConn{Conn: c, seen: l.seen}, nil
}

type directCountedConn struct {
	net.Conn
	seen *directSeen
}

func (c *directCountedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.seen.read.Add(int64(n))
	return n, err
}

func (c *directCountedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.seen.written.Add(int64(n))
	return n, err
}

// directOrigin starts an origin that records the client IP of every request (and, for plain HTTP,
// counts its sockets' bytes); while block reports true it answers requests from directBanned with
// a Cloudflare challenge page.
func directOrigin(t *testing.T, tls bool, block func() bool) (*httptest.Server, *directSeen) {
	t.Helper()
	seen := &directSeen{}
	var challenge challengeFx
	if block != nil {
		challenge = challengeFixture(t, "cloudflare/managed-challenge-403")
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		from, _, _ := net.SplitHostPort(r.RemoteAddr)
		seen.add(from)
		w.Header().Set(integFromHeader, from)
		if block != nil && block() && from == directBanned {
			challenge.serve(w)
			return
		}
		fmt.Fprintf(w, "page for %s", from)
	}))
	if tls {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Listener = directCountedListener{srv.Listener, seen}
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, seen
}

// TestIntegDirectTierEscalatesPerOrigin: a crawl starts direct — a direct exit in tier 0, two
// forward proxies leaving from 127.0.0.2 and 127.0.0.3 in tier 1. A site that challenges the
// direct exit's IP is moved to the proxies once the (direct, site) pair trips, while another site
// keeps being served direct, as both origins saw by the client addresses of their requests; the
// direct exit's bytes match what the open origin's sockets carried; and when the site lifts the
// block, the probe after the cooldown goes direct and the site is served direct again.
func TestIntegDirectTierEscalatesPerOrigin(t *testing.T) {
	t.Parallel()
	var blocking atomic.Bool
	blocking.Store(true)
	shop, shopSeen := directOrigin(t, true, blocking.Load)
	news, newsSeen := directOrigin(t, false, nil)
	exits := []*pool.Exit{pool.DirectExit().WithLabel("home")}
	for i, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		px, err := proxytest.Start(proxytest.Config{SourceAddr: ip})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { px.Close() })
		exits = append(exits, integExit(t, px.URL(), fmt.Sprintf("dc-%d", i+1)).WithTier(1))
	}
	fc := newIntegClock()
	obs := &integObserver{}
	tr, c := integNew(t, []*httptest.Server{shop}, pool.WithExits(exits...), pool.WithClock(fc),
		pool.WithPairSettings(breaker.Settings{Rand: integHalf}), transport.WithObserver(obs))
	get := func(step string, srv *httptest.Server, wantStatus int, wantDirect bool) integResult {
		t.Helper()
		r := integGet(c, srv.URL)
		direct := r.exit == "home" && r.from == directBanned
		proxied := (r.exit == "dc-1" && r.from == "127.0.0.2") || (r.exit == "dc-2" && r.from == "127.0.0.3")
		if r.err != nil || r.status != wantStatus || (wantDirect && !direct) || (!wantDirect && !proxied) {
			t.Fatalf("%s: Get(%s) = %d via %q, origin saw %q, err %v; want %d %s", step, srv.URL, r.status, r.exit, r.from, r.err,
				wantStatus, map[bool]string{true: "direct from 127.0.0.1", false: "through a proxy from its own IP"}[wantDirect])
		}
		return r
	}

	for i := range 3 {
		get(fmt.Sprintf("start %d, news", i), news, http.StatusOK, true)
	}
	// The shop challenges the direct exit. The challenge reaches the caller (the transport does not
	// retry), judged a block, which trips the pair at once (a decisive failure).
	get("blocked, shop", shop, http.StatusForbidden, true)
	if last := obs.last(t); last.Verdict.Class != pool.ClassBlocked || last.PairStateAfter != breaker.Open {
		t.Fatalf("blocked: verdict %+v, pair after %v; want %s, open", last.Verdict, last.PairStateAfter, pool.ClassBlocked)
	}
	trippedAt := fc.Now()
	for i := range 8 {
		get(fmt.Sprintf("escalated %d, shop", i), shop, http.StatusOK, false)
		get(fmt.Sprintf("escalated %d, news", i), news, http.StatusOK, true)
	}
	s := tr.Pool().Snapshot()
	if ps, ok := integPairState(s, "home", integOriginKey(shop)); !ok || ps.State != breaker.Open {
		t.Errorf("(home, shop) = %+v, %t; want open", ps, ok)
	}
	if es := integExitStatus(t, s, "home"); es.Breaker.State != breaker.Closed {
		t.Errorf("exit home = %v, want closed: the block is the shop's alone", es.Breaker.State)
	}
	if got := shopSeen.count(); got[directBanned] != 1 || got["127.0.0.2"]+got["127.0.0.3"] != 8 {
		t.Errorf("the shop saw clients %v, want 1 from %s and 8 from the proxies", got, directBanned)
	}
	if got := newsSeen.count(); len(got) != 1 || got[directBanned] != 11 {
		t.Errorf("the news site saw clients %v, want all 11 requests from %s", got, directBanned)
	}

	// The site lifts the block. The proxies serve it until the pair's probe time; the probe goes
	// direct and closes the pair, and once its slow start is over the shop is served direct.
	blocking.Store(false)
	fc.Set(trippedAt.Add(integJittered(breaker.DefaultBaseCooldown) - time.Millisecond))
	get("lifted, before the probe", shop, http.StatusOK, false)
	fc.Set(trippedAt.Add(integJittered(breaker.DefaultBaseCooldown)))
	get("probe", shop, http.StatusOK, true)
	if last := obs.last(t); !last.Probe || last.PairStateAfter != breaker.Closed {
		t.Errorf("probe attempt = {Probe %t, pair after %v}, want {true, closed}", last.Probe, last.PairStateAfter)
	}
	for range 16 { // the direct tier's slow start (30 s): the proxies share the shop meanwhile
		fc.Advance(2 * time.Second)
		integGet(c, shop.URL)
	}
	for i := range 3 {
		get(fmt.Sprintf("recovered %d, shop", i), shop, http.StatusOK, true)
	}

	// The direct exit's bytes for the news site are what the site's sockets carried.
	tr.CloseIdleConnections()
	news.Close()
	var newsBytes pool.Traffic
	for _, o := range tr.Pool().Snapshot().Traffic {
		if o.Origin == integOriginKey(news) {
			newsBytes = o.Bytes
		}
	}
	trafficNear(t, "news site's Bytes.Sent", newsBytes.Sent, newsSeen.read.Load())
	trafficNear(t, "news site's Bytes.Received", newsBytes.Received, newsSeen.written.Load())
}
