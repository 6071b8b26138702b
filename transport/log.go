package transport

import (
	"context"
	"errors"
	"log/slog"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// WithLogger logs what an operator acts on through l: breaker transitions, exits removed, and at
// Debug each failed attempt, refusal and rate-limit wait. Levels:
//
//	Warn   an exit's own breaker opened or parked; an origin guard opened (the site is down or
//	       blocks everyone)
//	Info   a pair opened (one site judged one IP) or closed again; an exit's breaker or an origin
//	       guard closed; an exit removed
//	Debug  HALF_OPEN (a probe may go); a failed attempt; a refused pick; a wait for a token
//
// Exits appear by label, never with credentials. Default: no logging.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return errors.New("transport: WithLogger: nil logger")
		}
		c.observers = append(c.observers, &logObserver{l: l})
		return nil
	})
}

// logObserver turns attempt and pool events into log records.
type logObserver struct{ l *slog.Logger }

func (o *logObserver) AttemptStarted(ctx context.Context, _ AttemptInfo) context.Context { return ctx }

func (o *logObserver) AttemptFinished(ctx context.Context, r AttemptResult) {
	if r.Verdict.Outcome == pool.Success || r.Verdict.Outcome == pool.Neutral || !o.l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{
		slog.String("exit", r.Exit.Label()), slog.String("origin", r.Origin),
		slog.String("outcome", r.Verdict.Outcome.String()), slog.String("scope", r.Verdict.Scope.String()),
		slog.String("class", string(r.Verdict.Class)), slog.Duration("latency", r.Latency),
	}
	if r.StatusCode != 0 {
		attrs = append(attrs, slog.Int("status", r.StatusCode))
	}
	if r.Verdict.Detector != "" {
		attrs = append(attrs, slog.String("detector", r.Verdict.Detector))
	}
	if r.Err != nil {
		attrs = append(attrs, slog.String("error", r.Err.Error())) // the transport's errors name exits by label
	}
	o.l.LogAttrs(ctx, slog.LevelDebug, "proxybreaker: attempt failed", attrs...)
}

func (o *logObserver) StateChanged(c pool.StateChange) {
	level := slog.LevelInfo
	switch {
	case c.To == breaker.HalfOpen:
		level = slog.LevelDebug
	case c.To == breaker.Open && c.Scope != pool.ScopePair:
		level = slog.LevelWarn
	}
	ctx := context.Background()
	if !o.l.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs, slog.String("scope", c.Scope.String()))
	if c.Exit != nil {
		attrs = append(attrs, slog.String("exit", c.Exit.Label()))
	}
	if c.Origin != "" {
		attrs = append(attrs, slog.String("origin", c.Origin))
	}
	attrs = append(attrs, slog.String("from", c.From.String()), slog.String("to", c.To.String()),
		slog.String("cause", string(c.Cause)))
	if c.To == breaker.Open {
		attrs = append(attrs, slog.String("reason", c.Reason), slog.Time("next_probe", c.NextProbe),
			slog.Int("backoff_level", c.Level), slog.Any("trips", c.Trips), slog.Bool("parked", c.Parked))
	}
	o.l.LogAttrs(ctx, level, "proxybreaker: breaker "+c.To.String(), attrs...)
}

func (o *logObserver) Refused(ctx context.Context, origin string, err error) {
	o.l.LogAttrs(ctx, slog.LevelDebug, "proxybreaker: request refused",
		slog.String("origin", origin), slog.String("error", err.Error()))
}

func (o *logObserver) Throttled(ctx context.Context, t pool.Throttle) {
	if !o.l.Enabled(ctx, slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{slog.String("origin", t.Origin), slog.String("bucket", t.Scope.String()),
		slog.Duration("waited", t.Waited), slog.Bool("refused", t.Refused)}
	if t.Exit != nil {
		attrs = append(attrs, slog.String("exit", t.Exit.Label()))
	}
	o.l.LogAttrs(ctx, slog.LevelDebug, "proxybreaker: rate limit", attrs...)
}

func (o *logObserver) ExitRemoved(e *pool.Exit) {
	o.l.LogAttrs(context.Background(), slog.LevelInfo, "proxybreaker: exit removed", slog.String("exit", e.Label()))
}
