package pool

import (
	"fmt"
	"time"
	"unicode"
)

// Operator overrides: ban or release a pair, or an exit for every origin, by hand — from a
// console, a status page or a script that knows what the breakers cannot (a provider's notice, a
// site's allow-list). An override goes through the breaker like any transition (cause
// breaker.CauseOverride): observers hear of it, the snapshot and the stores show it, and a fleet
// shares it as any state.

// DefaultBanReason is the last failure a ban records when its caller gives none.
const DefaultBanReason = "override"

// maxBanReason bounds a ban's reason: it is shown as a breaker's last failure, a short label.
const maxBanReason = 64

// Ban is shorthand for BanAt(now, label, origin, d, reason) with now read from the pool's clock.
func (p *Pool) Ban(label, origin string, d time.Duration, reason string) error {
	return p.BanAt(p.clock.Now(), label, origin, d, reason)
}

// BanAt takes the exit labelled label out for origin for d from now: its (exit, origin) pair
// breaker opens, parked, until now+d and is probed then as after any trip. With origin "" the
// exit's own breaker is banned instead: the exit is out for every origin. reason (a short label
// of printable characters; DefaultBanReason if empty) is recorded as the breaker's last failure.
// An error names an unknown exit, a non-positive d or a bad reason.
func (p *Pool) BanAt(now time.Time, label, origin string, d time.Duration, reason string) error {
	if d <= 0 {
		return fmt.Errorf("pool: ban %s: duration %v must be positive", RedactRaw(label), d)
	}
	if reason == "" {
		reason = DefaultBanReason
	}
	if err := checkBanReason(reason); err != nil {
		return fmt.Errorf("pool: ban %s: %w", RedactRaw(label), err)
	}
	return p.override(now, label, origin, now.Add(d), reason)
}

// Release is shorthand for ReleaseAt(now, label, origin) with now read from the pool's clock.
func (p *Pool) Release(label, origin string) error {
	return p.ReleaseAt(p.clock.Now(), label, origin)
}

// ReleaseAt closes, at now, the (exit, origin) pair breaker of the exit labelled label — or with
// origin "" the exit's own breaker — whatever opened it (a ban by hand, a trip, a park): it
// serves again at once, its backoff level reset. A breaker already CLOSED is left as it is. An
// error names an unknown exit.
func (p *Pool) ReleaseAt(now time.Time, label, origin string) error {
	return p.override(now, label, origin, time.Time{}, "")
}

// override applies a ban until until (zero: a release) to the breaker of label for origin.
func (p *Pool) override(now time.Time, label, origin string, until time.Time, reason string) error {
	es := p.set.Load().byLabel[label]
	if es == nil {
		return fmt.Errorf("pool: no exit labelled %q", RedactRaw(label))
	}
	if origin == "" {
		es.wide.Override(now, until, reason)
		return nil
	}
	for range 3 {
		o := p.liveOrigin(origin)
		if pr, alive := p.pairFor(o, es); alive {
			pr.b.Override(now, until, reason)
			return nil
		}
	}
	return fmt.Errorf("pool: override %s for %s: the origin's state kept being swept", RedactRaw(label), origin)
}

// checkBanReason validates a ban's reason: 1 to maxBanReason printable characters.
func checkBanReason(r string) error {
	if len(r) > maxBanReason {
		return fmt.Errorf("reason of %d bytes, want at most %d", len(r), maxBanReason)
	}
	for _, c := range r {
		if !unicode.IsPrint(c) {
			return fmt.Errorf("reason %q: want printable characters", r)
		}
	}
	return nil
}
