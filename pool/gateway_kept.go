package pool

import (
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Kept sessions. A gateway with rotate=off keeps each session until its TTL, as a static line
// keeps its IP; a ban waits on the session's pair like a static line's. Its sessions' connection
// failures (timeouts, dropped tunnels, bodies cut off) are their IP's, not the gateway's: they go
// to the session's own breaker, which rests that session alone on the static exit's ladder
// (ExitRest at most for transient trouble), while the gateway's breaker — every session's exit
// breaker — hears only what is the gateway's: a 407, a refused connection, a name that does not
// resolve. In the gateway world one flaky IP's three timeouts parked all 20 sessions when they
// went to the gateway (0.25 of the static lines' goodput; docs/decisions.md, "the gateway world").
//
// The session's own breaker keeps its bit in Pool.exitOpen with the gateway's (the bit is set
// while either is out of CLOSED), so a pick looks at it only then (exitLease). Its probe is no
// lease: once its rest is over it admits the session's attempts again, and the first verdict
// through it — a success closes it, a connection failure trips it for longer — takes the probe
// slot as it is reported. A session that trips its own breaker before it ever served counts as a
// failure of the gateway's, as a rotate=on session lost that way does (gateway_rotate.go).

// newOwnBreaker returns s's own breaker: for rotate=on a plain one (a trip replaces the session);
// for rotate=off one that keeps s's bit in Pool.exitOpen.
func (p *Pool) newOwnBreaker(g *gateway, s *gwSession) *breaker.Breaker {
	pol := p.exitPolicy(g.tune)
	if g.spec.rotate {
		return pol.NewBreakerWith(breaker.Hooks{})
	}
	return pol.NewBreakerWith(breaker.Hooks{Mirror: func(notClosed bool) {
		g.mu.Lock()
		s.ownOpen.Store(notClosed)
		if !s.done.Load() {
			p.exitOpen.set(s.id, notClosed || g.open)
		}
		g.mu.Unlock()
	}})
}

// keptFailed applies a connection failure of kept session s at now to its own breaker; reason
// is the verdict's class.
func (p *Pool) keptFailed(now time.Time, s *gwSession, reason string) {
	f := breaker.Failure{Reason: reason, MaxWindow: p.exitRest}
	pm, closed := s.own.ClosedPermit()
	if !closed {
		if s.own.State(now) != breaker.HalfOpen {
			return // resting: an attempt admitted before the trip
		}
		var ok bool
		if pm, ok = s.own.AcquireLease(now, 0); !ok {
			return
		}
	}
	pm.Failure(now, f)
	if closed && s.own.State(now) != breaker.Closed && !s.served.Load() {
		if gpm, ok := s.g.wide.ClosedPermit(); ok { // a gateway failing its fresh sessions
			gpm.Failure(now, breaker.Failure{Reason: "session_" + RotationConnection.String()})
		}
	}
}

// keptServed notes a success through kept session s at now: it served, and its own breaker, back
// from its rest, closes.
func (s *gwSession) keptServed(now time.Time) {
	if !s.served.Load() {
		s.served.Store(true)
	}
	if s.ownOpen.Load() && s.own.State(now) == breaker.HalfOpen {
		if pm, ok := s.own.AcquireLease(now, 0); ok {
			pm.Success(now)
		}
	}
}

// exitReady is es.wide.Ready, not ready while es is a kept session resting on its own breaker
// (then ready when both are). The pick calls it only when es's bit in Pool.exitOpen is set.
func exitReady(now time.Time, es *exitState) (bool, time.Time) {
	ok, at := es.wide.Ready(now)
	if s := keptResting(es); s != nil {
		if own, ownAt := s.own.Ready(now); !own {
			if ok || ownAt.After(at) {
				at = ownAt
			}
			ok = false
		}
	}
	return ok, at
}

// exitClosed reports whether es's exit breaker is CLOSED, and, for a kept session, its own too.
func exitClosed(now time.Time, es *exitState) bool {
	if s := keptResting(es); s != nil && s.own.State(now) != breaker.Closed {
		return false
	}
	return es.wide.State(now) == breaker.Closed
}

// keptResting returns es's kept session if its own breaker is out of CLOSED, else nil.
func keptResting(es *exitState) *gwSession {
	if gw := es.exit.gw; gw != nil && gw.s.ownOpen.Load() {
		return gw.s
	}
	return nil
}

// exitLease is es.wide.AcquireLease, refused while es is a kept session resting on its own
// breaker. The pick calls it only when es's bit in Pool.exitOpen is set.
func exitLease(now time.Time, es *exitState, lease time.Duration) (breaker.Permit, bool) {
	if s := keptResting(es); s != nil && s.own.State(now) == breaker.Open {
		return breaker.Permit{}, false
	}
	return es.wide.AcquireLease(now, lease)
}
