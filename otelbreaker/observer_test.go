package otelbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
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

	"github.com/proxybreaker/proxybreaker/otelbreaker"
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
	b.obs.Throttled(ctx, transport.Throttle{Origin: "shop.example", Exit: exit, Scope: "pair", Waited: 250 * time.Millisecond})
	b.obs.Throttled(ctx, transport.Throttle{Origin: "shop.example", Scope: "origin", Waited: 2 * time.Second, Refused: true})
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
		{"proxybreaker.ratelimit.scope": "pair", "proxybreaker.ratelimit.waited": 0.25, "proxybreaker.ratelimit.refused": false, "proxybreaker.exit.label": "alpha"},
		{"proxybreaker.ratelimit.scope": "origin", "proxybreaker.ratelimit.waited": 2.0, "proxybreaker.ratelimit.refused": true},
	}
	for i, ev := range events {
		if ev.Name != otelbreaker.EventThrottled || fmt.Sprint(attrMap(ev.Attributes)) != fmt.Sprint(want[i]) {
			t.Errorf("event %d = %s %v, want %s %v", i, ev.Name, attrMap(ev.Attributes), otelbreaker.EventThrottled, want[i])
		}
	}
}

func TestRegister(t *testing.T) {
	b := newBench(t)
	if err := b.obs.Register(b.tr.Pool()); err == nil {
		t.Errorf("a second Register = nil, want an error")
	}
	if err := b.obs.Register(nil); err == nil {
		t.Errorf("Register(nil) = nil, want an error")
	}
	if err := b.obs.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := series(t, b.collect(0)); len(got) != 0 {
		t.Errorf("after Close: %d series %v, want none (no gauges, no traffic)", len(got), got)
	}
	if err := b.obs.Register(b.tr.Pool()); err != nil {
		t.Fatalf("Register after Close: %v", err)
	}
	if got := series(t, b.collect(0)); got[key("proxybreaker.exits.parked")] != 0 || len(got) == 0 {
		t.Errorf("after Register again: %v, want the gauges back", got)
	}
}

// failingMeter is a Meter that cannot create any instrument.
type failingMeter struct{ noop.Meter }

var errNoInstrument = errors.New("test: no instrument for you")

func (failingMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
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
	if n != 10 {
		t.Errorf("otel.Handle got %d errors, want 10 (one per instrument)", n)
	}
	tr, err := transport.New(transport.WithExits(benchExits()...), transport.WithBase(&script{rules: map[[2]string]reply{}}), transport.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := obs.Register(tr.Pool()); err != nil {
		t.Fatalf("Register: %v", err)
	}
	resp, err := tr.RoundTrip(mustRequest(t, shop))
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
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
	tr, err := transport.New(transport.WithExits(benchExits()...), transport.WithBase(&script{rules: map[[2]string]reply{}}), transport.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := obs.Register(tr.Pool()); err != nil {
		t.Fatal(err)
	}
	defer obs.Close()
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
	base := &script{rules: map[[2]string]reply{}}
	base.on("*", "down.example", reply{Err: timeoutErr})
	base.on("*", "busy.example", reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"1"}}})
	exits := make([]*transport.Exit, 8)
	for i := range exits {
		exits[i] = transport.MustParseExit(fmt.Sprintf("http://u:pw%d@10.0.1.%d:3128", i, i+1)).WithLabel(fmt.Sprintf("e%d", i))
	}
	tr, err := transport.New(transport.WithExits(exits...), transport.WithBase(base), transport.WithObserver(obs), transport.WithHeaderTimeout(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if err := obs.Register(tr.Pool()); err != nil {
		t.Fatal(err)
	}
	defer obs.Close()

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
