package transport_test

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// trafficOrigin answers /size/N with N bytes and anything else with the length of the request
// body it read. With tls it speaks TLS, and HTTP/2 too with h2.
func trafficOrigin(t *testing.T, tls, h2 bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if size, ok := strings.CutPrefix(r.URL.Path, "/size/"); ok {
			k, _ := strconv.Atoi(size)
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("Content-Length", size) // not chunked: a response is its body plus a header
			w.Write(bytes.Repeat([]byte{'x'}, k))
			return
		}
		fmt.Fprintf(w, "read %d", n)
	}))
	srv.EnableHTTP2 = h2
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// trafficGet sends method to u with body through c, reads the whole response and checks its
// protocol.
func trafficDo(t *testing.T, c *http.Client, method, u string, body []byte, proto int) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Error(err)
		return
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, u, err)
		return
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK || resp.ProtoMajor != proto {
		t.Errorf("%s %s = %d HTTP/%d, %v; want 200 HTTP/%d", method, u, resp.StatusCode, resp.ProtoMajor, err, proto)
	}
}

// trafficNear fails the test unless got is within 1 % of want.
func trafficNear(t *testing.T, what string, got, want int64) {
	t.Helper()
	d := got - want
	if d < 0 {
		d = -d
	}
	if want <= 0 || 100*d > want {
		t.Errorf("%s = %d, want %d within 1 %% (the proxy's count)", what, got, want)
	}
}

// trafficThrough starts a proxytest proxy with cfg, and a transport whose one exit, labelled
// cfg.Name, is that proxy, trusting servers and observed; all closed when the test ends.
func trafficThrough(t *testing.T, cfg proxytest.Config, servers ...*httptest.Server) (*proxytest.Proxy, *transport.Transport, *http.Client, *integObserver) {
	t.Helper()
	px, err := proxytest.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { px.Close() })
	obs := &integObserver{}
	tr, c := integNew(t, servers, pool.WithExits(integExit(t, px.URL(), cfg.Name)), transport.WithObserver(obs))
	return px, tr, c, obs
}

