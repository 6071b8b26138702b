package transport_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// headerLimitCookies is how many 4 KiB Set-Cookie headers the "/cookies" page sends: 192 KiB in
// all, far more than real sites send, and still under the limit.
const headerLimitCookies = 48

// headerLimitOver is how far over DefaultMaxResponseHeaderBytes the "/huge" page's one header goes:
// beyond the allowance net/http adds for HTTP/2 (32 bytes for each of ten typical fields).
const headerLimitOver = 4 << 10

// headerLimitOrigin starts an origin (HTTP/1 in the clear, or HTTP/2 over TLS) whose "/huge" page
// sends one header headerLimitOver bytes over DefaultMaxResponseHeaderBytes, whose "/many" page
// sends 4 KiB cookies adding up to more than DefaultMaxResponseHeaderBytes, whose "/cookies" page
// sends headerLimitCookies of them, under the limit. Every page's body is "page".
func headerLimitOrigin(t *testing.T, h2 bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/huge":
			w.Header().Set("X-Huge", strings.Repeat("h", transport.DefaultMaxResponseHeaderBytes+headerLimitOver))
		case "/many", "/cookies":
			n := headerLimitCookies
			if r.URL.Path == "/many" {
				n = transport.DefaultMaxResponseHeaderBytes/(4<<10) + 2
			}
			for i := range n {
				w.Header().Add("Set-Cookie", fmt.Sprintf("c%02d=%s; Path=/; HttpOnly", i, strings.Repeat("v", 4<<10)))
			}
		}
		fmt.Fprint(w, "page")
	}))
	// The HTTP/2 server logs the GOAWAY our side sends when it ends a connection: expected here.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if h2 {
		srv.EnableHTTP2 = true
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

func TestDefaultBaseTemplateBoundsResponseHeaders(t *testing.T) {
	if got, want := transport.DefaultBaseTemplate().MaxResponseHeaderBytes, int64(transport.DefaultMaxResponseHeaderBytes); got != want {
		t.Errorf("DefaultBaseTemplate().MaxResponseHeaderBytes = %d, want %d", got, want)
	}
	if transport.DefaultMaxResponseHeaderBytes != 256<<10 {
		t.Errorf("DefaultMaxResponseHeaderBytes = %d, want 256 KiB (Chrome's limit)", transport.DefaultMaxResponseHeaderBytes)
	}
}

