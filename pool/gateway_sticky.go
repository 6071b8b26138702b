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

// ErrSessionExpired is matched (errors.Is) by the error Pick returns, in a pool made
// WithStrictSessions and WithSessionLimits, when a request's Session found its pin past the
// limits: a planned change of IP, apart from a lost exit. It also matches ErrSessionLost.
var ErrSessionExpired = errors.New("pool: session pin expired")

// SessionLostError says that the caller session a request carried (Request.Session) was pinned to
// an exit for Origin that it can no longer use: its gateway replaced that session (Rotated), the
// exit left the pool or stopped admitting the origin, or the pin reached the pool's session limits
// (Reason MovedMaxAge or MovedMaxUses; WithSessionLimits). The pin is forgotten: the session's
// next pick starts afresh on another exit, as a new session would. The error names no session and
// no exit credentials.
type SessionLostError struct {
	Origin  string
	Rotated bool              // the exit was a gateway's session, replaced by its gateway
	Reason  SessionMoveReason // why: MovedExitLost, MovedRotated, MovedMaxAge or MovedMaxUses
}

// Error says what was lost.
func (e *SessionLostError) Error() string {
	why := "its exit left the pool or stopped admitting the origin"
	switch {
	case e.Rotated || e.Reason == MovedRotated:
		why = "its gateway replaced the session (a new IP)"
	case e.Reason == MovedMaxAge:
		why = "its pin reached the session age limit"
	case e.Reason == MovedMaxUses:
		why = "its pin served the session use limit"
	}
	return fmt.Sprintf("pool: session lost its exit for %s: %s", e.Origin, why)
}

// Is makes errors.Is(err, ErrSessionLost) true, and errors.Is(err, ErrSessionExpired) for a pin
// past the pool's session limits.
func (e *SessionLostError) Is(target error) bool {
	return target == ErrSessionLost || (target == ErrSessionExpired && e.Reason.Expired())
}

// WithStrictSessions makes a pick whose Request.Session lost its pinned exit for the origin — its
// gateway rotated it, it left the pool, its breakers stopped admitting the origin — fail with a
// *SessionLostError instead of moving to another exit, once; the pin is forgotten, so the next
// pick of the session starts afresh. By default such a session moves silently and its lease says
// LeaseInfo.SessionMoved. A pin evicted by WithMaxSessions is not lost: its session picks afresh.
// A pin past WithSessionLimits fails the same way, matching ErrSessionExpired too.
func WithStrictSessions() Option {
	return optionFunc(func(c *config) error {
		c.strictSessions = true
		return nil
	})
}
