package otelbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestNestsUnderOtelhttp: with the transport wrapped by otelhttp, each attempt span is a child of
// otelhttp's client span, which is a child of the caller's span.
func TestNestsUnderOtelhttp(t *testing.T) {
	b := newBench(t)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b.spans))
	client := &http.Client{Transport: otelhttp.NewTransport(b.tr, otelhttp.WithTracerProvider(tp))}
	ctx, root := b.tracer.Start(context.Background(), "job")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, shop, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	root.End()

	var attempt, clientSpan sdktrace.ReadOnlySpan
	for _, s := range b.spans.Ended() {
		switch {
		case s.Name() == otelbreaker.SpanName:
			attempt = s
		case s.SpanKind() == trace.SpanKindClient:
			clientSpan = s
		}
	}
	if attempt == nil || clientSpan == nil {
		t.Fatalf("spans: attempt %v, otelhttp client %v; want both", attempt, clientSpan)
	}
	if attempt.Parent().SpanID() != clientSpan.SpanContext().SpanID() {
		t.Errorf("attempt span's parent = %v, want otelhttp's client span %v", attempt.Parent().SpanID(), clientSpan.SpanContext().SpanID())
	}
	if clientSpan.Parent().SpanID() != root.SpanContext().SpanID() {
		t.Errorf("otelhttp span's parent = %v, want the caller's span %v", clientSpan.Parent().SpanID(), root.SpanContext().SpanID())
	}
	if attempt.SpanContext().TraceID() != root.SpanContext().TraceID() {
		t.Errorf("attempt span in trace %v, want %v", attempt.SpanContext().TraceID(), root.SpanContext().TraceID())
	}
}

