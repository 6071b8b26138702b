package otelbreaker_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// connTally sums the bytes the pool counted outside any attempt (pool.TrafficObserver).
type connTally struct {
	pool.NopObserver
	mu  sync.Mutex
	sum pool.Traffic
}

func (c *connTally) ConnectionTraffic(x pool.ConnectionTraffic) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sum = c.sum.Add(x.Bytes)
}

// wireOrigin answers /size/N with N bytes, and anything else with the length of the body it read.
func wireOrigin(t *testing.T, tls, h2 bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if size, ok := strings.CutPrefix(r.URL.Path, "/size/"); ok {
			k, _ := strconv.Atoi(size)
			w.Header().Set("Content-Length", size)
			w.Write(bytes.Repeat([]byte{'x'}, k))
			return
		}
		io.WriteString(w, "read "+strconv.FormatInt(n, 10))
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

// dialWatch counts the dials in flight, from the hooks of an httptrace.ClientTrace: a dial starts
// at ConnectStart and ends when its connection is ready (ConnectDone without TLS, after the TLS
// handshake with it) or fails. CloseIdleConnections cancels dials in flight, and a dial given up
// mid-handshake leaves bytes the proxy sent that no client read: the test waits for them first.
type dialWatch struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func newDialWatch() *dialWatch {
	w := &dialWatch{}
	w.cond = sync.NewCond(&w.mu)
	return w
}

func (w *dialWatch) add(d int) {
	w.mu.Lock()
	w.n += d
	w.mu.Unlock()
	w.cond.Broadcast()
}

func (w *dialWatch) trace(secure bool) *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		ConnectStart: func(string, string) { w.add(1) },
		ConnectDone: func(_, _ string, err error) {
			if err != nil || !secure {
				w.add(-1)
			}
		},
		TLSHandshakeDone: func(tls.ConnectionState, error) { w.add(-1) },
	}
}

// wait returns once no dial is in flight.
func (w *dialWatch) wait() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.n > 0 {
		w.cond.Wait()
	}
}

// within1000 reports whether got is within 0.1 % of want.
func within1000(got, want int64) bool {
	d := got - want
	if d < 0 {
		d = -d
	}
	return want > 0 && 1000*d <= want
}

