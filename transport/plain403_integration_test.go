package transport_test

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

// nginxForbidden is nginx's own 403 page: no challenge, no vendor marker.
const nginxForbidden = "<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body>\r\n<center><h1>403 Forbidden</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

// nginxForbid answers nginx's plain 403 page.
func nginxForbid(w http.ResponseWriter) {
	w.Header().Set("Server", "nginx")
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(http.StatusForbidden)
	io.WriteString(w, nginxForbidden)
}

// banningOrigin starts an origin (integOrigin) that answers nginx's plain 403 to requests through
// the proxy reg knows as exit, and serves the others.
func banningOrigin(t *testing.T, reg *proxytest.Registry, exit string) *httptest.Server {
	t.Helper()
	return integOrigin(t, false, func(w http.ResponseWriter, r *http.Request, _ string) bool {
		if name, _ := reg.Lookup(r); name == exit {
			nginxForbid(w)
			return true
		}
		return false
	})
}

// TestIntegPlain403ByEvidence is issue 12's plain-403 case through real forward proxies on
// 127.0.0.1: origin "banned" answers nginx's plain 403 to requests through X and serves them
// through Y and Z, so X's 403s are a block of the (X, banned) pair from the second in a row (the
// first may be a page the site forbids everyone), which opens at once; origin "closed" answers 403 to every exit — the site's answer — and no pair of it opens.
func TestIntegPlain403ByEvidence(t *testing.T) {
	reg := &proxytest.Registry{}
	banned := banningOrigin(t, reg, "X")
	closed := integOrigin(t, false, func(w http.ResponseWriter, r *http.Request, _ string) bool {
		nginxForbid(w)
		return true
	})
	exits := registeredExits(t, reg, "X", "Y", "Z")
	tr, c := integNew(t, []*httptest.Server{banned, closed}, pool.WithExits(exits...), pool.WithClock(newIntegClock()),
		pool.WithPairSettings(breaker.Settings{Rand: integHalf}))
	get := func(u, exit string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(transport.ContextWithExit(context.Background(), exit), http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("Get(%s) via %s: %v", u, exit, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	// The site's answer: every exit gets 403 from closed, and nothing opens.
	for range 3 {
		for _, x := range []string{"X", "Y", "Z"} {
			if got := get(closed.URL, x); got != http.StatusForbidden {
				t.Fatalf("Get(closed) via %s = %d, want 403", x, got)
			}
		}
	}
	for _, x := range []string{"X", "Y", "Z"} {
		if s, ok := integPairState(tr.Pool().Snapshot(), x, integOriginKey(closed)); ok && s.State != breaker.Closed {
			t.Errorf("pair (%s, closed) = %v, want closed: a 403 every exit gets is the site's answer", x, s.State)
		}
	}

	// A block of one exit: Y and Z are served by banned, X gets 403s and its pair opens.
	for _, x := range []string{"Y", "Z", "Y", "Z"} {
		if got := get(banned.URL, x); got != http.StatusOK {
			t.Fatalf("Get(banned) via %s = %d, want 200", x, got)
		}
	}
	const inRow = 2 // the first is the site's answer, the second a block, and a block trips at once
	for i := range inRow {
		// Another path than Y's and Z's: one the site never served, which it might forbid everyone.
		if got := get(banned.URL+"/x", "X"); got != http.StatusForbidden {
			t.Fatalf("step %d: Get(banned) via X = %d, want 403", i, got)
		}
	}
	xb, _ := integPairState(tr.Pool().Snapshot(), "X", integOriginKey(banned))
	if xb.State != breaker.Open || xb.LastFailure != string(pool.ClassBlocked) {
		t.Errorf("pair (X, banned) after %d plain 403s while Y and Z were served = %v, last failure %q; want open, %s",
			inRow, xb.State, xb.LastFailure, pool.ClassBlocked)
	}
	for _, x := range []string{"Y", "Z"} {
		if s, ok := integPairState(tr.Pool().Snapshot(), x, integOriginKey(banned)); ok && s.State != breaker.Closed {
			t.Errorf("pair (%s, banned) = %v, want closed", x, s.State)
		}
	}
	if es := integExitStatus(t, tr.Pool().Snapshot(), "X"); es.Breaker.State != breaker.Closed {
		t.Errorf("exit X = %v, want closed: a ban judges the pair, not the exit", es.Breaker.State)
	}
}

// TestIntegPlain403BanIsABlockEverywhere is issue 26's: a plain 403 the pool judged a ban tripped
// the pair, yet the observers were told "success, origin_4xx" (the verdict before the pool's
// judgement) and ErrorFromResponse, VerdictFromResponse and so the retry hooks took the response
// for the site's answer. Through real forward proxies on 127.0.0.1, origin "banned" answers X a
// plain 403 and serves Y and Z: X's second 403 is a block for the breakers, a transport.Observer,
// the otelbreaker span and attempts counter, ErrorFromResponse and retry.Decide alike, and X's
// first (the site's answer) a success for all of them.
func TestIntegPlain403BanIsABlockEverywhere(t *testing.T) {
	reg := &proxytest.Registry{}
	banned := banningOrigin(t, reg, "X")
	exits := registeredExits(t, reg, "X", "Y", "Z")
	spans := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	otelObs, err := otelbreaker.New(
		otelbreaker.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))),
		otelbreaker.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		t.Fatal(err)
	}
	rec := &integObserver{}
	tr, c := integNew(t, []*httptest.Server{banned}, pool.WithExits(exits...), pool.WithClock(newIntegClock()),
		pool.WithPairSettings(breaker.Settings{Rand: integHalf}), transport.WithObserver(rec), transport.WithObserver(otelObs))

	block := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: pool.SuspectDetector, Suspect: true}
	site := pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx, Suspect: true}
	served := pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}
	steps := []struct {
		exit   string
		status int
		want   pool.Verdict
	}{
		{"Y", http.StatusOK, served}, {"Z", http.StatusOK, served}, {"Y", http.StatusOK, served}, {"Z", http.StatusOK, served},
		{"X", http.StatusForbidden, site},  // the first in a row may be a page the site forbids everyone
		{"X", http.StatusForbidden, block}, // the second, while Y and Z are served: a ban
	}
	for i, s := range steps {
		// X asks for another path than Y and Z were served: one the site might forbid everyone.
		path := "/"
		if s.exit == "X" {
			path = "/x"
		}
		req, err := http.NewRequestWithContext(transport.ContextWithExit(context.Background(), s.exit), http.MethodGet, banned.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("step %d: Get via %s: %v", i, s.exit, err)
		}
		// What a caller and a retry layer read at the headers, before the body.
		if v, _ := transport.VerdictFromResponse(resp); resp.StatusCode != s.status || v != s.want {
			t.Errorf("step %d: via %s: VerdictFromResponse = %d %+v, want %d %+v", i, s.exit, resp.StatusCode, v, s.status, s.want)
		}
		var ae *transport.AttemptError
		rerr := transport.ErrorFromResponse(resp)
		if failed := s.want.Outcome == pool.Transient; failed != errors.As(rerr, &ae) || (failed && (ae.Verdict != s.want || ae.Exit != s.exit)) {
			t.Errorf("step %d: via %s: ErrorFromResponse = %v, want an *AttemptError via %s: %v", i, s.exit, rerr, s.exit, failed)
		}
		if d := retry.Decide(resp, nil); d.Retry != (s.want.Outcome == pool.Transient) || d.Verdict != s.want || d.Exit != s.exit {
			t.Errorf("step %d: via %s: retry.Decide = %+v, want Retry %v, verdict %+v", i, s.exit, d, s.want.Outcome == pool.Transient, s.want)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if r := rec.last(t); r.Exit.Label() != s.exit || r.Verdict != s.want {
			t.Errorf("step %d: via %s: Observer's AttemptFinished via %s, verdict %+v; want %+v", i, s.exit, r.Exit.Label(), r.Verdict, s.want)
		}
	}
	if r := rec.last(t); r.PairStateAfter != breaker.Open {
		t.Errorf("Observer's pair state after the ban = %v, want open", r.PairStateAfter)
	}
	if s, _ := integPairState(tr.Pool().Snapshot(), "X", integOriginKey(banned)); s.State != breaker.Open {
		t.Errorf("pair (X, banned) = %v, want open", s.State)
	}

	// The spans: one per attempt, the ban's a failed one, blocked, the 403 the site's answer a success.
	var xSpans []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == otelbreaker.AttrExit && kv.Value.AsString() == "X" {
				xSpans = append(xSpans, s)
			}
		}
	}
	if len(xSpans) != 2 {
		t.Fatalf("%d spans through X, want 2", len(xSpans))
	}
	for i, want := range []struct {
		outcome, class string
		status         codes.Code
	}{{"success", "origin_4xx", codes.Unset}, {"transient", "blocked", codes.Error}} {
		a := map[attribute.Key]string{}
		for _, kv := range xSpans[i].Attributes() {
			a[kv.Key] = kv.Value.Emit()
		}
		if a[otelbreaker.AttrOutcome] != want.outcome || a[otelbreaker.AttrClass] != want.class || xSpans[i].Status().Code != want.status {
			t.Errorf("span %d via X: outcome %s, class %s, status %v; want %s, %s, %v",
				i, a[otelbreaker.AttrOutcome], a[otelbreaker.AttrClass], xSpans[i].Status().Code, want.outcome, want.class, want.status)
		}
	}

	// The attempts counter: through X, one success (origin_4xx) and one blocked failure.
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counted := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if m.Name != otelbreaker.MetricAttempts || !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				if exit, _ := dp.Attributes.Value(otelbreaker.AttrExit); exit.AsString() == "X" {
					outcome, _ := dp.Attributes.Value(otelbreaker.AttrOutcome)
					class, _ := dp.Attributes.Value(otelbreaker.AttrClass)
					counted[outcome.AsString()+"/"+class.AsString()] += dp.Value
				}
			}
		}
	}
	if want := map[string]int64{"success/origin_4xx": 1, "transient/blocked": 1}; !maps.Equal(counted, want) {
		t.Errorf("%s through X = %v, want %v", otelbreaker.MetricAttempts, counted, want)
	}
}