// TestThrottled: a rate-limit wait is a histogram sample and an event on the span in the context.
func TestThrottled(t *testing.T) {
	b := newBench(t)
	exit := b.tr.Pool().Exits()[0]
	ctx, span := b.tracer.Start(context.Background(), "request")
	b.obs.Throttled(ctx, pool.Throttle{Origin: "shop.example", Exit: exit, Scope: pool.ScopePair, Waited: 250 * time.Millisecond})
	b.obs.Throttled(ctx, pool.Throttle{Origin: "shop.example", Scope: pool.ScopeOrigin, Waited: 2 * time.Second, Refused: true})
	span.End()
	got := series(t, b.collect(0))
	for k, v := range map[string]float64{
		key("proxybreaker.ratelimit.wait", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.ratelimit.scope=pair", "proxybreaker.ratelimit.refused=false") + ":count": 1,
		key("proxybreaker.ratelimit.wait", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.ratelimit.scope=pair", "proxybreaker.ratelimit.refused=false") + ":sum":   0.25,
		key("proxybreaker.ratelimit.wait", "proxybreaker.origin=shop.example", "proxybreaker.ratelimit.scope=origin", "proxybreaker.ratelimit.refused=true") + ":count":                                 1,
		key("proxybreaker.ratelimit.wait", "proxybreaker.origin=shop.example", "proxybreaker.ratelimit.scope=origin", "proxybreaker.ratelimit.refused=true") + ":sum":                                   2,
	} {
		if got[k] != v {
			t.Errorf("series %s = %v, want %v", k, got[k], v)
		}
	}
	ended := b.spans.Ended()
	events := ended[len(ended)-1].Events()
	if len(events) != 2 {
		t.Fatalf("%d events, want 2", len(events))
	}
	want := []attrs{
		{"proxybreaker.ratelimit.scope": "pair", "proxybreaker.ratelimit.waited": 0.25, "proxybreaker.ratelimit.refused": false,
			"proxybreaker.exit.label": "alpha", "proxybreaker.exit.key": "alpha", "proxybreaker.origin": "shop.example", "proxybreaker.origin.key": "shop.example"},
		{"proxybreaker.ratelimit.scope": "origin", "proxybreaker.ratelimit.waited": 2.0, "proxybreaker.ratelimit.refused": true,
			"proxybreaker.origin": "shop.example", "proxybreaker.origin.key": "shop.example"},
	}
	for i, ev := range events {
		if ev.Name != otelbreaker.EventThrottled || fmt.Sprint(attrMap(ev.Attributes)) != fmt.Sprint(want[i]) {
			t.Errorf("event %d = %s %v, want %s %v", i, ev.Name, attrMap(ev.Attributes), otelbreaker.EventThrottled, want[i])
		}
	}
}

// gaugeNames are the metrics observed from the bound pool's snapshot.
var gaugeNames = []string{otelbreaker.MetricBreakerState, otelbreaker.MetricTimeToProbe, otelbreaker.MetricBreakers, otelbreaker.MetricParkedExits}

// gauges returns the series of the breaker gauges alone.
func gauges(got map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range got {
		if slices.Contains(gaugeNames, metricName(k)) {
			out[k] = v
		}
	}
	return out
}

// TestOneCallPlugsIn: transport.New(p, transport.WithObserver(obs)) is the whole setup. The
// gauges report p's breakers before any request, the pool's events (a trip) are counted, and
// Transport.Close unbinds the gauges and takes the observer off the pool: a breaker that opens
// afterwards is not counted. Another transport plugs the same observer in again.
func TestOneCallPlugsIn(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	obs, err := otelbreaker.New(otelbreaker.WithMeterProvider(mp), otelbreaker.WithTracerProvider(tracenoop.NewTracerProvider()))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(t0)
	p, err := pool.New(pool.WithExits(benchExits()...), pool.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	base := &testkit.Scripted{Clock: clk}
	base.On("bravo", "*", testkit.Reply{Status: http.StatusProxyAuthRequired})
	tr, err := transport.New(p, transport.WithBase(base), transport.WithObserver(obs), transport.WithHeaderTimeout(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	collect := func() map[string]float64 {
		t.Helper()
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Fatalf("Collect: %v", err)
		}
		return series(t, rm)
	}
	exitState := func(label string) string {
		return key(otelbreaker.MetricBreakerState, "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label="+label)
	}
	parked := key(otelbreaker.MetricParkedExits)
	closedExits := key(otelbreaker.MetricBreakers, "proxybreaker.breaker.scope=exit", "proxybreaker.state=closed")

	diffSeries(t, "after transport.New alone", collect(), map[string]float64{
		exitState("alpha"): 0, exitState("bravo"): 0, exitState("charlie"): 0, closedExits: 3, parked: 0,
	})

	// bravo's proxy rejects its credentials: the exit is parked. The trip reaches the observer as
	// a pool event; the gauges read it from the pool.
	req := mustRequest(t, shop)
	resp, err := tr.RoundTrip(req.WithContext(transport.ContextWithExit(req.Context(), "bravo")))
	if err != nil {
		t.Fatalf("RoundTrip through bravo: %v", err)
	}
	resp.Body.Close()
	bravoTrip := key(otelbreaker.MetricTrips, "proxybreaker.exit.label=bravo", "proxybreaker.breaker.scope=exit",
		"proxybreaker.breaker.cause=permanent", "proxybreaker.breaker.reason=proxy_auth")
	got := collect()
	for k, v := range map[string]float64{exitState("bravo"): otelbreaker.StateOpen, parked: 1, bravoTrip: 1} {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("bravo parked: series %s = %v (present %v), want %v", k, g, ok, v)
		}
	}

	// A second transport over the same pool cannot plug the same observer in twice.
	if tr2, err := transport.New(p, transport.WithObserver(obs)); err == nil {
		tr2.Close()
		t.Errorf("a second transport.New with the bound observer = nil error, want one")
	} else if !strings.Contains(err.Error(), "already bound") {
		t.Errorf("a second transport.New with the bound observer: %v, want \"already bound\"", err)
	}
	if got := gauges(collect()); got[parked] != 1 {
		t.Errorf("after the refused second transport: gauges %v, want them still bound", got)
	}

	if err := tr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := gauges(collect()); len(got) != 0 {
		t.Errorf("after Transport.Close: gauges %v, want none", got)
	}
	// The pool goes on without the observer: alpha parked now is no trip of its.
	lease, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Exit: "alpha"})
	if err != nil {
		t.Fatalf("Pick alpha: %v", err)
	}
	lease.Report(pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth})
	got = collect()
	for k := range got {
		if strings.Contains(k, "alpha") && metricName(k) == otelbreaker.MetricTrips {
			t.Errorf("after Transport.Close: series %s = %v, want no trip counted", k, got[k])
		}
	}
	if got[bravoTrip] != 1 {
		t.Errorf("after Transport.Close: %s = %v, want the earlier trip kept", bravoTrip, got[bravoTrip])
	}

	tr3, err := transport.New(p, transport.WithObserver(obs))
	if err != nil {
		t.Fatalf("transport.New after Close: %v", err)
	}
	defer tr3.Close()
	if got := collect(); got[parked] != 2 || got[exitState("alpha")] != otelbreaker.StateOpen {
		t.Errorf("plugged in again: parked %v, alpha %v; want 2, %d", got[parked], got[exitState("alpha")], otelbreaker.StateOpen)
	}
}