// TestResponseHeaderLimit sends requests through a real proxy to an origin whose headers are too
// large: each attempt fails with net/http's clear error, is judged the origin's doing (neutral,
// origin-scoped, no retry), and leaves the exit and its pair CLOSED and carrying the next request,
// one with 192 KiB of cookies, which is under the limit. Over HTTP/1 the proxy forwards the
// response; over HTTP/2 it carries a CONNECT tunnel, and the limit is the SETTINGS_MAX_HEADER_LIST_SIZE
// our side advertised.
func TestResponseHeaderLimit(t *testing.T) {
	h1 := fmt.Sprintf("net/http: server response headers exceeded %d bytes; aborted", transport.DefaultMaxResponseHeaderBytes)
	for _, tc := range []struct {
		name string
		h2   bool
		path string
		msg  string // in the error
	}{
		{"http1-forward/one-field", false, "/huge", h1},
		{"http1-forward/many-fields", false, "/many", h1},
		// One field longer than the limit: the HPACK decoder refuses it and ends the connection.
		{"http2-connect/one-field", true, "/huge", "connection error: COMPRESSION_ERROR"},
		// Fields adding up past the limit, the block running on into CONTINUATION frames: net/http
		// stops reading and ends the connection.
		{"http2-connect/many-fields", true, "/many", "connection error: PROTOCOL_ERROR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			px, err := proxytest.Start(proxytest.Config{Name: "px"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { px.Close() })
			origin := headerLimitOrigin(t, tc.h2)
			const label = "px"
			obs := &integObserver{}
			tr, c := integNew(t, []*httptest.Server{origin},
				pool.WithExits(integExit(t, px.URL(), label)), pool.WithClock(newIntegClock()),
				transport.WithObserver(obs))
			key := integOriginKey(origin)
			want := pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginError}

			// More attempts than any default breaker needs to trip, had they counted.
			const tries = 12
			for i := range tries {
				r := integGet(c, origin.URL+tc.path)
				if r.err == nil {
					t.Fatalf("%d: Get(%s) = %d with %d headers, want an error", i, tc.path, r.status, len(r.header))
				}
				if !strings.Contains(r.err.Error(), tc.msg) {
					t.Errorf("%d: Get(%s) = error %q, want it to contain %q", i, tc.path, r.err, tc.msg)
				}
				ae := integAttemptError(t, r.err)
				if ae.Verdict != want || ae.Exit != label || ae.Origin != key {
					t.Errorf("%d: Get(%s) = AttemptError{Exit: %q, Origin: %q, Verdict: %+v}, want {%q, %q, %+v}",
						i, tc.path, ae.Exit, ae.Origin, ae.Verdict, label, key, want)
				}
				if ra := obs.last(t); ra.StatusCode != 0 || ra.Verdict != want || ra.PairStateAfter != breaker.Closed || ra.ExitStateAfter != breaker.Closed {
					t.Errorf("%d: observer saw status %d verdict %+v, pair %v, exit %v after; want 0, %+v, CLOSED, CLOSED",
						i, ra.StatusCode, ra.Verdict, ra.PairStateAfter, ra.ExitStateAfter, want)
				}
			}
			if got := obs.attempts(label); got != tries {
				t.Errorf("attempts through %q = %d, want %d (one per request: the transport does not retry)", label, got, tries)
			}
			snap := tr.Pool().Snapshot()
			if es := integExitStatus(t, snap, label); es.Breaker.State != breaker.Closed || es.InFlight != 0 {
				t.Errorf("exit %q after %d oversized responses: %v with %d in flight, want CLOSED with 0", label, tries, es.Breaker.State, es.InFlight)
			}
			if ps, ok := integPairState(snap, label, key); ok && ps.State != breaker.Closed {
				t.Errorf("pair (%q, %q) after %d oversized responses = %v, want CLOSED", label, key, tries, ps.State)
			}
			for _, o := range snap.Origins {
				if o.Origin == key && o.Breaker.State != breaker.Closed {
					t.Errorf("origin guard for %q = %v, want CLOSED (neutral verdicts count nothing)", key, o.Breaker.State)
				}
			}

			if tc.h2 && px.Connects() == 0 {
				t.Errorf("proxy answered no CONNECT: the HTTP/2 attempts did not go through it")
			}

			// 192 KiB of cookies is under the limit: the same exit carries it.
			r := integMustGet(t, c, origin.URL+"/cookies")
			if got := len(r.header.Values("Set-Cookie")); got != headerLimitCookies {
				t.Errorf("Get(/cookies) got %d Set-Cookie headers, want %d", got, headerLimitCookies)
			}
			if r.body != "page" || r.exit != label {
				t.Errorf("Get(/cookies) = %q via %q, want %q via %q", r.body, r.exit, "page", label)
			}
		})
	}
}

// TestResponseHeaderLimitClassification pins the classifier's reading of net/http's errors, also
// when wrapped (a per-exit middleware may wrap what the base transport returns), and that the same
// words quoted inside another error do not pass for them.
func TestResponseHeaderLimitClassification(t *testing.T) {
	want := pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginError}
	for i, err := range []error{
		errors.New("net/http: server response headers exceeded 262144 bytes; aborted"),
		fmt.Errorf("signing middleware: %w", errors.New("net/http: server response headers exceeded 1024 bytes; aborted")),
		errors.New("stream error: stream ID 3; PROTOCOL_ERROR; http2: response header list larger than advertised limit"),
		errors.New("connection error: COMPRESSION_ERROR"),
		errors.New("connection error: PROTOCOL_ERROR"),
		errors.Join(errors.New("first"), errors.New("connection error: COMPRESSION_ERROR")),
	} {
		if got := transport.DefaultClassifier.Classify(&transport.Attempt{Err: err}); got != want {
			t.Errorf("%d: Classify(Err: %q) = %+v, want %+v", i, err, got, want)
		}
	}
	for i, err := range []error{
		// A proxy (plain HTTP) or an origin that sends these words as its status line.
		errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "net/http: server response headers exceeded 1 bytes; aborted"`),
		errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP response "; http2: response header list larger than advertised limit"`),
		errors.New("connection error: FLOW_CONTROL_ERROR"),
		errors.New("proxy said: connection error: COMPRESSION_ERROR"),
	} {
		if got := transport.DefaultClassifier.Classify(&transport.Attempt{Err: err}); got == want {
			t.Errorf("%d: Classify(Err: %q) = %+v, want anything but the oversized-header verdict", i, err, got)
		}
	}
	// The caller's own cancellation still wins: nothing is the origin's when the caller left.
	err := errors.New("net/http: server response headers exceeded 262144 bytes; aborted")
	if got := transport.DefaultClassifier.Classify(&transport.Attempt{Err: err, CallerDone: true}); got.Class != pool.ClassCanceled {
		t.Errorf("Classify(Err: %q, CallerDone) = %+v, want class %q", err, got, pool.ClassCanceled)
	}
}
