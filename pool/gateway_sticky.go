package pool

import (
	"errors"
	"fmt"
)

// Sticky caller sessions and gateways. A Request.Session is pinned, per origin, to the exit its
// first pick chose. When that exit is a gateway's session and the gateway replaces it (a ban, its
// own connection failures, its TTL; gateway_rotate.go), the pin follows to the replacement: the
// next lease of the caller session goes through the new session, says LeaseInfo.SessionMoved, and
// SessionObserver heard the rotation with the number of caller sessions that followed. A caller
// that must not change IP silently — a login, a checkout — makes its pool WithStrictSessions.

// ErrSessionLost is matched (errors.Is) by the error Pick returns, in a pool made
// WithStrictSessions, when a request's Session lost the exit it was pinned to. The concrete error
// is a *SessionLostError.
var ErrSessionLost = errors.New("pool: session lost its exit")

// SessionLostError says that the caller session a request carried (Request.Session) was pinned to
// an exit for Origin that it can no longer use: its gateway replaced that session (Rotated), or
// the exit left the pool or stopped admitting the origin. The pin is forgotten: the session's next
// pick starts afresh on another exit, as a new session would. The error names no session and no
// exit credentials.
type SessionLostError struct {
	Origin  string
	Rotated bool // the exit was a gateway's session, replaced by its gateway
}

// Error says what was lost.
func (e *SessionLostError) Error() string {
	why := "its exit left the pool or stopped admitting the origin"
	if e.Rotated {
		why = "its gateway replaced the session (a new IP)"
	}
	return fmt.Sprintf("pool: session lost its exit for %s: %s", e.Origin, why)
}

// Is makes errors.Is(err, ErrSessionLost) true.
func (e *SessionLostError) Is(target error) bool { return target == ErrSessionLost }

// WithStrictSessions makes a pick whose Request.Session lost its pinned exit for the origin — its
// gateway rotated it, it left the pool, its breakers stopped admitting the origin — fail with a
// *SessionLostError instead of moving to another exit, once; the pin is forgotten, so the next
// pick of the session starts afresh. By default such a session moves silently and its lease says
// LeaseInfo.SessionMoved. A pin evicted by WithMaxSessions is not lost: its session picks afresh.
func WithStrictSessions() Option {
	return optionFunc(func(c *config) error {
		c.strictSessions = true
		return nil
	})
}

// sessionLost forgets the session's pin for origin and returns the error a strict pool gives.
func (p *Pool) sessionLost(session, origin string, rotated bool) error {
	p.sessions.unpin(session, origin)
	return &SessionLostError{Origin: origin, Rotated: rotated}
}
