package otelbreaker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// ScopeName is the instrumentation scope of the tracer and the meter: the package's import path.
const ScopeName = "github.com/proxybreaker/proxybreaker/otelbreaker"

// Version is the instrumentation scope's version.
const Version = "0.1.0"

// Names of the span and its events.
const (
	// SpanName names every attempt's span: low-cardinality on purpose; the exit and the origin are
	// attributes.
	SpanName = "proxybreaker.attempt"
	// EventTransition is a breaker's change of state, recorded on the span of the attempt that
	// caused it.
	EventTransition = "proxybreaker.breaker.transition"
	// EventRefused is a request refused without an attempt, recorded on the request's span.
	EventRefused = "proxybreaker.refused"
	// EventThrottled is a request held back by a rate limit, recorded on the span in its context.
	EventThrottled = "proxybreaker.throttled"
)

// Observer records spans and metrics. It is a transport.Observer (one span per attempt, the
// attempts counter and duration histogram), a pool.Observer (trips, refusals, rate-limit waits) and
// a pool.Binder (the breaker gauges read the pool it is bound to), so that one call plugs it in
// whole:
//
//	tr, err := transport.New(p, transport.WithObserver(obs))
//
// transport.New adds it to p's observers (pool.Pool.Observe), which binds the gauges to p first;
// Transport.Close takes it off and unbinds them. An Observer is bound to one pool at a time. It is
// safe for concurrent use; its methods never block and never fail a request.
type Observer struct {
	// transport.NopObserver embeds pool.NopObserver: ExitRemoved, and methods added later.
	transport.NopObserver
	tracer      trace.Tracer
	meter       metric.Meter
	in          *instruments
	lab         *labeler
	maxSeries   int
	defaultPort int
	pending     pendingTransitions

	mu    sync.Mutex // serialises Bind and unbinding
	pool  atomic.Pointer[pool.Pool]
	reg   metric.Registration
	bound uint64 // counts Binds, so that a stale unbind func does nothing
}

var (
	_ transport.Observer   = (*Observer)(nil)
	_ pool.Observer        = (*Observer)(nil)
	_ pool.Binder          = (*Observer)(nil)
	_ pool.TrafficObserver = (*Observer)(nil)
)

// New returns an Observer configured by opts. It creates the tracer and every instrument at once;
// an instrument the meter cannot create is reported to otel.Handle and replaced by a no-op.
func New(opts ...Option) (*Observer, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	tp, mp := c.tp, c.mp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version), metric.WithSchemaURL(semconv.SchemaURL))
	o := &Observer{
		tracer: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version), trace.WithSchemaURL(semconv.SchemaURL)),
		meter:  m,
		in:     newInstruments(m),
		lab:    newLabeler(c.originLabel, c.maxSeries), maxSeries: c.maxSeries, defaultPort: c.defaultPort,
	}
	return o, nil
}

// errBound is returned by a Bind while the Observer is bound to a pool.
var errBound = errors.New("otelbreaker: Bind: already bound to a pool (one pool per Observer; close the transport that bound it first)")

