// Package otelbreaker turns the transport's and the pool's events into OpenTelemetry spans and
// metrics. It uses only the OTel API; the application installs an SDK (or not: the globals are
// no-ops until it does).
//
//	http.Client → otelhttp.Transport (client span) → transport.Transport → Pool.Pick
//	            → Observer.AttemptStarted: span "proxybreaker.attempt", a child of the request's span
//	            → base http.Transport → Classifier → Lease.Report → breakers
//	            → Observer.StateChanged (pool.Observer: trips)
//	            → Observer.AttemptFinished: verdict attributes, transition events, span ended,
//	              attempt counter, duration histogram, bytes counter (AttemptResult.Bytes)
//	a connection closes with bytes no attempt claimed → Observer.ConnectionTraffic
//	              (pool.TrafficObserver): bytes and spend counters, origin "(connection)"
//	Pool.Pick refused or throttled → Observer.Refused, Observer.Throttled (pool.Observer)
//	Prometheus/OTLP reader → callback (Observer.Bind) → Pool.Snapshot → breaker state gauges
//
// Plug it in with one call: an Observer is a transport.Observer, a pool.Observer and a
// pool.Binder, so transport.New adds it to the pool's observers and binds the gauges to the pool,
// and Transport.Close takes both off again.
//
//	obs, err := otelbreaker.New()               // global providers; see the With options
//	p, err := pool.New(pool.WithExits(exits...))
//	tr, err := transport.New(p, transport.WithObserver(obs))
//	defer tr.Close()                            // unbinds the gauges
//
// Without a transport (a crawler that picks and reports on the pool itself), p.Observe(obs) plugs
// in the pool's half, events and gauges; the func it returns unplugs it.
//
// # Spans
//
// One span per attempt (not per request: a request refused before any attempt has none; a retry
// layer above makes one per try), named SpanName, of kind Internal, started as a child of the span
// in the request's context, so it nests under otelhttp's client span when the transport is wrapped
// by otelhttp.NewTransport. Its start and end are the transport's instants (AttemptInfo.At, plus
// the latency), read from the pool's clock. Attributes are listed in docs/metrics.md: the exit's
// label (see Labels) and tier, the origin's label and key, server.address and server.port, the
// pair's and the exit's breaker states before and after, the verdict's outcome, class, scope and
// detector, the Retry-After in seconds, http.response.status_code and error.type. The span's status is Error when the verdict
// blames the exit (transient or permanent) or no response arrived; its description is the verdict
// class, never an error message: error messages may name hosts, and no text that could hold a
// credential is ever exported.
//
// Breaker transitions arrive from the pool without a context. Each one is counted (trip counters)
// and, when the attempt whose verdict caused it can be identified — the transition is for that
// attempt's pair, exit or origin and happened at the instant the attempt was admitted (a probe
// slot: OPEN → HALF_OPEN) or finished (a trip, a close) — it is also recorded as an event named
// EventTransition on that attempt's span. Transitions no attempt claims (a probe lease expiring,
// seen by whichever request looked next) are counted only. When two attempts on the same breaker
// finish within the same millisecond the event may land on either span.
//
// A request refused without an attempt (no healthy exit, origin unhealthy, a rate limit) adds an
// event named EventRefused to the span in the request's context, if it is recording, and counts a
// refusal. A request a rate limit held back adds an event named EventThrottled there too.
//
// # Metrics
//
// The instruments are listed, with units and attributes, in docs/metrics.md. The breaker gauges are
// observed from the bound pool's Snapshot in a callback, so they cost nothing between collections;
// they report nothing while the Observer is not bound. Counters and histograms are recorded on the
// request path from cached attribute sets.
//
// # Labels
//
// Spans, span events and metrics label an event alike: proxybreaker.exit.label and
// proxybreaker.origin hold the same values on the span of an attempt as on the counters and
// histograms it is recorded in (the origin as WithOriginLabel maps it, both as WithMaxSeries caps
// them), so that one label selects the traces behind a series. Spans alone also carry the exit's
// own label and the unmapped origin key, as proxybreaker.exit.key and proxybreaker.origin.key: a
// metric label per origin key would have no cardinality bound. No attribute key, with dots turned
// into underscores, is the name of an instrument, so Prometheus never shows a label and a metric
// of one name.
//
// Cardinality: every series is keyed by exit label and origin. WithOriginLabel maps origins to
// coarser buckets (or drops the label), and WithMaxSeries caps the number of distinct (exit, origin)
// label pairs counters and histograms use (later pairs are recorded as OverflowLabel) and the number
// of series each breaker gauge reports (breakers out of CLOSED first).
//
// # Errors
//
// Instrument errors go to otel.Handle; they never fail or delay a request. No method of Observer
// blocks, and all are safe for concurrent use.
package otelbreaker
