package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/examples/internal/world"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
	"github.com/proxybreaker/proxybreaker/transport"
)

// config is what the flags set.
type config struct {
	Listen   string        // host:port of the metrics and status server; a loopback address
	Workers  int           // concurrent request loops
	Interval time.Duration // pause between one worker's requests
	Duration time.Duration // stop after this long; 0 runs until interrupted
}

// flags defines the flags that set cfg.
func (cfg *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.Listen, "listen", "127.0.0.1:9464", "where to serve /metrics and /status (a loopback address)")
	fs.IntVar(&cfg.Workers, "workers", 4, "concurrent request loops")
	fs.DurationVar(&cfg.Interval, "interval", 200*time.Millisecond, "pause between one worker's requests")
	fs.DurationVar(&cfg.Duration, "duration", 0, "stop after this long (0: run until interrupted)")
}

// app is the running example: the world, the telemetry, the transport and the HTTP server.
type app struct {
	cfg    config
	world  *world.World
	tel    *telemetry
	tr     *transport.Transport
	obs    *otelbreaker.Observer
	client *http.Client
	ln     net.Listener
	srv    *http.Server
	served chan error

	sent, ok, failed, refused atomic.Int64
}

// checkLoopback refuses a listen address that is not on the loopback interface: the example
// shows its metrics and status page to this machine only.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("-listen %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("-listen %q: the example serves on a loopback address only (127.0.0.1, ::1)", addr)
	}
	return nil
}

// start builds everything and starts serving /metrics and /status; traffic starts with traffic.
func start(ctx context.Context, cfg config) (a *app, err error) {
	if err := checkLoopback(cfg.Listen); err != nil {
		return nil, err
	}
	if cfg.Workers < 1 {
		return nil, fmt.Errorf("-workers %d: must be at least 1", cfg.Workers)
	}
	a = &app{cfg: cfg, served: make(chan error, 1)}
	defer func() {
		if err != nil {
			a.close()
		}
	}()
	if a.world, err = startWorld(); err != nil {
		return nil, err
	}
	if a.tel, err = newTelemetry(ctx); err != nil {
		return nil, err
	}
	a.obs, err = otelbreaker.New(
		otelbreaker.WithTracerProvider(a.tel.tracerProvider),
		otelbreaker.WithMeterProvider(a.tel.meterProvider),
		// Origins are 127.0.0.1:PORT here: label them by name instead.
		otelbreaker.WithOriginLabel(originLabel(a.world)),
	)
	if err != nil {
		return nil, err
	}
	p, err := pool.New(
		pool.WithExits(a.world.Exits...),
		// Two exits carry traffic here; let two failing at once trip an origin's guard.
		pool.WithOriginGuard(pool.OriginGuardSettings{MinExits: 2}),
		// Priced, so that the dashboard's spend panel has something to show (README, Cost and budgets).
		pool.WithTierCost(0, pool.Cost{PerGB: 3, PerRequest: 0.0001}),
	)
	if err != nil {
		return nil, err
	}
	// WithObserver plugs otelbreaker in whole: attempt spans, the pool's events, and the breaker
	// gauges, bound to p until a.tr.Close.
	a.tr, err = transport.New(p,
		transport.WithObserver(a.obs),
		transport.WithHeaderTimeout(2*time.Second),
	)
	if err != nil {
		return nil, err
	}
	a.client = &http.Client{
		// otelhttp makes the client span each attempt span nests under. Its own HTTP metrics are
		// left out, so the endpoint shows proxybreaker's alone.
		Transport: otelhttp.NewTransport(a.tr,
			otelhttp.WithTracerProvider(a.tel.tracerProvider), otelhttp.WithMeterProvider(metricnoop.NewMeterProvider())),
		Timeout: 10 * time.Second,
	}

	page, err := statuspage.New(p, statuspage.WithTitle("proxybreaker example"), statuspage.WithRefresh(5*time.Second))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(a.tel.registry, promhttp.HandlerOpts{}))
	mux.Handle("GET /status", page)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, `<!doctype html><title>proxybreaker example</title><h1>proxybreaker example</h1>
<ul><li><a href="/status">breaker status</a> (<a href="/status?format=json">JSON</a>)</li><li><a href="/metrics">Prometheus metrics</a></li></ul>`)
	})
	if a.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, err
	}
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { a.served <- a.srv.Serve(a.ln) }()
	return a, nil
}

// addr is where /metrics and /status are served.
func (a *app) addr() string { return a.ln.Addr().String() }

// traffic runs the workers until ctx is done. Each sends GETs in turn to shop, busy, shop and
// flaky, pausing cfg.Interval between requests.
func (a *app) traffic(ctx context.Context) {
	pages := []string{pageURL(a.world, originShop), pageURL(a.world, originBusy), pageURL(a.world, originShop), pageURL(a.world, originFlaky)}
	var wg sync.WaitGroup
	for w := range a.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pause := time.NewTimer(0)
			defer pause.Stop()
			for i := w; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-pause.C:
				}
				a.get(ctx, pages[i%len(pages)])
				pause.Reset(a.cfg.Interval)
			}
		}()
	}
	wg.Wait()
}

func (a *app) get(ctx context.Context, url string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return
	}
	a.sent.Add(1)
	resp, err := a.client.Do(req)
	switch {
	case errors.Is(err, pool.ErrNoHealthyExit) || errors.Is(err, pool.ErrOriginUnhealthy):
		a.refused.Add(1)
	case err != nil:
		a.failed.Add(1)
	default:
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 400 {
			a.ok.Add(1)
		} else {
			a.failed.Add(1)
		}
	}
}

// status is one line about the traffic and the breakers.
func (a *app) status() string {
	s := a.tr.Pool().Snapshot()
	var parked, openPairs, down []string
	for _, e := range s.Exits {
		if e.Breaker.Parked {
			parked = append(parked, e.Exit)
		}
	}
	for _, p := range s.Pairs {
		if p.Breaker.State != breaker.Closed {
			openPairs = append(openPairs, p.Exit+"×"+a.world.SiteName(p.Origin)+" "+p.Breaker.State.String())
		}
	}
	for _, o := range s.Origins {
		if o.Breaker.State != breaker.Closed {
			down = append(down, a.world.SiteName(o.Origin)+" "+o.Breaker.State.String())
		}
	}
	return fmt.Sprintf("sent %d: ok %d, failed %d, refused %d | parked: %s | pairs out: %s | origins out: %s",
		a.sent.Load(), a.ok.Load(), a.failed.Load(), a.refused.Load(),
		list(parked), list(openPairs), list(down))
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// close stops the server, the transport (which unbinds the observer's gauges), the telemetry and
// the world.
func (a *app) close() error {
	var errs []error
	if a.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, a.srv.Shutdown(ctx))
		cancel()
		if err := <-a.served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	} else if a.ln != nil {
		a.ln.Close()
	}
	if a.tr != nil {
		errs = append(errs, a.tr.Close())
	}
	if a.tel != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, a.tel.close(ctx))
		cancel()
	}
	if a.world != nil {
		errs = append(errs, a.world.Close())
	}
	return errors.Join(errs...)
}
