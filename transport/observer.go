package transport

import (
	"context"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// Observer receives the transport's attempts: OTel spans, logs, the demo's table. Methods may be
// called concurrently from many goroutines and must return quickly: they run on the request path.
// An Observer that also implements pool.Observer hears the pool's events too (state changes,
// refusals, rate limits) for as long as the transport is open (see WithObserver). Embed NopObserver
// to implement only some methods and to stay source-compatible when methods are added.
type Observer interface {
	// AttemptStarted is called when an exit has been picked, before the request leaves. The context
	// it returns is the one the attempt runs with (an OTel observer starts a span in it) and the one
	// AttemptFinished receives.
	AttemptStarted(ctx context.Context, a AttemptInfo) context.Context
	// AttemptFinished is called once per started attempt, when its verdict is known: at the
	// response headers for failures, when the body is done for successes.
	AttemptFinished(ctx context.Context, a AttemptResult)
}

// NopObserver implements Observer and pool.Observer and does nothing. Embed it in observers that
// implement only some methods.
type NopObserver struct{ pool.NopObserver }

// AttemptStarted returns ctx.
func (NopObserver) AttemptStarted(ctx context.Context, _ AttemptInfo) context.Context { return ctx }

// AttemptFinished does nothing.
func (NopObserver) AttemptFinished(context.Context, AttemptResult) {}

// AttemptInfo describes an attempt that is about to leave: its lease, and the request's method.
type AttemptInfo struct {
	pool.LeaseInfo
	Method string
}

// AttemptResult describes a finished attempt.
type AttemptResult struct {
	AttemptInfo
	// Verdict is the verdict the pool counted (pool.Reported.Verdict): a plain 403 the pool judged
	// a ban is Transient, ClassBlocked (see pool.Verdict.Suspect), as VerdictFromResponse says.
	Verdict    pool.Verdict
	StatusCode int   // 0 when no response arrived
	Err        error // the transport error, when no response arrived
	Latency    time.Duration
	// PairStateAfter and ExitStateAfter are the breakers' states once the verdict was applied.
	PairStateAfter, ExitStateAfter breaker.State
	// Bytes is what the attempt moved to and from the proxy, as counted on the exit's connection
	// and reported to the pool (pool.Lease.ReportTrafficAt): exact for HTTP/1.1, shared between
	// the attempts of one HTTP/2 connection in flight together; zero with WithBase. The attribution
	// rules are in docs/metrics.md.
	Bytes pool.Traffic
	// Spend is what the attempt cost in the pool's cost unit: Bytes at the exit's price per GB
	// plus its price per request (pool.Pool.CostOf, pool.Reported.Spend).
	Spend float64
}

// observers fans attempt events out to every Observer.
type observers []Observer

func (os observers) started(ctx context.Context, a AttemptInfo) context.Context {
	for _, o := range os {
		ctx = o.AttemptStarted(ctx, a)
	}
	return ctx
}

func (os observers) finished(ctx context.Context, r AttemptResult) {
	for _, o := range os {
		o.AttemptFinished(ctx, r)
	}
}
