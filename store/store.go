package store

import (
	"errors"
	"fmt"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Store keeps a pool's breaker state outside the process. Implementations: store/sqlite
// (persistence across restarts) and store/redis (sharing across a fleet).
//
// A Store sees every transition as a transport.Observer: StateChanged runs on the request path and
// must only enqueue. Attach restores the saved state into the pool and starts the store's own
// goroutines; call it once, before the pool carries traffic. Close flushes what is queued and stops
// them; call it after the transport is closed.
type Store interface {
	transport.Observer
	Attach(p *transport.Pool) error
	Close() error
}

// Options returns the transport options that connect s to the pool they build: s as an Observer,
// and as the ProbeClaimer when it implements transport.ProbeClaimer.
func Options(s Store) []transport.Option {
	opts := []transport.Option{transport.WithObserver(s)}
	if c, ok := s.(transport.ProbeClaimer); ok {
		opts = append(opts, transport.WithProbeClaimer(c))
	}
	return opts
}

// NewTransport returns a transport configured by opts and connected to s: it adds Options(s),
// builds the transport, and attaches s to its pool (restoring the saved state before the first
// request). On error nothing is left running but s itself, which the caller still closes.
func NewTransport(s Store, opts ...transport.Option) (*transport.Transport, error) {
	if s == nil {
		return nil, errors.New("store: NewTransport: nil store")
	}
	tr, err := transport.New(append(Options(s), opts...)...)
	if err != nil {
		return nil, err
	}
	if err := s.Attach(tr.Pool()); err != nil {
		tr.Close()
		return nil, fmt.Errorf("store: attach: %w", err)
	}
	return tr, nil
}

// Record turns a transition into the saved breaker a store keeps for its key, and reports whether
// it is worth keeping. Two kinds are not:
//   - CauseRestored: the state came from a store or another fleet member, which already has it
//     (and the transition's At is when it was applied, not when it happened);
//   - CauseCooldown (OPEN → HALF_OPEN): the OPEN record already says when probing may start, and a
//     process that dies with a probe out restores an OPEN breaker whose window has passed, which
//     admits a probe at once — the same thing.
//
// Changed is the transition's instant, so of two records for one key the later wins everywhere
// (breaker.Breaker.Restore).
func Record(c transport.StateChange) (transport.SavedBreaker, bool) {
	if c.Cause == breaker.CauseRestored || c.Cause == breaker.CauseCooldown {
		return transport.SavedBreaker{}, false
	}
	sb := transport.SavedBreaker{
		Scope:  c.Scope,
		Origin: c.Origin,
		Saved: breaker.Saved{
			Level: c.Level, Trips: c.Trips, LastFailure: c.Reason, Changed: c.At,
		},
	}
	if c.Exit != nil {
		sb.Exit = c.Exit.Label()
	}
	switch c.To {
	case breaker.Closed:
		sb.State, sb.ClosedAt = breaker.Closed, c.At
	default: // OPEN; a HALF_OPEN one is saved as OPEN with its window over
		sb.State, sb.Parked, sb.NextProbe = breaker.Open, c.Parked, c.NextProbe
		if c.To == breaker.HalfOpen || sb.NextProbe.IsZero() {
			sb.NextProbe = c.At
		}
	}
	return sb, true
}

// Key is a saved breaker's identity: scope, exit label and origin.
type Key struct {
	Scope  transport.Scope
	Exit   string
	Origin string
}

// KeyOf returns sb's key.
func KeyOf(sb transport.SavedBreaker) Key { return Key{sb.Scope, sb.Exit, sb.Origin} }