// TestBind: Bind by hand binds the gauges alone; an Observer is bound to one pool at a time; an
// unbind func works once, and a stale one leaves a later binding alone.
func TestBind(t *testing.T) {
	b := newBench(t) // bound by transport.New
	if _, err := b.obs.Bind(b.tr.Pool()); err == nil {
		t.Errorf("a second Bind of the same pool = nil error, want one")
	}
	other, err := pool.New(pool.WithExits(benchExits()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	if _, err := b.obs.Bind(other); err == nil {
		t.Errorf("Bind of another pool while bound = nil error, want one")
	}
	if _, err := b.obs.Bind(nil); err == nil {
		t.Errorf("Bind(nil) = nil error, want one")
	}
	b.tr.Close()
	if got := series(t, b.collect(0)); len(got) != 0 {
		t.Errorf("after Transport.Close: %d series %v, want none (no gauges, no traffic)", len(got), got)
	}

	unbind, err := b.obs.Bind(b.tr.Pool())
	if err != nil {
		t.Fatalf("Bind after Close: %v", err)
	}
	if got := gauges(series(t, b.collect(0))); len(got) == 0 {
		t.Errorf("after Bind: no gauges, want them back")
	}
	unbind()
	unbind()
	if got := series(t, b.collect(0)); len(got) != 0 {
		t.Errorf("after unbind: %d series %v, want none", len(got), got)
	}
	unbindOther, err := b.obs.Bind(other)
	if err != nil {
		t.Fatalf("Bind of another pool after unbind: %v", err)
	}
	unbind() // stale: must not unbind other
	if got := gauges(series(t, b.collect(0))); len(got) == 0 {
		t.Errorf("a stale unbind unbound the current binding")
	}
	unbindOther()
	if got := series(t, b.collect(0)); len(got) != 0 {
		t.Errorf("after unbindOther: %d series %v, want none", len(got), got)
	}
}

// failingMeter is a Meter that cannot create any instrument.
type failingMeter struct{ noop.Meter }

var errNoInstrument = errors.New("test: no instrument for you")

func (failingMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errNoInstrument
}
func (failingMeter) Float64Counter(string, ...metric.Float64CounterOption) (metric.Float64Counter, error) {
	return nil, errNoInstrument
}
func (failingMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return nil, errNoInstrument
}
func (failingMeter) Int64ObservableGauge(string, ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	return nil, errNoInstrument
}
func (failingMeter) Float64ObservableGauge(string, ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	return nil, errNoInstrument
}

type failingMeterProvider struct{ noop.MeterProvider }

func (failingMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return failingMeter{} }

// TestInstrumentErrorsGoToHandle: instruments the meter cannot make are reported to otel.Handle,
// replaced by no-ops, and requests go on.
func TestInstrumentErrorsGoToHandle(t *testing.T) {
	var mu sync.Mutex
	var handled []error
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		handled = append(handled, err)
		mu.Unlock()
	}))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })

	obs, err := otelbreaker.New(otelbreaker.WithMeterProvider(failingMeterProvider{}), otelbreaker.WithTracerProvider(sdktrace.NewTracerProvider()))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	mu.Lock()
	n := len(handled)
	mu.Unlock()
	// One per instrument: as many as docs/metrics.md's Metrics table has rows (TestDocsListEveryInstrument
	// checks that table against what the observer exports).
	raw, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	if want := len(docTable(t, string(raw), "## Metrics")); n != want {
		t.Errorf("otel.Handle got %d errors, want %d (one per instrument)", n, want)
	}
	tr := newTransport(t, benchExits(), transport.WithBase(&testkit.Scripted{}), transport.WithObserver(obs))
	resp, err := tr.RoundTrip(mustRequest(t, shop))
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// newTransport returns a transport over a new pool of exits, closed when the test ends.
func newTransport(t *testing.T, exits []*pool.Exit, opts ...transport.Option) *transport.Transport {
	t.Helper()
	p, err := pool.New(pool.WithExits(exits...))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.New(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func mustRequest(t testing.TB, rawURL string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestGlobalNoopProviders: with nothing installed the observer uses the global no-op providers,
// and attempts still go through.
func TestGlobalNoopProviders(t *testing.T) {
	obs, err := otelbreaker.New()
	if err != nil {
		t.Fatal(err)
	}
	tr := newTransport(t, benchExits(), transport.WithBase(&testkit.Scripted{}), transport.WithObserver(obs))
	resp, err := tr.RoundTrip(mustRequest(t, shop))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// TestConcurrentAttempts runs many goroutines through a flapping pool with the SDK installed and
// a collector reading the gauges meanwhile: every attempt gets exactly one ended span, and the
// attempts counter adds up. Run it with -race.
func TestConcurrentAttempts(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	obs, err := otelbreaker.New(otelbreaker.WithTracerProvider(tp), otelbreaker.WithMeterProvider(mp), otelbreaker.WithMaxSeries(5))
	if err != nil {
		t.Fatal(err)
	}
	base := &testkit.Scripted{}
	base.On("*", "down.example", testkit.Reply{Err: testkit.ErrTimeout})
	base.On("*", "busy.example", testkit.Reply{Status: http.StatusTooManyRequests, Header: testkit.RetryAfter(1)})
	tr := newTransport(t, testkit.Exits("e", 8), transport.WithBase(base), transport.WithObserver(obs), transport.WithHeaderTimeout(-1))

	const workers, perWorker = 16, 200
	origins := []string{shop, down, "https://busy.example/", "https://a.example/", "https://b.example/"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	attempted := 0
	stop := make(chan struct{})
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for {
			select {
			case <-stop:
				return
			default:
			}
			var rm metricdata.ResourceMetrics
			reader.Collect(context.Background(), &rm)
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for i := range perWorker {
				resp, err := tr.RoundTrip(mustRequest(t, origins[(w+i)%len(origins)]))
				var ae *transport.AttemptError
				switch {
				case err == nil:
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					n++
				case errors.As(err, &ae):
					n++
				}
			}
			mu.Lock()
			attempted += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(stop)
	<-collected

	if got := len(spans.Ended()); got != attempted {
		t.Errorf("%d attempt spans ended, want %d (one per attempt)", got, attempted)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for k, v := range series(t, rm) {
		if metricName(k) == otelbreaker.MetricAttempts {
			total += v
		}
	}
	if int(total) != attempted {
		t.Errorf("attempts counter adds up to %v, want %d", total, attempted)
	}
}
