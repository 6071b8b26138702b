package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// otlpEndpointVars are the environment variables that name an OTLP endpoint for traces. When none
// is set, no trace exporter is made: the example sends nothing anywhere.
var otlpEndpointVars = []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"}

// telemetry is the example's OTel SDK: traces over OTLP/HTTP when an endpoint is configured, and
// metrics through the Prometheus exporter into a registry of its own.
type telemetry struct {
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	registry       *prometheus.Registry
	// exporting says where traces go, for the banner; "" when they go nowhere.
	exporting string
	shutdown  []func(context.Context) error
}

// otlpEndpoint returns the first OTLP endpoint variable set, and its value.
func otlpEndpoint() (name, value string) {
	for _, v := range otlpEndpointVars {
		if s := os.Getenv(v); s != "" {
			return v, s
		}
	}
	return "", ""
}

func newTelemetry(ctx context.Context) (*telemetry, error) {
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL,
		semconv.ServiceName("proxybreaker-example")))
	if err != nil {
		// A conflict of schema URLs between the SDK's default resource and ours: use ours.
		res = resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("proxybreaker-example"))
	}
	tel := &telemetry{registry: prometheus.NewRegistry()}

	if name, endpoint := otlpEndpoint(); name != "" {
		// otlptracehttp reads every OTEL_EXPORTER_OTLP_* variable itself: endpoint, headers,
		// timeout, TLS and compression.
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter (%s=%s): %w", name, endpoint, err)
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		tel.tracerProvider = tp
		tel.exporting = fmt.Sprintf("OTLP/HTTP, %s=%s", name, endpoint)
		tel.shutdown = append(tel.shutdown, tp.Shutdown)
	} else {
		tel.tracerProvider = tracenoop.NewTracerProvider()
	}

	// UnderscoreEscapingWithSuffixes is the exporter's default today; it is named so that a
	// change of default cannot rename the series the dashboard queries.
	exporter, err := otelprom.New(
		otelprom.WithRegisterer(tel.registry),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
	)
	if err != nil {
		return nil, fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter), sdkmetric.WithResource(res))
	tel.meterProvider = mp
	tel.shutdown = append(tel.shutdown, mp.Shutdown)
	return tel, nil
}

// close flushes and stops the providers.
func (t *telemetry) close(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}
