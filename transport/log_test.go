package transport_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// lockedBuffer is a bytes.Buffer safe for the concurrent writes of a slog handler.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestWithLoggerLevels: a pair opened by a 429 logs at Info, an exit parked by a 407 at Warn, the
// failed attempts at Debug; exits appear by label and no password is written.
func TestWithLoggerLevels(t *testing.T) {
	const secret = "hunter2-log"
	clk := clock.NewFake(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	p, err := pool.New(
		pool.WithExits(
			pool.MustParseExit("http://u:"+secret+"@10.0.0.1:3128").WithLabel("limited"),
			pool.MustParseExit("http://u:"+secret+"@10.0.0.2:3128"),
		),
		pool.WithClock(clk), pool.WithSeed(1),
		pool.WithPairSettings(breaker.Settings{Jitter: -1}),
	)
	if err != nil {
		t.Fatal(err)
	}
	buf := &lockedBuffer{}
	logger := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	base := roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		e, _ := transport.ExitFromContext(req.Context())
		status := http.StatusTooManyRequests
		if e.Label() != "limited" {
			status = http.StatusProxyAuthRequired
		}
		return &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {"30"}},
			Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
	})
	tr, err := transport.New(p, transport.WithBase(base), transport.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}
	for range 2 {
		if resp, err := client.Get("http://shop.example/"); err == nil {
			resp.Body.Close()
		}
	}
	if resp, err := client.Get("http://shop.example/"); err == nil {
		resp.Body.Close()
	}
	levels := map[string]string{} // message + scope → level
	for _, r := range buf.records(t) {
		levels[r["msg"].(string)+"/"+asString(r["scope"])] = r["level"].(string)
	}
	for key, want := range map[string]string{
		"proxybreaker: breaker open/pair":   "INFO",
		"proxybreaker: breaker open/exit":   "WARN",
		"proxybreaker: attempt failed/pair": "DEBUG",
		"proxybreaker: attempt failed/exit": "DEBUG",
		"proxybreaker: request refused/":    "DEBUG",
	} {
		if got := levels[key]; got != want {
			t.Errorf("level of %q = %q, want %q (all: %v)", key, got, want, levels)
		}
	}
	if out := buf.b.String(); strings.Contains(out, secret) {
		t.Errorf("the log holds a password:\n%s", out)
	}
	if err := func() error { _, err := transport.New(p, transport.WithLogger(nil)); return err }(); err == nil {
		t.Errorf("WithLogger(nil): New = nil error, want one")
	}
}

func asString(v any) string {
	s, _ := v.(string)
	return s
}
