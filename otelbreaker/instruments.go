package otelbreaker

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Metric names. docs/metrics.md lists each with its unit, attributes and the name Prometheus
// gives it.
const (
	MetricBreakerState  = "proxybreaker.breaker.state"
	MetricTimeToProbe   = "proxybreaker.breaker.time_to_probe"
	MetricBreakers      = "proxybreaker.breakers"
	MetricParkedExits   = "proxybreaker.exits.parked"
	MetricTrips         = "proxybreaker.breaker.trips"
	MetricGuardTrips    = "proxybreaker.origin_guard.trips"
	MetricAttempts      = "proxybreaker.attempts"
	MetricAttemptTime   = "proxybreaker.attempt.duration"
	MetricRefusals      = "proxybreaker.refusals"
	MetricRateLimitWait = "proxybreaker.ratelimit.wait"
	MetricBytes         = "proxybreaker.bytes"
	MetricSpend         = "proxybreaker.spend"
)

// State values of the proxybreaker.breaker.state gauge.
const (
	StateClosed   = 0
	StateOpen     = 1
	StateHalfOpen = 2
)

// attemptBuckets are the attempt-duration histogram's bucket boundaries, in seconds: the
// semantic conventions' HTTP client buckets, extended to the transport's default header timeout
// (15 s) and beyond.
var attemptBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 15, 30, 60}

// waitBuckets are the rate-limit wait histogram's bucket boundaries, in seconds.
var waitBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

type instruments struct {
	state       metric.Int64ObservableGauge
	timeToProbe metric.Float64ObservableGauge
	breakers    metric.Int64ObservableGauge
	parked      metric.Int64ObservableGauge
	trips       metric.Int64Counter
	guardTrips  metric.Int64Counter
	attempts    metric.Int64Counter
	duration    metric.Float64Histogram
	refusals    metric.Int64Counter
	wait        metric.Float64Histogram
	bytes       metric.Int64Counter
	spend       metric.Float64Counter
}

// newInstruments creates every instrument on m. An instrument the meter cannot create is reported
// to otel.Handle and replaced by a no-op one: telemetry trouble never stops the transport.
func newInstruments(m metric.Meter) *instruments {
	var in instruments
	var err error
	handle := func() {
		if err != nil {
			otel.Handle(err)
			err = nil
		}
	}
	in.state, err = m.Int64ObservableGauge(MetricBreakerState, metric.WithUnit("{state}"),
		metric.WithDescription("State of each breaker: 0 closed, 1 open, 2 half-open. Pairs the pool holds no breaker for are closed and not reported."))
	handle()
	in.timeToProbe, err = m.Float64ObservableGauge(MetricTimeToProbe, metric.WithUnit("s"),
		metric.WithDescription("Seconds until an open breaker admits a probe; 0 while half-open. Closed breakers are not reported."))
	handle()
	in.breakers, err = m.Int64ObservableGauge(MetricBreakers, metric.WithUnit("{breaker}"),
		metric.WithDescription("Breakers the pool holds, by scope and state."))
	handle()
	in.parked, err = m.Int64ObservableGauge(MetricParkedExits, metric.WithUnit("{exit}"),
		metric.WithDescription("Exits parked by a permanent failure (proxy auth rejected, gateway refused, proxy DNS)."))
	handle()
	in.trips, err = m.Int64Counter(MetricTrips, metric.WithUnit("{trip}"),
		metric.WithDescription("Pair and exit breakers that opened: tripped, parked, or a failed probe."))
	handle()
	in.guardTrips, err = m.Int64Counter(MetricGuardTrips, metric.WithUnit("{trip}"),
		metric.WithDescription("Origin guards that opened: the origin failed through most exits at once."))
	handle()
	in.attempts, err = m.Int64Counter(MetricAttempts, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts through an exit, by verdict."))
	handle()
	in.duration, err = m.Float64Histogram(MetricAttemptTime, metric.WithUnit("s"),
		metric.WithDescription("Duration of attempts through an exit, until their verdict: the headers for failures, the end of the body for successes."),
		metric.WithExplicitBucketBoundaries(attemptBuckets...))
	handle()
	in.refusals, err = m.Int64Counter(MetricRefusals, metric.WithUnit("{request}"),
		metric.WithDescription("Requests refused without an attempt: no healthy exit, or the origin is unhealthy."))
	handle()
	in.wait, err = m.Float64Histogram(MetricRateLimitWait, metric.WithUnit("s"),
		metric.WithDescription("Time requests waited for a rate-limit token."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	handle()
	in.bytes, err = m.Int64Counter(MetricBytes, metric.WithUnit("By"),
		metric.WithDescription("Bytes attempts moved to (transmit) and from (receive) the proxy, as counted on the exit's connections: headers, bodies, and CONNECT, SOCKS5 and TLS."))
	handle()
	in.spend, err = m.Float64Counter(MetricSpend, metric.WithUnit("{unit}"),
		metric.WithDescription("What attempts cost, in the pool's currency-free cost unit: their bytes at the exit's price per GB plus its price per request."))
	handle()

	var nm noop.Meter
	if in.state == nil {
		in.state, _ = nm.Int64ObservableGauge(MetricBreakerState)
	}
	if in.timeToProbe == nil {
		in.timeToProbe, _ = nm.Float64ObservableGauge(MetricTimeToProbe)
	}
	if in.breakers == nil {
		in.breakers, _ = nm.Int64ObservableGauge(MetricBreakers)
	}
	if in.parked == nil {
		in.parked, _ = nm.Int64ObservableGauge(MetricParkedExits)
	}
	if in.trips == nil {
		in.trips, _ = nm.Int64Counter(MetricTrips)
	}
	if in.guardTrips == nil {
		in.guardTrips, _ = nm.Int64Counter(MetricGuardTrips)
	}
	if in.attempts == nil {
		in.attempts, _ = nm.Int64Counter(MetricAttempts)
	}
	if in.duration == nil {
		in.duration, _ = nm.Float64Histogram(MetricAttemptTime)
	}
	if in.refusals == nil {
		in.refusals, _ = nm.Int64Counter(MetricRefusals)
	}
	if in.wait == nil {
		in.wait, _ = nm.Float64Histogram(MetricRateLimitWait)
	}
	if in.bytes == nil {
		in.bytes, _ = nm.Int64Counter(MetricBytes)
	}
	if in.spend == nil {
		in.spend, _ = nm.Float64Counter(MetricSpend)
	}
	return &in
}