// Bind implements pool.Binder: until unbind is called, the breaker gauges report p's breakers,
// each collection reading p.Snapshot() once. pool.Pool.Observe calls it, and so does transport.New
// for an Observer given to transport.WithObserver; the func Observe returns, or Transport.Close,
// unbinds it. Call Bind yourself only for the gauges without the pool's events.
//
// An Observer is bound to one pool at a time: Bind fails while it is bound, so a second transport
// over the same pool cannot plug the same Observer in twice and count every event twice. unbind
// may be called more than once; an error unregistering the callback goes to otel.Handle.
func (o *Observer) Bind(p *pool.Pool) (unbind func(), err error) {
	if p == nil {
		return nil, errors.New("otelbreaker: Bind: nil pool")
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.reg != nil {
		return nil, errBound
	}
	in := o.in
	o.pool.Store(p)
	reg, err := o.meter.RegisterCallback(o.observe, in.state, in.timeToProbe, in.breakers, in.parked)
	if err != nil {
		o.pool.Store(nil)
		return nil, fmt.Errorf("otelbreaker: Bind: %w", err)
	}
	o.reg = reg
	o.bound++
	gen := o.bound
	var once sync.Once
	return func() { once.Do(func() { o.unbind(gen) }) }, nil
}

// unbind stops the gauges' callback and forgets the pool, if the binding gen is still the current
// one. Spans and counters keep working.
func (o *Observer) unbind(gen uint64) {
	// The callback reads the pool without o.mu: a collection running it may hold the SDK's lock
	// that Unregister takes.
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.reg == nil || o.bound != gen {
		return
	}
	o.pool.Store(nil)
	reg := o.reg
	o.reg = nil
	if err := reg.Unregister(); err != nil {
		otel.Handle(fmt.Errorf("otelbreaker: unbind: %w", err))
	}
}

// attemptCtx is the context an attempt runs with: the one the tracer returned, plus the span under
// a key of our own, so that another observer starting a span after ours cannot hide it.
type attemptCtx struct {
	context.Context
	span trace.Span
	// opts backs the options slice of the tracer's Start, which would otherwise be allocated on
	// its own: the attempt context is allocated anyway.
	opts [2]trace.SpanStartOption
}

// internalKind is allocated once: trace.WithSpanKind boxes its value on every call.
var internalKind = trace.WithSpanKind(trace.SpanKindInternal)

type spanKey struct{}

func (c *attemptCtx) Value(key any) any {
	if key == (spanKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// AttemptStarted starts the attempt's span as a child of the span in ctx.
func (o *Observer) AttemptStarted(ctx context.Context, a transport.AttemptInfo) context.Context {
	ac := &attemptCtx{opts: [2]trace.SpanStartOption{internalKind, trace.WithTimestamp(a.At)}}
	ctx, span := o.tracer.Start(ctx, SpanName, ac.opts[:]...)
	ac.Context, ac.span = ctx, span
	if span.IsRecording() {
		o.startAttributes(span, &a)
		// A probe slot taken while this exit was picked: OPEN → HALF_OPEN at a.At.
		o.pending.claim(&a.LeaseInfo, a.At, 0, true, func(c pool.StateChange) { o.transitionEvent(span, c) })
	}
	return ac
}

func (o *Observer) startAttributes(span trace.Span, a *transport.AttemptInfo) {
	host, port := splitOrigin(a.Origin, o.defaultPort)
	kv := make([]attribute.KeyValue, 0, 14)
	kv = o.lab.spanAttrs(kv, a.Exit.Label(), a.Origin)
	kv = append(kv,
		AttrTier.Int(a.Exit.Tier()),
		keyServerAddress.String(host),
	)
	if port > 0 {
		kv = append(kv, keyServerPort.Int(port))
	}
	if a.Method != "" {
		kv = append(kv, keyMethod.String(a.Method))
	}
	kv = append(kv,
		AttrProbe.Bool(a.Probe),
		AttrPairStateBefore.String(a.PairState.String()),
		AttrExitStateBefore.String(a.ExitState.String()),
	)
	if a.DryRun {
		kv = append(kv, AttrDryRun.Bool(true), AttrWouldRefuse.Bool(a.WouldRefuse))
	}
	span.SetAttributes(kv...)
}

// AttemptFinished records the attempt's verdict: span attributes and events, then the span's end,
// the attempts counter, the duration histogram, and the bytes and spend counters.
func (o *Observer) AttemptFinished(ctx context.Context, r transport.AttemptResult) {
	v := &r.Verdict
	exit, origin := o.lab.labels(r.Exit.Label(), r.Origin)
	outcome := v.Outcome.String()
	o.in.attempts.Add(ctx, 1, o.lab.option(optKey{kind: kindAttempt, exit: exit, origin: origin, a: outcome, b: string(v.Class)}, buildAttempt).add...)
	o.in.duration.Record(ctx, r.Latency.Seconds(), o.lab.option(optKey{kind: kindDuration, exit: exit, origin: origin, a: outcome}, buildDuration).rec...)
	o.traffic(ctx, exit, origin, r.Bytes, r.Spend)

	ac, _ := ctx.Value(spanKey{}).(*attemptCtx)
	if ac == nil || !ac.span.IsRecording() {
		if ac != nil {
			ac.span.End()
		}
		return
	}
	span := ac.span
	end := r.At.Add(r.Latency)
	o.pending.claim(&r.LeaseInfo, end, finishSlack, false, func(c pool.StateChange) { o.transitionEvent(span, c) })
	kv := make([]attribute.KeyValue, 0, 11)
	kv = append(kv,
		AttrPairStateAfter.String(r.PairStateAfter.String()),
		AttrExitStateAfter.String(r.ExitStateAfter.String()),
		AttrOutcome.String(outcome),
		AttrClass.String(string(v.Class)),
		AttrVerdictScope.String(v.Scope.String()),
	)
	if v.Soft {
		kv = append(kv, AttrSoft.Bool(true))
	}
	if v.Detector != "" {
		kv = append(kv, AttrDetector.String(v.Detector))
	}
	if v.RetryAfter > 0 {
		kv = append(kv, AttrRetryAfter.Float64(v.RetryAfter.Seconds()))
	}
	if r.StatusCode > 0 {
		kv = append(kv, keyStatus.Int(r.StatusCode))
	}
	failed := v.Outcome == pool.Transient || v.Outcome == pool.Permanent || r.Err != nil
	if failed {
		kv = append(kv, keyErrorType.String(string(v.Class)))
	}
	span.SetAttributes(kv...)
	if failed {
		// The class, never the error's text: messages may name hosts, and nothing that could
		// hold a credential is exported.
		span.SetStatus(codes.Error, string(v.Class))
	}
	span.End(trace.WithTimestamp(end))
}

// ConnectionTraffic records bytes no attempt claimed (a connection's TLS close, the HTTP/2 frames
// after its last attempt, a tunnel dialled and never used) on the bytes and spend counters, under
// the exit's label and the origin pool.ConnectionOrigin: summed per exit, the bytes counter then
// holds every byte the exit's connections carried, as Snapshot's ExitStatus.Bytes does.
func (o *Observer) ConnectionTraffic(c pool.ConnectionTraffic) {
	exit, origin := o.lab.pairLabels(c.Exit.Label(), pool.ConnectionOrigin)
	o.traffic(context.Background(), exit, origin, c.Bytes, c.Spend)
}

// traffic adds an attempt's or a connection's bytes, each way, and their price to the bytes and
// spend counters of (exit, origin).
func (o *Observer) traffic(ctx context.Context, exit, origin string, b pool.Traffic, spend float64) {
	if b.Sent > 0 {
		o.in.bytes.Add(ctx, b.Sent, o.lab.option(optKey{kind: kindBytes, exit: exit, origin: origin, a: directionTransmit}, buildBytes).add...)
	}
	if b.Received > 0 {
		o.in.bytes.Add(ctx, b.Received, o.lab.option(optKey{kind: kindBytes, exit: exit, origin: origin, a: directionReceive}, buildBytes).add...)
	}
	if spend > 0 {
		o.in.spend.Add(ctx, spend, o.lab.option(optKey{kind: kindSpend, exit: exit, origin: origin}, buildSpend).add...)
	}
}

func buildAttempt(k optKey) attribute.Set {
	kv := exitOrigin(make([]attribute.KeyValue, 0, 4), k.exit, k.origin)
	return attribute.NewSet(append(kv, AttrOutcome.String(k.a), AttrClass.String(k.b))...)
}

// The values of network.io.direction on the bytes counter.
const (
	directionTransmit = "transmit"
	directionReceive  = "receive"
)

func buildBytes(k optKey) attribute.Set {
	kv := exitOrigin(make([]attribute.KeyValue, 0, 3), k.exit, k.origin)
	return attribute.NewSet(append(kv, semconv.NetworkIODirectionKey.String(k.a))...)
}

func buildSpend(k optKey) attribute.Set {
	return attribute.NewSet(exitOrigin(make([]attribute.KeyValue, 0, 2), k.exit, k.origin)...)
}

func buildDuration(k optKey) attribute.Set {
	kv := exitOrigin(make([]attribute.KeyValue, 0, 3), k.exit, k.origin)
	return attribute.NewSet(append(kv, AttrOutcome.String(k.a))...)
}

// transitionEvent records c on span.
func (o *Observer) transitionEvent(span trace.Span, c pool.StateChange) {
	kv := make([]attribute.KeyValue, 0, 13)
	kv = append(kv,
		AttrScope.String(c.Scope.String()),
		AttrFrom.String(c.From.String()),
		AttrTo.String(c.To.String()),
		AttrCause.String(string(c.Cause)),
	)
	exit := ""
	if c.Exit != nil {
		exit = c.Exit.Label()
	}
	kv = o.lab.spanAttrs(kv, exit, c.Origin)
	if c.Reason != "" {
		kv = append(kv, AttrReason.String(c.Reason))
	}
	kv = append(kv, AttrTrips.Int64(int64(c.Trips)), AttrLevel.Int(c.Level))
	if c.To == breaker.Open {
		kv = append(kv, AttrParked.Bool(c.Parked), AttrNextProbeIn.Float64(max(c.NextProbe.Sub(c.At), 0).Seconds()))
	}
	span.AddEvent(EventTransition, trace.WithTimestamp(c.At), trace.WithAttributes(kv...))
}

// StateChanged counts trips and keeps the transition for the span of the attempt that caused it.
func (o *Observer) StateChanged(c pool.StateChange) {
	if c.To == breaker.Open {
		o.countTrip(c)
	}
	o.pending.add(c)
}

func (o *Observer) countTrip(c pool.StateChange) {
	ctx := context.Background()
	cause, reason := string(c.Cause), c.Reason
	if c.Scope == pool.ScopeOrigin {
		_, origin := o.lab.labels("", c.Origin)
		o.in.guardTrips.Add(ctx, 1, o.lab.option(optKey{kind: kindGuardTrip, origin: origin, a: cause, b: reason}, buildGuardTrip).add...)
		return
	}
	exit, origin := "", ""
	if c.Exit != nil {
		exit = c.Exit.Label()
	}
	if c.Scope == pool.ScopePair {
		exit, origin = o.lab.labels(exit, c.Origin)
	} else {
		exit, _ = o.lab.labels(exit, "")
	}
	o.in.trips.Add(ctx, 1, o.lab.option(optKey{kind: kindTrip, exit: exit, origin: origin, a: c.Scope.String(), b: cause, c: reason}, buildTrip).add...)
}

func buildTrip(k optKey) attribute.Set {
	kv := exitOrigin(make([]attribute.KeyValue, 0, 5), k.exit, k.origin)
	kv = append(kv, AttrScope.String(k.a), AttrCause.String(k.b))
	if k.c != "" {
		kv = append(kv, AttrReason.String(k.c))
	}
	return attribute.NewSet(kv...)
}

func buildGuardTrip(k optKey) attribute.Set {
	kv := exitOrigin(make([]attribute.KeyValue, 0, 3), "", k.origin)
	kv = append(kv, AttrCause.String(k.a))
	if k.b != "" {
		kv = append(kv, AttrReason.String(k.b))
	}
	return attribute.NewSet(kv...)
}

// Refused counts a request refused without an attempt and records it on the request's span.
func (o *Observer) Refused(ctx context.Context, origin string, err error) {
	reason, retryIn := RefusalOther, time.Duration(-1)
	var nh *pool.NoHealthyExitError
	var ou *pool.OriginUnhealthyError
	var th *pool.ThrottledError
	var bs *pool.BudgetSpentError
	switch {
	case errors.As(err, &nh):
		reason, retryIn = RefusalNoHealthyExit, nh.RetryIn
	case errors.As(err, &ou):
		reason, retryIn = RefusalOriginUnhealthy, ou.RetryIn
	case errors.As(err, &th):
		reason, retryIn = RefusalThrottled, th.RetryIn
	case errors.As(err, &bs):
		reason, retryIn = RefusalBudgetSpent, bs.RetryIn
	}
	_, label := o.lab.labels("", origin)
	o.in.refusals.Add(ctx, 1, o.lab.option(optKey{kind: kindRefusal, origin: label, a: reason}, buildRefusal).add...)
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	host, port := splitOrigin(origin, o.defaultPort)
	kv := make([]attribute.KeyValue, 0, 6)
	kv = append(kv, AttrRefusal.String(reason))
	kv = o.lab.spanAttrs(kv, "", origin)
	kv = append(kv, keyServerAddress.String(host))
	if port > 0 {
		kv = append(kv, keyServerPort.Int(port))
	}
	if retryIn >= 0 {
		kv = append(kv, AttrRetryIn.Float64(retryIn.Seconds()))
	}
	span.AddEvent(EventRefused, trace.WithAttributes(kv...))
}

func buildRefusal(k optKey) attribute.Set {
	kv := exitOrigin(make([]attribute.KeyValue, 0, 2), "", k.origin)
	return attribute.NewSet(append(kv, AttrRefusal.String(k.a))...)
}

// Throttled records how long a request waited for a rate-limit token, and an event on the span in
// ctx.
func (o *Observer) Throttled(ctx context.Context, t pool.Throttle) {
	label := ""
	if t.Exit != nil {
		label = t.Exit.Label()
	}
	exit, origin := o.lab.labels(label, t.Origin)
	o.in.wait.Record(ctx, t.Waited.Seconds(), o.lab.option(optKey{kind: kindWait, exit: exit, origin: origin, a: t.Scope.String(), b: strconv.FormatBool(t.Refused)}, buildWait).rec...)
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	kv := make([]attribute.KeyValue, 0, 7)
	kv = append(kv, AttrLimitScope.String(t.Scope.String()), AttrWaited.Float64(t.Waited.Seconds()), AttrLimitRefused.Bool(t.Refused))
	kv = o.lab.spanAttrs(kv, label, t.Origin)
	span.AddEvent(EventThrottled, trace.WithAttributes(kv...))
}

func buildWait(k optKey) attribute.Set {
	kv := exitOrigin(make([]attribute.KeyValue, 0, 4), k.exit, k.origin)
	return attribute.NewSet(append(kv, AttrLimitScope.String(k.a), AttrLimitRefused.Bool(k.b == "true"))...)
}
