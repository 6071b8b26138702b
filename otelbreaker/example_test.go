package otelbreaker_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// A request through a local forward proxy, observed with the OTel SDK: one attempt span, a child
// of the caller's span, the attempts counter, and the breaker-state gauge, which transport.New
// bound to the pool.
func ExampleNew() {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer origin.Close()
	proxy, err := proxytest.Start(proxytest.Config{User: "u", Pass: "secret"})
	if err != nil {
		panic(err)
	}
	defer proxy.Close()

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	obs, err := otelbreaker.New(otelbreaker.WithTracerProvider(tp), otelbreaker.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	exit, _ := pool.NewExit(proxy.URL())
	p, err := pool.New(pool.WithExits(exit.WithLabel("dc-1")))
	if err != nil {
		panic(err)
	}
	// One call plugs the observer in: attempt spans, the pool's events, and the breaker gauges,
	// bound to p until tr.Close.
	tr, err := transport.New(p, transport.WithObserver(obs))
	if err != nil {
		panic(err)
	}
	defer tr.Close()

	ctx, job := tp.Tracer("example").Start(context.Background(), "job")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, origin.URL, nil)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close() // the verdict of a success waits for the body
	job.End()

	for _, s := range spans.Ended() {
		if s.Name() != otelbreaker.SpanName {
			continue
		}
		a := map[string]string{}
		for _, kv := range s.Attributes() {
			a[string(kv.Key)] = kv.Value.Emit()
		}
		fmt.Printf("%s, child of the job's span: %v\n", s.Name(), s.Parent().SpanID() == job.SpanContext().SpanID())
		fmt.Printf("exit %s, server %s, verdict %s/%s, status %s\n", a["proxybreaker.exit.label"], a["server.address"],
			a["proxybreaker.verdict.outcome"], a["proxybreaker.verdict.class"], a["http.response.status_code"])
	}
	var rm metricdata.ResourceMetrics
	reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name == otelbreaker.MetricAttempts {
					fmt.Printf("%s = %d\n", m.Name, d.DataPoints[0].Value)
				}
			case metricdata.Gauge[int64]:
				if m.Name != otelbreaker.MetricBreakerState {
					continue
				}
				for _, dp := range d.DataPoints { // the exit's breaker; the pair's and origin's name a port
					if scope, _ := dp.Attributes.Value(otelbreaker.AttrScope); scope.AsString() == "exit" {
						label, _ := dp.Attributes.Value(otelbreaker.AttrExit)
						fmt.Printf("%s of exit %s = %d\n", m.Name, label.AsString(), dp.Value)
					}
				}
			}
		}
	}
	// Output:
	// proxybreaker.attempt, child of the job's span: true
	// exit dc-1, server 127.0.0.1, verdict success/ok, status 200
	// proxybreaker.breaker.state of exit dc-1 = 0
	// proxybreaker.attempts = 1
}
