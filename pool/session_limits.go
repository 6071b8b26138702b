package pool

import (
	"fmt"
	"math"
	"time"
)

// Caller sessions with limits. WithSessionLimits bounds how long, and for how many picks, a
// Request.Session stays pinned to one exit for an origin: a provider's sticky IP that should be
// renewed every so often, a crawl identity that should not make more than so many requests from
// one address. The limits are the pool's, for every session: they are a policy of the exits (how
// long an IP may be kept), and a Request that carried its own would grow every pick's argument.
//
// A pin's age is measured on the pool's clock from its first pick; its uses are the picks that
// went through it, the first included. The pick that finds a pin past either limit pins the
// session afresh — on another exit while one is ready — and its lease says SessionMoved with
// SessionMove MovedMaxAge or MovedMaxUses, apart from MovedExitLost and MovedRotated (as does
// each concurrent pick that found the same pin expired and joined the new one). A
// SessionExpiryObserver hears each expired pin with the picks it served. In a pool made
// WithStrictSessions the pick that finds its pin expired fails instead, once, with a
// *SessionLostError matching ErrSessionExpired (and ErrSessionLost), and sends nothing: a login
// flow learns that its IP is about to change before a request leaves from the new one, and logs
// in again (its next pick starts a fresh pin).

// SessionMoveReason says why a caller session left the exit it was pinned to (LeaseInfo.SessionMove,
// SessionLostError.Reason, SessionExpiry.Reason).
type SessionMoveReason uint8

const (
	// MovedNone: the session did not move (the zero value).
	MovedNone SessionMoveReason = iota
	// MovedExitLost: its exit left the pool, or its breakers for the origin left CLOSED.
	MovedExitLost
	// MovedRotated: its exit was a gateway's session, which the gateway replaced (a new IP).
	MovedRotated
	// MovedMaxAge: its pin reached the pool's session age limit (WithSessionLimits).
	MovedMaxAge
	// MovedMaxUses: its pin served the pool's session use limit (WithSessionLimits).
	MovedMaxUses
)

// String names the reason: "none", "exit_lost", "rotated", "max_age", "max_uses".
func (r SessionMoveReason) String() string {
	switch r {
	case MovedNone:
		return "none"
	case MovedExitLost:
		return "exit_lost"
	case MovedRotated:
		return "rotated"
	case MovedMaxAge:
		return "max_age"
	case MovedMaxUses:
		return "max_uses"
	}
	return "unknown"
}

// Expired reports whether the reason is one of the pool's session limits.
func (r SessionMoveReason) Expired() bool { return r == MovedMaxAge || r == MovedMaxUses }

// WithSessionLimits bounds each caller session's pin (Request.Session, per origin): it expires
// maxAge after its first pick, on the pool's clock, or once it served maxUses picks, whichever
// comes first; 0 leaves that bound off. The next pick of the session pins it afresh (see
// LeaseInfo.SessionMove), or, WithStrictSessions, fails once with a *SessionLostError matching
// ErrSessionExpired. Under concurrent picks of one session exactly maxUses go through each pin.
// Negative values, both 0, and maxUses above 4,294,967,295 are errors.
func WithSessionLimits(maxAge time.Duration, maxUses int) Option {
	return optionFunc(func(c *config) error {
		switch {
		case maxAge < 0:
			return fmt.Errorf("pool: WithSessionLimits(%v, %d): maxAge must not be negative", maxAge, maxUses)
		case maxUses < 0:
			return fmt.Errorf("pool: WithSessionLimits(%v, %d): maxUses must not be negative", maxAge, maxUses)
		case maxUses > math.MaxUint32:
			return fmt.Errorf("pool: WithSessionLimits(%v, %d): maxUses must be at most %d", maxAge, maxUses, uint32(math.MaxUint32))
		case maxAge == 0 && maxUses == 0:
			return fmt.Errorf("pool: WithSessionLimits(0, 0): sets no limit; give maxAge > 0, maxUses > 0 or both")
		}
		c.sessionMaxAge, c.sessionMaxUses = maxAge, uint32(maxUses)
		return nil
	})
}

// SessionExpiry is one caller session's pin that reached the pool's session limits. It names no
// session: a caller's session key may name a user.
type SessionExpiry struct {
	Origin string
	Reason SessionMoveReason // MovedMaxAge or MovedMaxUses
	// Old is the exit the session was pinned to; New the one the pick that found the pin expired
	// pinned it to, nil in a strict pool (that pick failed) or when it pinned Old again (no other
	// exit was ready).
	Old, New *Exit
	Uses     int           // the picks the pin served
	Age      time.Duration // from its first pick to now
	At       time.Time
}

