package proxyd

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/transport"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Telemetry is the daemon's metrics pipeline: an OTel meter provider read by the Prometheus
// exporter into a registry of its own, the otelbreaker observer on it (attempts, trips, breaker
// gauges), and the handler that serves the registry as Prometheus text.
type Telemetry struct {
	Registry *prometheus.Registry
	Provider *sdkmetric.MeterProvider
	Observer *otelbreaker.Observer
	Handler  http.Handler
}

// NewTelemetry builds the pipeline. Give Observer to New (TransportOption) and call
// Telemetry.Register once the server exists.
func NewTelemetry() (*Telemetry, error) {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes))
	if err != nil {
		return nil, fmt.Errorf("proxyd: prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	obs, err := otelbreaker.New(otelbreaker.WithMeterProvider(mp), otelbreaker.WithTracerProvider(tracenoop.NewTracerProvider()))
	if err != nil {
		return nil, err
	}
	return &Telemetry{Registry: reg, Provider: mp, Observer: obs, Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}, nil
}

// TransportOption is the option that plugs the otelbreaker observer into the server's transport
// (and, through it, into the pool).
func (t *Telemetry) TransportOption() transport.Option { return transport.WithObserver(t.Observer) }

// Register adds the daemon's own instruments (Server.RegisterMetrics).
func (t *Telemetry) Register(s *Server) error {
	_, err := s.RegisterMetrics(t.Provider.Meter("github.com/proxybreaker/proxybreaker/proxyd"))
	return err
}

// Shutdown stops the meter provider.
func (t *Telemetry) Shutdown(ctx context.Context) error { return t.Provider.Shutdown(ctx) }
