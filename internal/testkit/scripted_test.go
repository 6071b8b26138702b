package testkit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

var kitT0 = time.Date(2026, 4, 1, 9, 0, 0, 0, time.UTC)

// scriptedTransport is a Transport over s with exits x0, x1 on clk, without a header timeout.
func scriptedTransport(t *testing.T, s *testkit.Scripted, clk *clock.Fake) *transport.Transport {
	t.Helper()
	p, err := pool.New(pool.WithExits(testkit.Exits("x", 2)...), pool.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.New(p, transport.WithBase(s), transport.WithHeaderTimeout(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// through sends GET rawURL pinned to exit and reads the whole body.
func through(tr http.RoundTripper, ctx context.Context, exit, rawURL string) (status int, header http.Header, body string, err error) {
	req, err := http.NewRequestWithContext(transport.ContextWithExit(ctx, exit), http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, nil, "", err
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// Scripted replays its rules, most specific first, and records every call.
func TestScriptedReplaysScript(t *testing.T) {
	clk := clock.NewFake(kitT0)
	s := &testkit.Scripted{Clock: clk}
	s.On("x0", "a.test", testkit.Reply{Status: 429, Header: testkit.RetryAfter(30), Body: "slow down", Took: 2 * time.Second})
	s.On("*", "a.test", testkit.Reply{Status: 503})
	s.On("x1", "b.test", testkit.Reply{Err: testkit.ErrReset})
	s.On("x0", "c.test", testkit.Reply{Body: "part", BodyErr: io.ErrUnexpectedEOF})
	tr := scriptedTransport(t, s, clk)

	steps := []struct {
		exit, url string
		status    int
		retry     string
		body      string
		err       error
	}{
		{"x0", "http://a.test/", 429, "30", "slow down", nil},
		{"x1", "http://a.test/", 503, "", "", nil},
		{"x1", "http://b.test/", 0, "", "", syscall.ECONNRESET},
		{"x0", "http://b.test/", 200, "", "ok", nil}, // no rule: 200 "ok"
		{"x0", "http://c.test/", 200, "", "part", io.ErrUnexpectedEOF},
	}
	for i, st := range steps {
		status, h, body, err := through(tr, context.Background(), st.exit, st.url)
		if status != st.status || h.Get("Retry-After") != st.retry || body != st.body || !errors.Is(err, st.err) || (err == nil) != (st.err == nil) {
			t.Errorf("step %d: GET %s via %s = %d, Retry-After %q, body %q, err %v; want %d, %q, %q, %v",
				i, st.url, st.exit, status, h.Get("Retry-After"), body, err, st.status, st.retry, st.body, st.err)
		}
	}
	if got, want := clk.Now(), kitT0.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("clock = %v, want %v (advanced by the one Took)", got, want)
	}
	calls := s.Calls()
	if len(calls) != len(steps) {
		t.Fatalf("Calls() = %d calls, want %d", len(calls), len(steps))
	}
	for i, c := range calls {
		if want := steps[i].exit; c.Exit != want || "http://"+c.Origin+"/" != steps[i].url || c.Req == nil {
			t.Errorf("Calls()[%d] = %s→%s, want %s→%s", i, c.Exit, c.Origin, want, steps[i].url)
		}
	}
	if n := s.Count("x0", "*"); n != 3 {
		t.Errorf(`Count("x0", "*") = %d, want 3`, n)
	}
	if n := s.Count("*", "a.test"); n != 2 {
		t.Errorf(`Count("*", "a.test") = %d, want 2`, n)
	}

	s.Reset()
	if status, _, body, err := through(tr, context.Background(), "x1", "http://b.test/"); err != nil || status != 200 || body != "ok" {
		t.Errorf("after Reset: GET b.test via x1 = %d %q, %v; want 200 \"ok\"", status, body, err)
	}
}

// A script comes before the rules; Hang holds the request until its context ends, Hold until the
// channel closes.
func TestScriptedScriptHangAndHold(t *testing.T) {
	clk := clock.NewFake(kitT0)
	s := &testkit.Scripted{}
	arrived := make(chan string, 2)
	hold := make(chan struct{})
	s.On("*", "*", testkit.Reply{Status: 500})
	s.SetScript(func(c testkit.Call) (testkit.Reply, bool) {
		switch c.Req.URL.Path {
		case "/hang":
			arrived <- c.Req.URL.Path
			return testkit.Reply{Hang: true}, true
		case "/hold":
			arrived <- c.Req.URL.Path
			return testkit.Reply{Hold: hold, Body: "held"}, true
		}
		return testkit.Reply{}, false
	})
	tr := scriptedTransport(t, s, clk)

	ctx, cancel := context.WithCancel(context.Background())
	hangErr := make(chan error, 1)
	go func() {
		_, _, _, err := through(tr, ctx, "x0", "http://a.test/hang")
		hangErr <- err
	}()
	<-arrived
	cancel()
	if err := <-hangErr; !errors.Is(err, context.Canceled) {
		t.Errorf("hung request after cancel: err = %v, want context.Canceled", err)
	}

	type result struct {
		body string
		err  error
	}
	held := make(chan result, 1)
	go func() {
		_, _, body, err := through(tr, context.Background(), "x0", "http://a.test/hold")
		held <- result{body, err}
	}()
	<-arrived
	close(hold)
	if r := <-held; r.err != nil || r.body != "held" {
		t.Errorf("held request = %q, %v; want \"held\"", r.body, r.err)
	}

	if status, _, _, err := through(tr, context.Background(), "x1", "http://a.test/other"); err != nil || status != 500 {
		t.Errorf("unscripted path = %d, %v; want the rule's 500", status, err)
	}
}

// A request that carries no exit would go direct: Scripted refuses it, and counts idle closes.
func TestScriptedRefusesDirectRequests(t *testing.T) {
	s := &testkit.Scripted{}
	body := testkit.NewTrackedBody("payload")
	req, err := http.NewRequest(http.MethodPost, "http://a.test/", body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.RoundTrip(req)
	if resp != nil || err == nil {
		t.Errorf("RoundTrip without an exit = %v, %v; want only an error", resp, err)
	}
	if n := body.Closes(); n != 1 {
		t.Errorf("request body closed %d times, want 1", n)
	}
	if n := s.Count("*", "*"); n != 0 {
		t.Errorf("Count = %d, want 0: a refused request is no call", n)
	}
	s.CloseIdleConnections()
	if n := s.IdleCloses(); n != 1 {
		t.Errorf("IdleCloses() = %d, want 1", n)
	}
}

func TestRefusedErr(t *testing.T) {
	if err := testkit.RefusedErr(t); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("RefusedErr = %v, want ECONNREFUSED", err)
	}
}

func TestDriveClock(t *testing.T) {
	clk := clock.NewFake(kitT0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tm := clk.NewTimer(5 * time.Second)
		<-tm.C()
	}()
	testkit.DriveClock(t, clk, time.Second, done)
	if got := clk.Now().Sub(kitT0); got < 5*time.Second {
		t.Errorf("DriveClock moved the clock %v, want at least the 5s the goroutine waited", got)
	}
}
