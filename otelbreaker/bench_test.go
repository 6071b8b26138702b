package otelbreaker_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// observers are the configurations benchmarked: none at all, the OTel no-op providers, and the
// SDK sampling and recording every span (no exporter: the export pipeline is the SDK's cost, not
// ours) with a manual metric reader.
func observers(b *testing.B) map[string]func() *otelbreaker.Observer {
	return map[string]func() *otelbreaker.Observer{
		"bare": func() *otelbreaker.Observer { return nil },
		"noop": func() *otelbreaker.Observer {
			o, err := otelbreaker.New(otelbreaker.WithTracerProvider(tracenoop.NewTracerProvider()), otelbreaker.WithMeterProvider(metricnoop.NewMeterProvider()))
			if err != nil {
				b.Fatal(err)
			}
			return o
		},
		"sdk": func() *otelbreaker.Observer {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() {
				tp.Shutdown(context.Background())
				mp.Shutdown(context.Background())
			})
			o, err := otelbreaker.New(otelbreaker.WithTracerProvider(tp), otelbreaker.WithMeterProvider(mp))
			if err != nil {
				b.Fatal(err)
			}
			return o
		},
	}
}

// BenchmarkObserver is one attempt through the transport over a canned base, without an observer
// ("bare") and with otelbreaker on the no-op providers and on the SDK: the difference to bare is
// the observer's cost per attempt.
func BenchmarkObserver(b *testing.B) {
	for _, name := range []string{"bare", "noop", "sdk"} {
		for _, parallel := range []bool{false, true} {
			sub := name
			if parallel {
				sub += "/parallel"
			}
			b.Run(sub, func(b *testing.B) {
				obs := observers(b)[name]()
				p, err := pool.New(pool.WithExits(benchExits()...))
				if err != nil {
					b.Fatal(err)
				}
				opts := []transport.Option{transport.WithBase(testkit.NewCanned(testkit.CannedReply{})), transport.WithHeaderTimeout(-1)}
				if obs != nil {
					opts = append(opts, transport.WithObserver(obs))
				}
				tr, err := transport.New(p, opts...)
				if err != nil {
					b.Fatal(err)
				}
				defer tr.Close()
				req, _ := http.NewRequest(http.MethodGet, shop, nil)
				do := func() {
					resp, err := tr.RoundTrip(req)
					if err != nil {
						b.Fatal(err)
					}
					resp.Body.Close()
				}
				b.ReportAllocs()
				if !parallel {
					for b.Loop() {
						do()
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						do()
					}
				})
			})
		}
	}
}

// BenchmarkObserverCalls is the observer alone: AttemptStarted and AttemptFinished of one
// successful attempt, as the transport calls them.
func BenchmarkObserverCalls(b *testing.B) {
	for _, name := range []string{"noop", "sdk"} {
		b.Run(name, func(b *testing.B) {
			obs := observers(b)[name]()
			info := transport.AttemptInfo{LeaseInfo: pool.LeaseInfo{Exit: benchExits()[0], Origin: "shop.example", At: time.Now()}, Method: http.MethodGet}
			res := transport.AttemptResult{AttemptInfo: info, Verdict: pool.Verdict{Class: pool.ClassOK}, StatusCode: 200, Latency: 120 * time.Millisecond}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				actx := obs.AttemptStarted(ctx, info)
				obs.AttemptFinished(actx, res)
			}
		})
	}
}
