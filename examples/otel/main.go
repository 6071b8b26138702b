// Command otel runs proxybreaker with OpenTelemetry: traces over OTLP, metrics on a Prometheus
// endpoint, and the operator's status page, all self-contained on 127.0.0.1. It starts local
// forward proxies (two healthy, one that rejects its password, one where nothing listens) and three
// small sites (one answers, one rate-limits every exit with 429 Retry-After, one is down with
// 503), and sends requests through them until interrupted, so the breakers have something to do.
//
//	worker → otelhttp client span → transport.Transport → Pool.Pick → proxytest proxy → httptest origin
//	                                     │ otelbreaker: attempt spans, counters, histograms
//	Prometheus ── GET /metrics ──→ OTel Prometheus exporter ← breaker gauges (Pool.Snapshot)
//	browser ──── GET /status ───→ statuspage.Handler ← Pool.Snapshot
//
// Traces are exported over OTLP/HTTP only when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; every other OTEL_EXPORTER_OTLP_* variable applies as
// usual. With neither set, nothing is exported anywhere. Metrics are served for a Prometheus to
// scrape; dashboard.json beside this file is a Grafana dashboard over them, and docs/metrics.md
// lists every metric and the name Prometheus gives it.
//
//	go run ./examples/otel                       # metrics on http://127.0.0.1:9464/metrics
//	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 go run ./examples/otel -duration 2m
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/proxybreaker/proxybreaker/examples/internal/cli"
)

const about = `Starts proxies and small sites on 127.0.0.1 (nothing leaves the machine) and sends requests
through proxybreaker with OpenTelemetry until interrupted: Prometheus metrics and the operator's
status page are served on -listen, and traces go over OTLP/HTTP only when
OTEL_EXPORTER_OTLP_ENDPOINT is set. dashboard.json beside the example is a Grafana dashboard over
the metrics.`

func main() {
	var cfg config
	cli.Main(command(&cfg), func(ctx context.Context) error { return run(ctx, cfg, os.Stdout) })
}

// command is the example's command line, its flags bound to cfg.
func command(cfg *config) *cli.Command { return cli.New("otel", about, cfg.flags) }

// run starts the example, prints where to look, sends traffic until ctx is done or cfg.Duration
// has passed, printing a status line every 5 s, and shuts everything down.
func run(ctx context.Context, cfg config, out io.Writer) error {
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	a, err := start(ctx, cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "metrics:     http://%s/metrics\n", a.addr())
	fmt.Fprintf(out, "status page: http://%s/status\n", a.addr())
	if a.tel.exporting != "" {
		fmt.Fprintf(out, "traces:      %s\n", a.tel.exporting)
	} else {
		fmt.Fprintln(out, "traces:      not exported (set OTEL_EXPORTER_OTLP_ENDPOINT, e.g. http://127.0.0.1:4318, to send them over OTLP/HTTP)")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.traffic(ctx)
	}()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
loop:
	for {
		select {
		case <-done:
			break loop
		case <-tick.C:
			fmt.Fprintln(out, a.status())
		}
	}
	fmt.Fprintln(out, a.status())
	return a.close()
}
