package transport_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// The transport's benchmarks. Run them with
//
//	go test -run '^$' -bench . -benchmem -count 6 ./transport
//
// BenchmarkPick at 100,000 exits × 1,000 origins holds ~10 M breakers (several GB) and creates a
// pair breaker per op (see benchPickEnv): give that cell a fixed iteration count, for example
// -bench 'Pick/exits=100000/origins=1000/' -benchtime 200000x.

// ---------------------------------------------------------------------------------------------
// BenchmarkMiddleware

// benchPayload is the canned response's body: small, and served as JSON so that the default
// classifier has no reason to peek at it (an HTML page under 32 KiB would be peeked at).
var benchPayload = []byte(`{"ok":true}` + "\n")

// newBenchCanned is the base of BenchmarkMiddleware: it answers every request 200 with
// benchPayload, without a network and without allocating (see testkit.Canned).
func newBenchCanned() *testkit.Canned {
	return testkit.NewCanned(testkit.CannedReply{Body: benchPayload, Header: http.Header{
		"Content-Type":   {"application/json"},
		"Content-Length": {fmt.Sprint(len(benchPayload))},
	}})
}

// benchRoundTrip sends req through rt, reads the body to its end into buf and closes it, as a
// well-behaved caller does. buf is the caller's, allocated once per goroutine: a buffer declared
// here would escape (it is passed to an interface method) and cost an allocation per request.
func benchRoundTrip(rt http.RoundTripper, req *http.Request, buf []byte) error {
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return err
	}
	for {
		if _, err = resp.Body.Read(buf); err != nil {
			break
		}
	}
	status := resp.StatusCode // before Close: a canned response is recycled when its body closes
	resp.Body.Close()
	if err != io.EOF {
		return err
	}
	if status != http.StatusOK {
		return fmt.Errorf("status %d", status)
	}
	return nil
}

// benchRun runs benchRoundTrip in a loop, serially or with b.RunParallel. Each goroutine builds its
// own request once; RoundTrip never modifies it, so it is reused for every op.
func benchRun(b *testing.B, rt http.RoundTripper, url string, parallel bool) {
	b.Helper()
	b.ReportAllocs()
	if !parallel {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 512)
		b.ResetTimer()
		for b.Loop() {
			if err := benchRoundTrip(rt, req, buf); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	var failed atomic.Pointer[error]
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			failed.CompareAndSwap(nil, &err)
			return
		}
		buf := make([]byte, 512)
		for pb.Next() {
			if err := benchRoundTrip(rt, req, buf); err != nil {
				e := err // a copy, so that only this branch moves an error to the heap
				failed.CompareAndSwap(nil, &e)
			}
		}
	})
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
}

// BenchmarkMiddleware measures the transport's own cost per request: "bare" calls the canned base
// directly; "ours" is a Transport over the same base (WithBase), with 16 exits and every other
// option at its default (header timeout on, default classifier, no observers), on one origin.
// Both read the body to EOF and close it. Target: ours − bare < 1.5 µs and one allocation, the
// attempt (it is also the request's context and holds the request copy; its timer is a watchdog
// reused across attempts: see attempt.go, attemptctx.go, watchdog.go).
func BenchmarkMiddleware(b *testing.B) {
	base := newBenchCanned()
	p, err := pool.New(pool.WithExits(testkit.Exits("x", 16)...))
	if err != nil {
		b.Fatal(err)
	}
	ours, err := transport.New(p, transport.WithBase(base))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ours.Close() })
	const url = "http://origin.bench.example/item"
	for _, mode := range []string{"serial", "parallel"} {
		parallel := mode == "parallel"
		b.Run("mode="+mode+"/impl=bare", func(b *testing.B) { benchRun(b, base, url, parallel) })
		b.Run("mode="+mode+"/impl=ours", func(b *testing.B) { benchRun(b, ours, url, parallel) })
	}
}

// ---------------------------------------------------------------------------------------------
// BenchmarkLoopback

// BenchmarkLoopback is a real round trip through one in-process proxytest proxy to a loopback
// httptest origin: "bare" is an http.Transport with Proxy: http.ProxyURL(proxy); "ours" is
// transport.New(pool.New(pool.WithExits(that proxy))) with its default per-exit base. Both hit the same proxy and origin in
// the same run, keep connections to the proxy alive, and read and close every body. The proxy
// opens a fresh upstream connection per request (see proxytest), for both alike. Target (issue
// 16): ours allocates at most 4 objects per request more than bare — the attempt, its Done
// channel, and the two package context makes to register net/http's context below it.
func BenchmarkLoopback(b *testing.B) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	}))
	b.Cleanup(origin.Close)
	px, err := proxytest.Start(proxytest.Config{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { px.Close() })

	bare := &http.Transport{Proxy: http.ProxyURL(px.URL())}
	b.Cleanup(bare.CloseIdleConnections)
	exit, err := pool.NewExit(px.URL())
	if err != nil {
		b.Fatal(err)
	}
	p, err := pool.New(pool.WithExits(exit))
	if err != nil {
		b.Fatal(err)
	}
	ours, err := transport.New(p)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ours.Close() })

	url := origin.URL + "/"
	// One request each before timing, so that neither pays for its first connection in the run.
	for _, rt := range []http.RoundTripper{bare, ours} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if err := benchRoundTrip(rt, req, make([]byte, 512)); err != nil {
			b.Fatal(errors.Join(errors.New("warm-up"), err))
		}
	}
	for _, mode := range []string{"serial", "parallel"} {
		parallel := mode == "parallel"
		b.Run("mode="+mode+"/impl=bare", func(b *testing.B) { benchRun(b, bare, url, parallel) })
		b.Run("mode="+mode+"/impl=ours", func(b *testing.B) { benchRun(b, ours, url, parallel) })
	}
}
