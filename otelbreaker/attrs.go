package otelbreaker

import (
	"net"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Attribute keys of spans, span events and metrics. docs/metrics.md says which carries which.
// Besides these, spans use the semantic-convention keys server.address, server.port,
// http.request.method, http.response.status_code and error.type. No key, with its dots turned
// into underscores as Prometheus does, is the name of an instrument.
const (
	// AttrExit is the exit's label (pool.Exit.Label), never its URL or credentials, as metrics
	// carry it: OverflowLabel for a pair past WithMaxSeries. Spans and span events carry the same
	// value as the metrics of the same event, so that one query selects both.
	AttrExit = attribute.Key("proxybreaker.exit.label")
	// AttrExitKey is the exit's own label, on spans and span events only: it differs from AttrExit
	// once WithMaxSeries has replaced the latter by OverflowLabel.
	AttrExitKey = attribute.Key("proxybreaker.exit.key")
	// AttrTier is the exit's tier.
	AttrTier = attribute.Key("proxybreaker.exit.tier")
	// AttrOrigin is the origin's label: the origin key as WithOriginLabel maps it (the key itself
	// by default), OverflowLabel for a pair past WithMaxSeries. Spans, span events and metrics
	// carry the same value for the same event; where the mapping returns "", none carries it.
	AttrOrigin = attribute.Key("proxybreaker.origin")
	// AttrOriginKey is the origin key breakers are kept per (transport.OriginFunc), unmapped, on
	// spans and span events only: a metric label per origin key would have no cardinality bound.
	AttrOriginKey = attribute.Key("proxybreaker.origin.key")
	// AttrProbe is true for an attempt that holds a HALF_OPEN probe slot.
	AttrProbe = attribute.Key("proxybreaker.attempt.probe")
	// AttrDryRun and AttrWouldRefuse are set on attempts through a dry-run pool (pool.WithDryRun).
	AttrDryRun      = attribute.Key("proxybreaker.attempt.dry_run")
	AttrWouldRefuse = attribute.Key("proxybreaker.attempt.would_refuse")
	// AttrPairStateBefore … AttrExitStateAfter are breaker states ("closed", "open", "half_open"):
	// the pair's and the exit's, when the exit was picked and once the verdict was applied.
	AttrPairStateBefore = attribute.Key("proxybreaker.pair.state_before")
	AttrPairStateAfter  = attribute.Key("proxybreaker.pair.state_after")
	AttrExitStateBefore = attribute.Key("proxybreaker.exit.state_before")
	AttrExitStateAfter  = attribute.Key("proxybreaker.exit.state_after")
	// AttrOutcome is the verdict's outcome: success, transient, permanent or neutral.
	AttrOutcome = attribute.Key("proxybreaker.verdict.outcome")
	// AttrClass is the verdict's class (pool.Class): ok, timeout, rate_limited, proxy_auth…
	AttrClass = attribute.Key("proxybreaker.verdict.class")
	// AttrVerdictScope is the breaker the verdict is for: pair, exit or origin.
	AttrVerdictScope = attribute.Key("proxybreaker.verdict.scope")
	// AttrSoft is true for a verdict that counts half (502/503/504 from the origin).
	AttrSoft = attribute.Key("proxybreaker.verdict.soft")
	// AttrDetector names the soft-block detector that matched a challenge page.
	AttrDetector = attribute.Key("proxybreaker.verdict.detector")
	// AttrRetryAfter is the origin's Retry-After, in seconds.
	AttrRetryAfter = attribute.Key("proxybreaker.verdict.retry_after")
	// AttrScope is the scope of a breaker: pair, exit or origin.
	AttrScope = attribute.Key("proxybreaker.breaker.scope")
	// AttrState is a breaker state, on the proxybreaker.breakers gauge. It is not
	// "proxybreaker.breaker.state": that is the name of the state gauge (MetricBreakerState), and
	// Prometheus would show a label and a metric of one name.
	AttrState = attribute.Key("proxybreaker.state")
	// AttrFrom and AttrTo are the states of a transition.
	AttrFrom = attribute.Key("proxybreaker.breaker.from")
	AttrTo   = attribute.Key("proxybreaker.breaker.to")
	// AttrCause says why a breaker changed state (breaker.Cause): failures, retry_after, permanent,
	// cooldown, probe_ok, probe_failed, lease_expired.
	AttrCause = attribute.Key("proxybreaker.breaker.cause")
	// AttrReason is the failure class behind a trip.
	AttrReason = attribute.Key("proxybreaker.breaker.reason")
	// AttrTrips is a breaker's trips so far (not "proxybreaker.breaker.trips": that is the trip
	// counter, MetricTrips); AttrLevel its backoff level; AttrParked whether a permanent failure
	// parked it; AttrNextProbeIn the seconds until an OPEN breaker admits a probe.
	AttrTrips       = attribute.Key("proxybreaker.breaker.trip_count")
	AttrLevel       = attribute.Key("proxybreaker.breaker.level")
	AttrParked      = attribute.Key("proxybreaker.breaker.parked")
	AttrNextProbeIn = attribute.Key("proxybreaker.breaker.next_probe_in")
	// AttrRefusal says why a request was refused: no_healthy_exit, origin_unhealthy or throttled.
	AttrRefusal = attribute.Key("proxybreaker.refusal.reason")
	// AttrRetryIn is the seconds a refused request should wait before it is tried again.
	AttrRetryIn = attribute.Key("proxybreaker.refusal.retry_in")
	// AttrLimitScope names the rate-limit bucket that held a request back: exit, pair or origin.
	AttrLimitScope = attribute.Key("proxybreaker.ratelimit.scope")
	// AttrLimitRefused is true when a rate limit refused the request instead of delaying it.
	AttrLimitRefused = attribute.Key("proxybreaker.ratelimit.refused")
	// AttrWaited is the seconds a request waited for a rate-limit token.
	AttrWaited = attribute.Key("proxybreaker.ratelimit.waited")
)

// The refusal reasons.
const (
	RefusalNoHealthyExit   = "no_healthy_exit"
	RefusalOriginUnhealthy = "origin_unhealthy"
	RefusalThrottled       = "throttled"    // rate limits held the request back and it did not go
	RefusalBudgetSpent     = "budget_spent" // the tiers that could serve it spent their budgets
	RefusalOther           = "other"
)

// Semantic-convention keys the spans use.
var (
	keyServerAddress = semconv.ServerAddressKey
	keyServerPort    = semconv.ServerPortKey
	keyMethod        = semconv.HTTPRequestMethodKey
	keyStatus        = semconv.HTTPResponseStatusCodeKey
	keyErrorType     = semconv.ErrorTypeKey
)

// splitOrigin splits an origin key into host and port. The key is host or host:port, with IPv6
// hosts in brackets; a key without a port gets defaultPort (0: none). It does not allocate.
func splitOrigin(origin string, defaultPort int) (host string, port int) {
	if h, p, err := net.SplitHostPort(origin); err == nil {
		if n, err := strconv.Atoi(p); err == nil && n > 0 && n <= 65535 {
			return h, n
		}
		return h, defaultPort
	}
	return strings.TrimSuffix(strings.TrimPrefix(origin, "["), "]"), defaultPort
}

// labeler maps (exit, origin) to the label values metrics use, applies the series cap, and caches
// the attribute sets of counter and histogram measurements so the request path builds each set
// once: attribute.NewSet sorts and allocates, and a cached metric.MeasurementOption is reused for
// every later measurement of the same series.
type labeler struct {
	originLabel func(string) string
	max         int // -1: no cap

	mu    sync.RWMutex
	seen  map[pairKey]struct{}
	cache map[optKey]*measureOpts
}

type pairKey struct{ exit, origin string }

// optKey names one cached attribute set: an instrument kind and up to four values.
type optKey struct {
	kind       uint8
	exit       string
	origin     string
	a, b, c, d string
}

// The kinds of cached attribute sets.
const (
	kindAttempt uint8 = iota
	kindDuration
	kindTrip
	kindGuardTrip
	kindRefusal
	kindWait
	kindBytes
	kindSpend
)

func newLabeler(originLabel func(string) string, max int) *labeler {
	return &labeler{
		originLabel: originLabel, max: max,
		seen: make(map[pairKey]struct{}), cache: make(map[optKey]*measureOpts),
	}
}

// origin returns the metric label of an origin key.
func (l *labeler) origin(origin string) string {
	if l.originLabel == nil || origin == "" {
		return origin
	}
	return l.originLabel(origin)
}

// labels returns the metric labels of (exit, origin key): the origin mapped by WithOriginLabel,
// and both replaced by OverflowLabel when the pair is new and the cap is reached.
func (l *labeler) labels(exit, origin string) (string, string) {
	return l.pairLabels(exit, l.origin(origin))
}

// pairLabels is labels for an origin label already mapped (or, pool.ConnectionOrigin, not one to map).
func (l *labeler) pairLabels(exit, origin string) (string, string) {
	if l.max < 0 {
		return exit, origin
	}
	k := pairKey{exit, origin}
	l.mu.RLock()
	_, ok := l.seen[k]
	n := len(l.seen)
	l.mu.RUnlock()
	if ok {
		return exit, origin
	}
	if n >= l.max {
		return OverflowLabel, OverflowLabel
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[k]; ok {
		return exit, origin
	}
	if len(l.seen) >= l.max {
		return OverflowLabel, OverflowLabel
	}
	l.seen[k] = struct{}{}
	return exit, origin
}

// option returns the cached measurement options for k, building them with build on first use.
// Keys are made of capped labels and low-cardinality values, so the cache is bounded too. The
// options are kept as ready-made slices: passing one option to Add or Record would allocate a
// variadic slice per call, since the instrument is an interface.
func (l *labeler) option(k optKey, build func(k optKey) attribute.Set) *measureOpts {
	l.mu.RLock()
	o, ok := l.cache[k]
	l.mu.RUnlock()
	if ok {
		return o
	}
	mo := metric.WithAttributeSet(build(k))
	o = &measureOpts{add: []metric.AddOption{mo}, rec: []metric.RecordOption{mo}}
	l.mu.Lock()
	if prev, ok := l.cache[k]; ok {
		o = prev
	} else {
		l.cache[k] = o
	}
	l.mu.Unlock()
	return o
}

// measureOpts is one attribute set as the options of a counter's Add and a histogram's Record.
type measureOpts struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

// spanAttrs appends to kvs the exit and origin attributes of a span or span event about exit (a
// label, "" for none) and origin (a key, "" for none): under AttrExit and AttrOrigin the values the
// metrics of the same event carry — labels(exit, origin), the call the metrics make — and under
// AttrExitKey and AttrOriginKey the exit's label and the origin key themselves.
func (l *labeler) spanAttrs(kvs []attribute.KeyValue, exit, origin string) []attribute.KeyValue {
	metricExit, metricOrigin := l.labels(exit, origin)
	if exit == "" {
		metricExit = "" // labels says OverflowLabel for both; metrics leave the exit out
	}
	if origin == "" {
		metricOrigin = ""
	}
	kvs = exitOrigin(kvs, metricExit, metricOrigin)
	if exit != "" {
		kvs = append(kvs, AttrExitKey.String(exit))
	}
	if origin != "" {
		kvs = append(kvs, AttrOriginKey.String(origin))
	}
	return kvs
}

// exitOrigin appends the exit and origin attributes to kvs, leaving out empty values.
func exitOrigin(kvs []attribute.KeyValue, exit, origin string) []attribute.KeyValue {
	if exit != "" {
		kvs = append(kvs, AttrExit.String(exit))
	}
	if origin != "" {
		kvs = append(kvs, AttrOrigin.String(origin))
	}
	return kvs
}
