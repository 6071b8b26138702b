package otelbreaker

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Defaults for the options.
const (
	// DefaultMaxSeries is the default cap of WithMaxSeries.
	DefaultMaxSeries = 1000
	// DefaultPort is the server.port reported for an origin key that carries no port (see
	// WithDefaultPort).
	DefaultPort = 443
)

// OverflowLabel replaces the exit label and the origin of counter and histogram measurements, and
// of the spans and span events of the same events, once WithMaxSeries distinct (exit, origin)
// pairs have been seen.
const OverflowLabel = "_other"

// Option configures an Observer. Options are built by the With functions.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

type config struct {
	tp          trace.TracerProvider // nil: otel.GetTracerProvider() at New
	mp          metric.MeterProvider // nil: otel.GetMeterProvider() at New
	originLabel func(string) string  // nil: the origin key itself
	maxSeries   int
	defaultPort int
}

func newConfig(opts []Option) (*config, error) {
	c := &config{maxSeries: DefaultMaxSeries, defaultPort: DefaultPort}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// WithTracerProvider sets the provider of the attempt spans' tracer. Default: the global provider
// (otel.GetTracerProvider) when New is called, which follows a later otel.SetTracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) error {
		if tp == nil {
			return fmt.Errorf("otelbreaker: WithTracerProvider: nil provider")
		}
		c.tp = tp
		return nil
	})
}

// WithMeterProvider sets the provider of the instruments' meter. Default: the global provider
// (otel.GetMeterProvider) when New is called, which follows a later otel.SetMeterProvider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) error {
		if mp == nil {
			return fmt.Errorf("otelbreaker: WithMeterProvider: nil provider")
		}
		c.mp = mp
		return nil
	})
}

// WithOriginLabel sets how an origin key becomes the value of the proxybreaker.origin attribute
// (AttrOrigin), to bound the cardinality of metrics: map the long tail of origins to a few buckets
// ("other", a site's category), or return "" to leave the attribute out. f must be cheap, safe for
// concurrent use and deterministic; it runs on the request path. Series that f merges are merged:
// counters add up, and the breaker-state gauge reports the worst state among them (OPEN over
// HALF_OPEN over CLOSED) and the soonest probe. Spans and span events carry the same value under
// the same key as the metrics, so that one origin label selects both, and the origin key itself
// under proxybreaker.origin.key (AttrOriginKey), which no metric carries. Default: the origin key.
func WithOriginLabel(f func(origin string) string) Option {
	return optionFunc(func(c *config) error {
		if f == nil {
			return fmt.Errorf("otelbreaker: WithOriginLabel: nil func")
		}
		c.originLabel = f
		return nil
	})
}

// WithoutOriginLabel leaves the proxybreaker.origin attribute out of every metric, span and span
// event: series are per exit only, and spans name the origin by proxybreaker.origin.key and
// server.address. It is shorthand for WithOriginLabel returning "".
func WithoutOriginLabel() Option {
	return WithOriginLabel(func(string) string { return "" })
}

// WithMaxSeries caps cardinality at n. Counters and histograms accept at most n distinct
// (exit label, origin label) pairs; measurements of any later pair are recorded with both set to
// OverflowLabel (the first n pairs keep their own series for the observer's lifetime), and so are
// the proxybreaker.exit.label and proxybreaker.origin attributes of its spans and span events,
// which keep the exit's label and the origin key under proxybreaker.exit.key and
// proxybreaker.origin.key. Each breaker
// gauge reports at most n series per collection: the breakers out of CLOSED first (parked, OPEN,
// HALF_OPEN), then CLOSED ones, each group by scope, exit and origin. Default DefaultMaxSeries;
// zero means the default; negative means no cap.
func WithMaxSeries(n int) Option {
	return optionFunc(func(c *config) error {
		switch {
		case n == 0:
			n = DefaultMaxSeries
		case n < 0:
			n = -1
		}
		c.maxSeries = n
		return nil
	})
}

// WithDefaultPort sets the server.port span attribute for origin keys that carry no port. The
// transport's origin key drops the scheme's default port and the scheme with it (http://shop and
// https://shop are both "shop"), so the port is not known; scrapers mostly fetch HTTPS, hence the
// default DefaultPort (443). Zero leaves server.port out for such origins.
func WithDefaultPort(port int) Option {
	return optionFunc(func(c *config) error {
		if port < 0 || port > 65535 {
			return fmt.Errorf("otelbreaker: WithDefaultPort(%d): must be in [0, 65535]", port)
		}
		c.defaultPort = port
		return nil
	})
}
