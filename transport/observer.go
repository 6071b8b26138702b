package transport

import (
	"context"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Observer receives the transport's events: OTel spans and metrics, logs, the demo's table.
// Methods may be called concurrently from many goroutines and must return quickly; they run on the
// request path (state changes run after every breaker lock is released). Embed NopObserver to
// implement only some methods and to stay source-compatible when methods are added.
type Observer interface {
	// AttemptStarted is called when an exit has been picked, before the request leaves. The context
	// it returns is the one the attempt runs with (an OTel observer starts a span in it) and the one
	// AttemptFinished receives.
	AttemptStarted(ctx context.Context, a AttemptInfo) context.Context
	// AttemptFinished is called once per started attempt, when its verdict is known: at the
	// response headers for failures, when the body is done for successes.
	AttemptFinished(ctx context.Context, a AttemptResult)
	// StateChanged is called after any breaker (pair, exit or origin) changed state.
	StateChanged(c StateChange)
	// Refused is called when a request is refused without an attempt: no healthy exit, the origin
	// is unhealthy, or rate limits held it back. err is a *NoHealthyExitError, an
	// *OriginUnhealthyError or a *ThrottledError.
	Refused(ctx context.Context, origin string, err error)
}

// NopObserver implements Observer and does nothing. Embed it in observers that implement only some
// methods.
type NopObserver struct{}

// AttemptStarted returns ctx.
func (NopObserver) AttemptStarted(ctx context.Context, _ AttemptInfo) context.Context { return ctx }

// AttemptFinished does nothing.
func (NopObserver) AttemptFinished(context.Context, AttemptResult) {}

// StateChanged does nothing.
func (NopObserver) StateChanged(StateChange) {}

// Refused does nothing.
func (NopObserver) Refused(context.Context, string, error) {}

// AttemptInfo describes an attempt that is about to leave.
type AttemptInfo struct {
	Exit   *Exit
	Origin string
	Method string
	At     time.Time
	// Probe reports that the attempt holds a HALF_OPEN probe slot (of the pair, the exit or the origin).
	Probe bool
	// PairState and ExitState are the states of the pair's and the exit's breakers when the exit was picked.
	PairState, ExitState breaker.State
	// DryRun reports that breakers did not steer this attempt; WouldRefuse that they would have
	// refused it.
	DryRun, WouldRefuse bool
}

// AttemptResult describes a finished attempt.
type AttemptResult struct {
	AttemptInfo
	Verdict    Verdict
	StatusCode int   // 0 when no response arrived
	Err        error // the transport error, when no response arrived
	Latency    time.Duration
	// PairStateAfter and ExitStateAfter are the breakers' states once the verdict was applied.
	PairStateAfter, ExitStateAfter breaker.State
}

// StateChange is one breaker transition, with the key it belongs to.
type StateChange struct {
	Scope  Scope  // ScopePair, ScopeExit or ScopeOrigin
	Exit   *Exit  // nil for ScopeOrigin
	Origin string // empty for ScopeExit
	breaker.Transition
}

// observers fans events out to every Observer.
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

func (os observers) stateChanged(c StateChange) {
	for _, o := range os {
		o.StateChanged(c)
	}
}

func (os observers) refused(ctx context.Context, origin string, err error) {
	for _, o := range os {
		o.Refused(ctx, origin, err)
	}
}

// ThrottleObserver is implemented by observers that also want rate-limit events: a request that
// waited for a token, or was refused for want of one. The transport checks each Observer for it
// once, at construction.
type ThrottleObserver interface {
	Throttled(ctx context.Context, t Throttle)
}

// Throttle describes one request held back by a rate limit.
type Throttle struct {
	Origin string
	// Exit is the exit the request went through after waiting; nil when it was refused.
	Exit *Exit
	// Scope names the bucket that held the request back: "exit", "pair" or "origin".
	Scope string
	// Waited is how long the request waited for a token.
	Waited time.Duration
	// Refused reports that the request did not go: fail-fast, or its deadline came first.
	Refused bool
}
