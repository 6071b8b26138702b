package otelbreaker_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// This file holds the test bench: a transport over testkit.Scripted (no network; a reply's Took
// advances the fake clock) on a fake clock, observed by an otelbreaker.Observer wired to the real
// OTel SDK: a span recorder, a manual metric reader and the OTel Prometheus exporter.

// t0 is the instant the fake clock starts at; steps are scheduled as offsets from it.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// bench is a transport with three exits on a fake clock, observed through the real SDK.
type bench struct {
	t      *testing.T
	clock  *clock.Fake
	base   *testkit.Scripted
	tr     *transport.Transport
	obs    *otelbreaker.Observer
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	// prom holds the same metrics as reader, through the OTel Prometheus exporter with the
	// translation examples/otel uses.
	prom   *prometheus.Registry
	tracer trace.Tracer // makes the requests' parent spans
}

// Passwords the bench's exits dial with: no exported telemetry may contain them.
const (
	alphaPass   = "alpha-S3cret!pw"
	bravoPass   = "bravo-S3cret!pw"
	charliePass = "charlie-S3cret!pw"
)

var passwords = []string{alphaPass, bravoPass, charliePass}

// benchExits are alpha (tier 0), bravo (tier 1) and charlie (tier 2): the lowest tier with a ready
// exit serves, so which exit carries each request is decided by the breakers alone.
func benchExits() []*pool.Exit {
	return []*pool.Exit{
		pool.MustParseExit("http://alpha-user:" + alphaPass + "@10.0.0.1:3128").WithLabel("alpha").WithTier(0),
		pool.MustParseExit("http://bravo-user:" + bravoPass + "@10.0.0.2:3128").WithLabel("bravo").WithTier(1),
		pool.MustParseExit("10.0.0.3:3128:charlie-user:" + charliePass).WithLabel("charlie").WithTier(2),
	}
}

// newBench builds the bench. Breaker jitter is off so every OPEN window is exact; the origin
// guard's jitter cannot be turned off, so its probe instant is read from the pool's snapshot.
func newBench(t *testing.T, obsOpts ...otelbreaker.Option) *bench {
	t.Helper()
	return newBenchWith(t, benchExits(), obsOpts...)
}

// newBenchWith is newBench over the given exits.
func newBenchWith(t *testing.T, exits []*pool.Exit, obsOpts ...otelbreaker.Option) *bench {
	t.Helper()
	return newBenchFull(t, exits, nil, obsOpts...)
}

// newBenchFull is newBenchWith with more pool options, applied last. The observer is plugged in
// by transport.New alone: its gauges are bound to the pool there, and unbound by Transport.Close.
func newBenchFull(t *testing.T, exits []*pool.Exit, poolOpts []pool.Option, obsOpts ...otelbreaker.Option) *bench {
	t.Helper()
	b := &bench{t: t, clock: clock.NewFake(t0), spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader(), prom: prometheus.NewRegistry()}
	b.base = &testkit.Scripted{Clock: b.clock}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(b.spans), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	exporter, err := otelprom.New(otelprom.WithRegisterer(b.prom), otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
	if err != nil {
		t.Fatalf("Prometheus exporter: %v", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(b.reader), sdkmetric.WithReader(exporter))
	t.Cleanup(func() {
		tp.Shutdown(context.Background())
		mp.Shutdown(context.Background())
	})
	b.tracer = tp.Tracer("test")
	obs, err := otelbreaker.New(append([]otelbreaker.Option{
		otelbreaker.WithTracerProvider(tp), otelbreaker.WithMeterProvider(mp),
	}, obsOpts...)...)
	if err != nil {
		t.Fatalf("otelbreaker.New: %v", err)
	}
	b.obs = obs
	exitSettings := pool.DefaultExitSettings()
	exitSettings.Jitter = -1
	p, err := pool.New(append([]pool.Option{
		pool.WithExits(exits...),
		pool.WithClock(b.clock),
		pool.WithPairSettings(breaker.Settings{Jitter: -1}),
		pool.WithExitSettings(exitSettings),
		pool.WithIdleTTL(1000 * time.Hour),
	}, poolOpts...)...)
	if err != nil {
		t.Fatalf("pool.New: %v", err)
	}
	tr, err := transport.New(p, transport.WithBase(b.base), transport.WithObserver(obs), transport.WithHeaderTimeout(-1))
	if err != nil {
		t.Fatalf("transport.New: %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	b.tr = tr
	return b
}

// result is one request's outcome as the bench saw it.
type result struct {
	parent trace.SpanContext
	exit   string // "" when refused
	status int
	err    error
}

// get sends GET rawURL at t0+at inside a parent span named "request", reads and closes the body.
func (b *bench) get(at time.Duration, rawURL string) result {
	b.t.Helper()
	b.clock.Set(t0.Add(at))
	ctx, parent := b.tracer.Start(context.Background(), "request")
	defer parent.End()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	r := result{parent: parent.SpanContext()}
	resp, err := b.tr.RoundTrip(req)
	if err != nil {
		var ae *transport.AttemptError
		if errors.As(err, &ae) {
			r.exit = ae.Exit
		}
		r.err = err
		return r
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r.status = resp.StatusCode
	if e := transport.ExitFromResponse(resp); e != nil {
		r.exit = e.Label()
	}
	return r
}

// collect reads every metric at t0+at.
func (b *bench) collect(at time.Duration) metricdata.ResourceMetrics {
	b.t.Helper()
	b.clock.Set(t0.Add(at))
	var rm metricdata.ResourceMetrics
	if err := b.reader.Collect(context.Background(), &rm); err != nil {
		b.t.Fatalf("Collect: %v", err)
	}
	return rm
}

// attemptSpans returns the ended attempt spans, in the order they ended.
func (b *bench) attemptSpans() []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range b.spans.Ended() {
		if s.Name() == otelbreaker.SpanName {
			out = append(out, s)
		}
	}
	return out
}