// SessionExpiryObserver is implemented by observers that want to hear of caller sessions' pins
// expiring. An Observer given to the pool that also implements it is called from the pick that
// found the pin expired, with no lock held, possibly concurrently; it must be quick.
type SessionExpiryObserver interface {
	SessionExpired(e SessionExpiry)
}

// sessionStep is a pick's dealings with its session's pin.
type sessionStep struct {
	claim   sessionClaim
	gen     uint32            // the pin this pick was counted on; 0: none yet
	rotated bool              // the claim took the pin's rotated note (a refund puts it back)
	move    SessionMoveReason // why the session leaves its pin, if it does
}

// stick is the session's part of a pick round: the exit the session is pinned to, when its pin is
// live and its breakers admit the origin (the pick is counted on the pin), else nil — the pick
// chooses and repins — or, in a strict pool, the error for a session that lost its pin.
func (p *Pool) stick(now time.Time, o *originState, set *exitSet, session, origin string, want *Want, st *sessionStep) (*exitState, error) {
	c := p.sessions.claim(session, origin, now.UnixNano(), p.strictSessions)
	*st = sessionStep{claim: c}
	if !c.had {
		return nil, nil
	}
	why := c.expired
	if c.live {
		st.gen, st.rotated = c.pin.gen, c.pin.rotated
		es := set.byID[c.pin.id]
		switch {
		case es != nil && p.sticks(now, o, es) && want.Admits(es.exit) && (!c.pin.rotated || !p.strictSessions):
			if c.pin.rotated {
				st.move = MovedRotated
			}
			return es, nil
		case c.pin.rotated:
			why = MovedRotated
		default:
			why = MovedExitLost
		}
	}
	st.move = why
	if !p.strictSessions {
		return nil, nil
	}
	if why.Expired() {
		p.tellExpired(now, set, origin, c.pin, why, nil) // the claim forgot the pin
	} else {
		p.sessions.unpin(session, origin, c.pin.gen)
	}
	return nil, &SessionLostError{Origin: origin, Rotated: why == MovedRotated, Reason: why}
}

// repin pins the session to es, the exit the pick chose, in place of the pin stick saw — or joins
// the pin another pick of the session installed meanwhile, and returns that one's exit (nil when
// it left the set: the round is tried again).
func (p *Pool) repin(now time.Time, set *exitSet, session, origin string, st *sessionStep, es *exitState) *exitState {
	via, old, replaced := p.sessions.install(session, origin, st.claim.pin.gen, es.id, now.UnixNano())
	st.gen, st.rotated = via.gen, false
	if why := p.sessions.expiry(old, now.UnixNano()); replaced && why != MovedNone {
		p.tellExpired(now, set, origin, old, why, es) // the pin it replaced, whichever pick saw it first
	}
	if via.id != es.id {
		es = set.byID[via.id]
		if es == nil {
			p.refund(session, origin, st)
			return nil
		}
	}
	if st.move != MovedRotated && (!st.claim.had || via.id == st.claim.pin.id) {
		st.move = MovedNone // a fresh session, or one pinned again to the same exit: no new IP
	}
	return es
}

// refund gives back the use the pick was counted on, when it cannot go through the exit after all.
func (p *Pool) refund(session, origin string, st *sessionStep) {
	if st.gen != 0 {
		p.sessions.refund(session, origin, st.gen, st.rotated)
		st.gen = 0
	}
}

// tellExpired tells SessionExpiryObservers that pin old expired (why) at now, replaced by a pin to
// nu (nil: none, or the same exit).
func (p *Pool) tellExpired(now time.Time, set *exitSet, origin string, old pinned, why SessionMoveReason, nu *exitState) {
	obs := p.obs.load()
	if len(obs) == 0 {
		return
	}
	e := SessionExpiry{Origin: origin, Reason: why, Uses: int(old.uses), At: now}
	if old.since != 0 {
		e.Age = time.Duration(now.UnixNano() - old.since)
	}
	if es := set.byID[old.id]; es != nil {
		e.Old = es.exit
	}
	if nu != nil && nu.id != old.id {
		e.New = nu.exit
	}
	for _, o := range obs {
		if so, ok := o.o.(SessionExpiryObserver); ok {
			so.SessionExpired(e)
		}
	}
}