// TestTrafficMatchesProxySockets: the bytes the transport counts per exit (Snapshot), per origin
// (Snapshot.Traffic) and per attempt (AttemptResult.Bytes, summed) are within 1 % of what a real
// forward proxy counted on its client-side sockets (the transport's own totals are read after its
// connections closed, so they hold what the connections carried beyond their attempts): plain HTTP through an HTTP proxy, HTTPS in
// CONNECT tunnels (HTTP/1.1, and HTTP/2 with streams in flight together), a SOCKS5 tunnel, and
// a 10 MiB body each way.
func TestTrafficMatchesProxySockets(t *testing.T) {
	const big = 10 << 20
	cases := []struct {
		name       string
		socks      bool
		tls, h2    bool
		proto      int
		concurrent int // goroutines sending at once (HTTP/2 multiplexes them)
		send       func(t *testing.T, c *http.Client, base string, proto int)
	}{
		{name: "plain", proto: 1, concurrent: 1, send: func(t *testing.T, c *http.Client, base string, proto int) {
			for i := range 10 {
				trafficDo(t, c, http.MethodGet, base+"/size/"+strconv.Itoa(100*i), nil, proto)
			}
			trafficDo(t, c, http.MethodPost, base+"/echo", bytes.Repeat([]byte{'y'}, 5000), proto)
		}},
		{name: "connect", tls: true, proto: 1, concurrent: 2, send: func(t *testing.T, c *http.Client, base string, proto int) {
			for i := range 5 {
				trafficDo(t, c, http.MethodGet, base+"/size/"+strconv.Itoa(20_000*i), nil, proto)
			}
		}},
		{name: "h2", tls: true, h2: true, proto: 2, concurrent: 6, send: func(t *testing.T, c *http.Client, base string, proto int) {
			for range 4 {
				trafficDo(t, c, http.MethodGet, base+"/size/65536", nil, proto)
			}
			trafficDo(t, c, http.MethodPost, base+"/echo", bytes.Repeat([]byte{'y'}, 30_000), proto)
		}},
		{name: "socks5", socks: true, tls: true, proto: 1, concurrent: 1, send: func(t *testing.T, c *http.Client, base string, proto int) {
			trafficDo(t, c, http.MethodGet, base+"/size/30000", nil, proto)
		}},
		{name: "10MiB/plain", proto: 1, concurrent: 1, send: func(t *testing.T, c *http.Client, base string, proto int) {
			trafficDo(t, c, http.MethodGet, base+"/size/"+strconv.Itoa(big), nil, proto)
			trafficDo(t, c, http.MethodPut, base+"/echo", bytes.Repeat([]byte{'y'}, big), proto)
		}},
		{name: "10MiB/h2", tls: true, h2: true, proto: 2, concurrent: 1, send: func(t *testing.T, c *http.Client, base string, proto int) {
			trafficDo(t, c, http.MethodGet, base+"/size/"+strconv.Itoa(big), nil, proto)
			trafficDo(t, c, http.MethodPut, base+"/echo", bytes.Repeat([]byte{'y'}, big), proto)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			origin := trafficOrigin(t, tc.tls, tc.h2)
			px, tr, c, obs := trafficThrough(t, proxytest.Config{Name: "counting", SOCKS5: tc.socks, User: "u", Pass: "secret"}, origin)
			var wg sync.WaitGroup
			for range tc.concurrent {
				wg.Go(func() {
					tc.send(t, c, origin.URL, tc.proto)
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			tr.CloseIdleConnections()
			// Once the proxy has seen every connection hang up, both sides' counts are final.
			if err := px.AwaitClientsGone(t.Context()); err != nil {
				t.Fatal(err)
			}

			fromClients, toClients := px.BytesFromClients(), px.BytesToClients()
			s := tr.Pool().Snapshot()
			exit := integExitStatus(t, s, "counting").Bytes
			trafficNear(t, "exit's Bytes.Sent", exit.Sent, fromClients)
			trafficNear(t, "exit's Bytes.Received", exit.Received, toClients)
			if len(s.Traffic) != 1 || s.Traffic[0].Origin != integOriginKey(origin) || s.Traffic[0].Bytes != exit {
				t.Errorf("Snapshot.Traffic = %+v, want the exit's %+v for %s alone", s.Traffic, exit, integOriginKey(origin))
			}
			var sum pool.Traffic
			obs.mu.Lock()
			for _, r := range obs.finished {
				sum = sum.Add(r.Bytes)
			}
			obs.mu.Unlock()
			t.Logf("proxy: %d from clients, %d to them; exit %+v; attempts %+v", fromClients, toClients, exit, sum)
			// What the attempts claimed, less what connections carried beyond them (a TLS close,
			// an HTTP/2 connection dialled in a race and dropped).
			if sum.Sent > exit.Sent || sum.Received > exit.Received || sum.Received < exit.Received/2 {
				t.Errorf("sum of AttemptResult.Bytes = %+v, want at most the exit's %+v, and most of it", sum, exit)
			}
		})
	}
}

// TestTrafficPerAttemptAndOrigin: two origins share one keep-alive connection to an HTTP proxy;
// each attempt's AttemptResult.Bytes holds its own request and response, and each origin's total
// holds its own attempts.
func TestTrafficPerAttemptAndOrigin(t *testing.T) {
	small, large := trafficOrigin(t, false, false), trafficOrigin(t, false, false)
	px, tr, c, obs := trafficThrough(t, proxytest.Config{Name: "shared"})
	sizes := []int{100, 200_000, 300, 400_000}
	for i, n := range sizes {
		base := small.URL
		if n > 1000 {
			base = large.URL
		}
		trafficDo(t, c, http.MethodGet, base+"/size/"+strconv.Itoa(n), nil, 1)
		r := obs.last(t)
		// The response is its body plus a header of some 100 bytes; the request a GET's header.
		if got := r.Bytes.Received; got < int64(n) || got > int64(n)+400 {
			t.Errorf("request %d: AttemptResult.Bytes.Received = %d, want %d plus a header", i, got, n)
		}
		if got := r.Bytes.Sent; got < 50 || got > 400 {
			t.Errorf("request %d: AttemptResult.Bytes.Sent = %d, want a GET's header", i, got)
		}
	}
	if got := px.Requests(); got != int64(len(sizes)) {
		t.Fatalf("proxy forwarded %d requests, want %d", got, len(sizes))
	}
	s := tr.Pool().Snapshot()
	byOrigin := map[string]pool.Traffic{}
	for _, o := range s.Traffic {
		byOrigin[o.Origin] = o.Bytes
	}
	if got := byOrigin[integOriginKey(large)].Received; got < 600_000 || got > 601_000 {
		t.Errorf("large origin's Received = %d, want 600,000 plus two headers", got)
	}
	if got := byOrigin[integOriginKey(small)].Received; got < 400 || got > 1_200 {
		t.Errorf("small origin's Received = %d, want 400 plus two headers", got)
	}
}

// TestTrafficAddsNoAllocations: counting bytes costs a request no allocation. The same requests
// through the same proxy, counted (the exit's own transport) and not (WithBase, the same
// http.Transport settings), allocate alike: the attempts' trace hooks are kept across attempts.
func TestTrafficAddsNoAllocations(t *testing.T) {
	origin := trafficOrigin(t, false, false)
	px, err := proxytest.Start(proxytest.Config{Name: "allocs"})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	allocs := func(opts ...transport.Option) float64 {
		p, err := pool.New(pool.WithExits(integExit(t, px.URL(), "allocs")))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := transport.New(p, opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		req, _ := http.NewRequest(http.MethodGet, origin.URL+"/size/10", nil)
		buf := make([]byte, 512)
		if err := benchRoundTrip(tr, req, buf); err != nil { // the connection, before counting
			t.Fatal(err)
		}
		// The fewest of five rounds: AllocsPerRun counts the whole process's allocations, and the
		// background's (a connection's reader, the race detector, another test) only add.
		fewest := math.Inf(1)
		for range 5 {
			fewest = min(fewest, testing.AllocsPerRun(100, func() {
				if err := benchRoundTrip(tr, req, buf); err != nil {
					t.Fatal(err)
				}
			}))
		}
		return fewest
	}
	base := transport.DefaultBaseTemplate()
	base.Proxy = http.ProxyURL(px.URL())
	defer base.CloseIdleConnections()
	counted, uncounted := allocs(), allocs(transport.WithBase(base))
	// Half an allocation per request of slack absorbs a stray goroutine's, and still catches a
	// trace (one) or a context (one) per request. Under the race detector the counted path shows
	// one more now and then (178 against 178 or 179 in runs of the same build; without it, 166
	// against 166 every time): there the slack is one and a half, which still catches two.
	slack := 0.5
	if raceDetector {
		slack = 1.5
	}
	if counted >= uncounted+slack {
		t.Errorf("allocations per request: %v counting bytes, %v not; want no more", counted, uncounted)
	}
	t.Logf("allocations per request: %v counting bytes, %v not", counted, uncounted)
}

// TestTrafficKeepsCallersTrace: a caller's own httptrace hooks still run beside the transport's,
// and the attempt's bytes are counted all the same.
func TestTrafficKeepsCallersTrace(t *testing.T) {
	origin := trafficOrigin(t, false, false)
	_, _, c, obs := trafficThrough(t, proxytest.Config{Name: "traced"})
	var gotConn, firstByte atomic.Int32
	ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{
		GotConn:              func(httptrace.GotConnInfo) { gotConn.Add(1) },
		GotFirstResponseByte: func() { firstByte.Add(1) },
	})
	for i := range 2 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, origin.URL+"/size/1000", nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := obs.last(t).Bytes.Received; got < 1000 {
			t.Errorf("request %d: AttemptResult.Bytes.Received = %d, want at least the body's 1000", i, got)
		}
	}
	if gotConn.Load() != 2 || firstByte.Load() != 2 {
		t.Errorf("caller's GotConn ran %d times, GotFirstResponseByte %d; want 2 each", gotConn.Load(), firstByte.Load())
	}
}
