package store

import (
	"errors"
	"fmt"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// Store keeps a pool's breaker state outside the process. Implementations: store/sqlite
// (persistence across restarts) and store/redis (sharing across a fleet).
//
// A Store is a pool.Observer that is also a pool.Binder: adding it to a pool with
// pool.Pool.Observe binds it first — Bind restores the saved state into the pool and from then on
// the store keeps the pool in step — and then it sees every transition (StateChanged runs on the
// request path and must only enqueue). Bind it once the pool has its exits (entries for exits the
// pool does not have are skipped) and before the pool carries traffic: NewPool does both, and so
// does pool.WithObserver(s) (pool.New binds its observers after adding its exits) — but only
// NewPool also adds the probe claimer a fleet store needs (Options). A store is bound to one pool at a time; the func Bind returns (which Observe's remove
// func calls) unbinds it. Close flushes what is queued and stops the store's goroutines; call it
// once the pool carries no more traffic. A closed store ignores further events.
type Store interface {
	pool.Observer
	pool.Binder
	Close() error
}

// Options returns the pool options that s needs when the pool is built: pool.WithProbeClaimer(s)
// when s implements pool.ProbeClaimer, nothing otherwise. The store itself is added afterwards,
// with pool.Pool.Observe, once the pool has its exits: NewPool does both.
func Options(s Store) []pool.Option {
	var opts []pool.Option
	if c, ok := s.(pool.ProbeClaimer); ok {
		opts = append(opts, pool.WithProbeClaimer(c))
	}
	return opts
}

// NewPool returns a pool configured by opts and connected to s: it adds Options(s), builds the
// pool, and observes it with s (pool.Pool.Observe), which binds s and so restores the saved state
// before the first request. Build transports on the pool as usual (transport.New(p, …)). On error
// nothing is left running but s itself, which the caller still closes.
func NewPool(s Store, opts ...pool.Option) (*pool.Pool, error) {
	if s == nil {
		return nil, errors.New("store: NewPool: nil store")
	}
	p, err := pool.New(append(Options(s), opts...)...)
	if err != nil {
		return nil, err
	}
	if _, err := p.Observe(s); err != nil {
		p.Close()
		return nil, fmt.Errorf("store: bind: %w", err)
	}
	return p, nil
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
func Record(c pool.StateChange) (pool.SavedBreaker, bool) {
	if c.Cause == breaker.CauseRestored || c.Cause == breaker.CauseCooldown {
		return pool.SavedBreaker{}, false
	}
	sb := pool.SavedBreaker{
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
	Scope  pool.Scope
	Exit   string
	Origin string
}

// KeyOf returns sb's key.
func KeyOf(sb pool.SavedBreaker) Key { return Key{sb.Scope, sb.Exit, sb.Origin} }