// TestBytesCounterMatchesProxySockets: the proxybreaker.bytes counter summed per exit — the
// attempts' series and the exit's pool.ConnectionOrigin series, which holds what no attempt
// claimed — is within 0.1 % of what a real forward proxy counted on its client-side sockets, and
// so is AttemptResult.Bytes summed with the pool's ConnectionTraffic; Snapshot's ExitStatus.Bytes
// equals the counter's sum. Plain HTTP, HTTPS in CONNECT tunnels with HTTP/1.1 and with HTTP/2
// (streams in flight together, so net/http dials tunnels in a race and drops all but one), and
// 10 MiB bodies each way.
func TestBytesCounterMatchesProxySockets(t *testing.T) {
	const big = 10 << 20
	cases := []struct {
		name       string
		tls, h2    bool
		proto      int
		concurrent int
		paths      []string
		post       int // a POST of this many bytes after the GETs; 0: none
	}{
		{name: "plain", proto: 1, concurrent: 2, paths: []string{"/size/100", "/size/5000", "/size/70000"}, post: 5000},
		{name: "connect-http1", tls: true, proto: 1, concurrent: 2, paths: []string{"/size/0", "/size/20000", "/size/80000"}},
		{name: "connect-h2", tls: true, h2: true, proto: 2, concurrent: 6, paths: []string{"/size/65536", "/size/100", "/size/65536"}, post: 30_000},
		{name: "10MiB/plain", proto: 1, concurrent: 1, paths: []string{"/size/" + strconv.Itoa(big)}, post: big},
		{name: "10MiB/h2", tls: true, h2: true, proto: 2, concurrent: 1, paths: []string{"/size/" + strconv.Itoa(big)}, post: big},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			origin := wireOrigin(t, tc.tls, tc.h2)
			px, err := proxytest.Start(proxytest.Config{Name: "wire", User: "u", Pass: "secret"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { px.Close() })
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { mp.Shutdown(context.Background()) })
			obs, err := otelbreaker.New(otelbreaker.WithMeterProvider(mp))
			if err != nil {
				t.Fatal(err)
			}
			exit, err := pool.NewExit(px.URL())
			if err != nil {
				t.Fatal(err)
			}
			conns := &connTally{}
			p, err := pool.New(pool.WithExits(exit.WithLabel("wire").WithCost(pool.Cost{PerGB: 5})), pool.WithObserver(conns))
			if err != nil {
				t.Fatal(err)
			}
			attempts := &trafficTally{}
			tr, err := transport.New(p, transport.WithObserver(obs), transport.WithObserver(attempts), transport.WithBaseTemplate(testkit.TLSTemplate(origin)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tr.Close() })
			c := &http.Client{Transport: tr}
			dials := newDialWatch()
			ctx := httptrace.WithClientTrace(context.Background(), dials.trace(tc.tls))
			do := func(method, path string, body []byte) {
				req, _ := http.NewRequestWithContext(ctx, method, origin.URL+path, bytes.NewReader(body))
				resp, err := c.Do(req)
				if err != nil {
					t.Errorf("%s %s: %v", method, path, err)
					return
				}
				defer resp.Body.Close()
				if _, err := io.Copy(io.Discard, resp.Body); err != nil || resp.StatusCode != http.StatusOK || resp.ProtoMajor != tc.proto {
					t.Errorf("%s %s = %d HTTP/%d, %v; want 200 HTTP/%d", method, path, resp.StatusCode, resp.ProtoMajor, err, tc.proto)
				}
			}
			var wg sync.WaitGroup
			for range tc.concurrent {
				wg.Go(func() {
					for _, path := range tc.paths {
						do(http.MethodGet, path, nil)
					}
					if tc.post > 0 {
						do(http.MethodPost, "/echo", bytes.Repeat([]byte{'y'}, tc.post))
					}
				})
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			dials.wait()
			tr.CloseIdleConnections()
			if err := px.AwaitClientsGone(t.Context()); err != nil {
				t.Fatal(err)
			}

			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			var counter, connSeries pool.Traffic
			for k, v := range series(t, rm) {
				if !strings.HasPrefix(k, otelbreaker.MetricBytes+"{") || !strings.Contains(k, "proxybreaker.exit.label=wire") {
					continue
				}
				n := int64(v)
				var add pool.Traffic
				if strings.Contains(k, "direction=transmit") {
					add.Sent = n
				} else {
					add.Received = n
				}
				counter = counter.Add(add)
				if strings.Contains(k, "proxybreaker.origin="+pool.ConnectionOrigin) {
					connSeries = connSeries.Add(add)
				}
			}
			attempts.mu.Lock()
			claimed := attempts.sum
			attempts.mu.Unlock()
			conns.mu.Lock()
			outside := conns.sum
			conns.mu.Unlock()
			fromClients, toClients := px.BytesFromClients(), px.BytesToClients()
			var snap pool.Traffic
			for _, e := range tr.Pool().Snapshot().Exits {
				if e.Exit == "wire" {
					snap = e.Bytes
				}
			}
			t.Logf("proxy sockets %d sent / %d received; counter %+v (of which %s %+v); attempts %+v; snapshot %+v",
				fromClients, toClients, counter, pool.ConnectionOrigin, connSeries, claimed, snap)
			for _, x := range []struct {
				what string
				got  pool.Traffic
			}{{"proxybreaker.bytes summed for the exit", counter}, {"AttemptResult.Bytes plus ConnectionTraffic", claimed.Add(outside)}} {
				if !within1000(x.got.Sent, fromClients) || !within1000(x.got.Received, toClients) {
					t.Errorf("%s = %+v, want within 0.1 %% of the proxy's sockets (%d sent, %d received)", x.what, x.got, fromClients, toClients)
				}
			}
			if counter != snap || connSeries != outside {
				t.Errorf("counter %+v (%s %+v), want Snapshot's %+v exactly (ConnectionTraffic %+v)", counter, pool.ConnectionOrigin, connSeries, snap, outside)
			}
		})
	}
}
