package breaker

import (
	"fmt"
	"time"
)

// State is the state of a breaker.
type State uint8

// The three states. The zero value is Closed.
const (
	Closed   State = iota // traffic flows; failures are counted
	Open                  // no traffic until the cooldown ends
	HalfOpen              // a bounded number of probes decide
)

// String returns "closed", "open" or "half_open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half_open"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// MarshalText encodes a State as its String form.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText decodes the String form of a State.
func (s *State) UnmarshalText(b []byte) error {
	switch string(b) {
	case "closed":
		*s = Closed
	case "open":
		*s = Open
	case "half_open":
		*s = HalfOpen
	default:
		return fmt.Errorf("breaker: unknown state %q", b)
	}
	return nil
}

// Cause says why a breaker changed state.
type Cause string

// The causes of a transition.
const (
	CauseFailures     Cause = "failures"      // FailureThreshold failures in the window (and the ratio, if set)
	CauseRetryAfter   Cause = "retry_after"   // a failure carried a Retry-After
	CauseDecisive     Cause = "decisive"      // a failure that settles it alone (Failure.Decisive)
	CausePermanent    Cause = "permanent"     // a permanent failure parked the breaker
	CauseCooldown     Cause = "cooldown"      // the cooldown ended and a probe was admitted
	CauseProbeOK      Cause = "probe_ok"      // enough probes succeeded
	CauseProbeFailed  Cause = "probe_failed"  // a probe failed
	CauseLeaseExpired Cause = "lease_expired" // a probe never reported back within its lease
)

// cause is a Cause as a breaker stores it: an index into causes (0: none yet).
type cause uint8

var causes = [...]Cause{"", CauseFailures, CauseRetryAfter, CausePermanent, CauseCooldown, CauseProbeOK,
	CauseProbeFailed, CauseLeaseExpired, CauseRestored, CauseDecisive, CauseOverride}

func causeOf(c Cause) cause {
	for i, k := range causes {
		if k == c {
			return cause(i)
		}
	}
	return 0 // unreachable: breakers note only the causes above
}

// Cause returns the Cause c stands for.
func (c cause) Cause() Cause { return causes[c] }

// Failure describes a failed attempt.
type Failure struct {
	// Permanent parks the breaker for ParkFor at once, whatever the count.
	Permanent bool
	// Soft failures count half: two of them within Window make one failure; a lone half older than
	// Window is forgotten. proxybreaker uses it for 502/503/504
	// from the origin, which may be the origin's trouble rather than the exit's.
	Soft bool
	// RetryAfter, when positive, trips the breaker at once and keeps it OPEN at least this long
	// (capped at Settings.MaxRetryAfter).
	RetryAfter time.Duration
	// Decisive trips the breaker at once, whatever the count, for the OPEN window of its backoff
	// level: a failure that is the other side's verdict on this key, not a sample of its health.
	// Package pool passes it for blocks (a challenge page, a 403 judged a ban) and 429s without
	// Retry-After: the next attempt would meet the same answer.
	Decisive bool
	// Reason is a short, low-cardinality label kept in the Snapshot ("timeout", "rate_limited").
	// It must not contain credentials.
	Reason string
	// MaxWindow, when positive, caps the OPEN window this failure trips the breaker for (before
	// jitter, never below BaseCooldown): the caller's estimate of how long to wait at most between
	// probes for this kind of trouble. The backoff level still climbs; only its window is capped.
	// Package pool passes it for blocks and rate limits, learned from how long the origin's earlier
	// episodes lasted, so that a pair whose ban is over is probed within minutes. A Retry-After is
	// not shortened by it.
	MaxWindow time.Duration
	// Stretch, when positive, reads this failure's OPEN window that many rungs higher on the
	// backoff ladder — each doubles it, up to MaxCooldown — without raising the backoff level; a
	// MaxWindow still caps it, and a Retry-After ignores it. Package pool passes a pair's recent
	// bans when it is banned again soon after one (a repeat offender, whose next ban a hardening
	// WAF makes longer), so that it is probed on a longer ladder; a first ban's Stretch is 0.
	Stretch int
	// ExactRetryAfter makes a Retry-After's OPEN window the Retry-After itself (before jitter, at
	// least MinRetryAfterRest), not at least BaseCooldown. Package pool sets it for a 429's
	// Retry-After, the origin's own word on when its window resets: against a site that counts
	// 10-second windows a rest of BaseCooldown (20 s) cost every other window (issue 35).
	ExactRetryAfter bool
}

// MinRetryAfterRest is the shortest OPEN window of a failure with ExactRetryAfter.
const MinRetryAfterRest = time.Second

// Transition describes one change of state. It is delivered to the callback given to NewBreaker
// after the breaker's lock is released.
type Transition struct {
	From, To   State
	At         time.Time
	Cause      Cause
	Reason     string    // the failure reason behind a trip, if any
	Generation uint64    // the generation the breaker entered
	NextProbe  time.Time // when To is Open: when it becomes HALF_OPEN
	Level      int       // the backoff level after the transition
	Trips      uint32    // trips so far, this one included
	Parked     bool      // To is Open because of a permanent failure
}

// Snapshot is what a breaker looks like at an instant. It marshals to JSON.
type Snapshot struct {
	State            State     `json:"state"`
	Parked           bool      `json:"parked,omitempty"`
	Generation       uint64    `json:"generation"`
	FailuresInWindow int       `json:"failures_in_window"`
	Trips            uint32    `json:"trips"`
	Level            int       `json:"level"`
	ProbesInFlight   int       `json:"probes_in_flight,omitempty"`
	NextProbe        time.Time `json:"next_probe,omitzero"`
	LastTransition   time.Time `json:"last_transition,omitzero"`
	LastCause        Cause     `json:"last_cause,omitempty"`
	LastFailure      string    `json:"last_failure,omitempty"`
	LastFailureAt    time.Time `json:"last_failure_at,omitzero"`
}

// CauseRestored is the cause of a transition made by Restore: state loaded from a store or
// learned from another member of a fleet.
const CauseRestored Cause = "restored"

// Saved is the part of a breaker's state worth keeping across a restart or sharing with a fleet:
// enough for an OPEN breaker to keep its remaining window and its trip count, for a parked one to
// stay parked, and for the backoff level to go on decaying. Instants are absolute. It marshals to
// JSON.
type Saved struct {
	// State is Closed or Open; a HALF_OPEN breaker is saved as Open with NextProbe reached.
	State       State     `json:"state"`
	Parked      bool      `json:"parked,omitempty"`
	Level       int       `json:"level,omitempty"`
	Trips       uint32    `json:"trips,omitempty"`
	NextProbe   time.Time `json:"next_probe,omitzero"`
	ClosedAt    time.Time `json:"closed_at,omitzero"`
	LastFailure string    `json:"last_failure,omitempty"`
	// Changed is when the breaker last changed state: of two Saved values for one key, the later
	// one wins (see Breaker.Restore).
	Changed time.Time `json:"changed,omitzero"`
}

// Worth reports whether s holds anything a fresh breaker would not: a state other than CLOSED, or
// a backoff level not yet decayed.
func (s Saved) Worth() bool { return s.State != Closed || s.Level > 0 }
