package pool

import (
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// finish applies v to the ticket's breakers at now, exactly once per ticket (the caller
// guarantees it), and returns the pair's and the exit's states afterwards.
//
// Routing of a verdict:
//   - Success: pair and exit succeed.
//   - Transient, pair scope: the pair fails (soft failures count half) unless the origin guard
//     blames the origin; the exit fails too when the trouble is connection-level, else it is neutral.
//     A Retry-After is honoured on the pair even when the guard blames the origin.
//   - Transient or Permanent, exit scope: the exit fails (or is parked); the pair is neutral.
//   - Permanent, pair scope: the pair is parked.
//   - Neutral: nothing is counted; every slot is freed.
func (p *Pool) finish(now time.Time, t *ticket, v Verdict, path uint16) (pairAfter, exitAfter breaker.State) {
	p.endAttempt(t)
	if latencySample(v) {
		d := now.Sub(t.now)
		t.origin.lat.observe(now, t.id, d, v.Class == ClassTimeout)
		if t.origin.limits != nil {
			t.origin.limits.observe(now, t.id, d, t.origin.load.get(t.id)+1)
		}
		if v.Outcome == Success {
			p.mix.note(now, t.origin) // goodput.go
		}
	}
	originsFault := t.origin.guard.observe(now, t.id, v, t.originPm, path)
	var exitPm breaker.Permit
	if v.Outcome != Success || t.exitEpoch == 0 || !t.exit.quiet {
		exitPm = p.exitPermit(t) // else a success it would only mark used (exitState.quiet)
	}
	p.adapt(now, t, v)
	f := breaker.Failure{
		Permanent:  v.Outcome == Permanent,
		Soft:       v.Soft,
		RetryAfter: v.RetryAfter,
		Reason:     string(v.Class),
		// A 429's Retry-After is when the origin's window resets: the pair rests that long, not
		// a BaseCooldown that would skip windows of a site counting short ones (issue 35).
		ExactRetryAfter: v.Class == ClassRateLimited,
	}
	f.MaxWindow = restCap(now, t, v)
	if v.unannouncedLimit() && !p.limits && t.origin.limited.get(t.id) {
		// A 429 without Retry-After to a pair held to a window it learned: it rests one window,
		// at most UnannouncedRest, as if the origin had said so — not BaseCooldown (20 s), which
		// skipped every other window of a site counting 10-s ones. Resting only by its pace (no
		// trip) brought it back before a clock-aligned window reset, into more 429s: 2,471 →
		// 4,747 in the round-3 world, seed 2 (docs/decisions.md).
		if w := t.origin.pacer(t.id).Held(); !w.IsZero() {
			f.RetryAfter, f.ExactRetryAfter = min(w.Length, UnannouncedRest), true
		}
	}
	repeatOffence(now, t, v, &f) // offence.go: a pair banned again soon after a ban rests longer
	// A block, or without configured limits a 429 without Retry-After, trips the pair at once: the
	// next attempt would meet the same answer. Configured limits answer such a 429 by cutting the
	// pair's pace (ratelimit.Pair.Limited), and it counts towards the threshold as before.
	f.Decisive = v.Class == ClassBlocked || (v.unannouncedLimit() && !p.limits)
	switch {
	case v.Outcome == Success:
		t.pairPm.Success(now)
		exitPm.Success(now)
		t.exit.blocks.served(now, t.origin.key) // a rotating gateway's answer (gateway_blockrate.go)
		if t.exit.kept {
			t.exit.exit.gw.s.keptServed(now) // a kept session's own breaker (gateway_kept.go)
		}
	case v.Outcome == Neutral:
		t.pairPm.Neutral(now)
		exitPm.Neutral(now)
	case v.Scope == ScopeExit:
		t.pairPm.Neutral(now)
		ef := f
		ef.MaxWindow, ef.Decisive = p.exitRest, false // the pair's cadence is not the exit's
		exitPm.Failure(now, ef)
	case v.Scope == ScopeOrigin || (originsFault && v.RetryAfter <= 0):
		t.pairPm.Neutral(now)
		exitPm.Neutral(now)
	case originsFault:
		// The origin is to blame, but it asked this exit to come back later: honour that.
		p.pairPermit(t).Failure(now, f)
		exitPm.Neutral(now)
	case t.exit.blocks.absorbs(now, t, v, &f): // a rotating gateway's block, counted (gateway_blockrate.go)
		t.pairPm.Neutral(now)
		exitPm.Neutral(now)
	default: // pair scope
		p.pairPermit(t).Failure(now, f)
		// A session's own failures are its IP's (gateway_rotate.go, gateway_kept.go), also when they arrive after it was replaced.
		switch {
		case v.ConnLevel && t.exit.kept:
			exitPm.Neutral(now)
			p.keptFailed(now, t.exit.exit.gw.s, f.Reason)
		case v.ConnLevel && t.exit.exit.gw == nil:
			exitPm.Failure(now, breaker.Failure{Reason: f.Reason, MaxWindow: p.exitRest})
		default:
			exitPm.Neutral(now)
		}
	}
	pairAfter = breaker.Closed
	if t.pair != nil {
		pairAfter = t.pair.b.State(now)
		if t.pairPm.Probe() && pairAfter == breaker.HalfOpen {
			t.pair.probeBack(now) // its slot is free again, with no transition to say so
		}
	}
	exitAfter = breaker.Closed
	if p.exitOpen.get(t.id) { // clear: wide is CLOSED, read without touching it
		exitAfter = t.exit.wide.State(now)
	}
	return pairAfter, exitAfter
}

// epochAfter reports whether origin epoch a is later than b. Epochs wrap at 2³²: only the order
// of two taken less than 2³¹ re-closes apart (one attempt's lifetime) matters.
func epochAfter(a, b uint32) bool { return int32(a-b) > 0 }

// pairPermit returns the permit a failure of t's pair is given. An attempt admitted while the pair
// was CLOSED without touching its breaker (or before it had one) held a CLOSED permit in spirit:
// the breaker is looked up, or made, now, and the failure counts only if the pair is CLOSED in the
// generation the attempt was admitted in. One that tripped meanwhile is not CLOSED; one that tripped
// and closed again has a later closedEpoch than the attempt saw: either way the failure is stale and
// dropped. (ClosedPermit is read before closedEpoch: a breaker publishes its generation after its
// Mirror hook has stored closedEpoch, so a generation read at or after a re-close comes with the
// re-close's epoch.)
func (p *Pool) pairPermit(t *ticket) breaker.Permit {
	if !t.lazyPair {
		return t.pairPm // a permit, or none when a dry run sent the attempt past an OPEN pair
	}
	o := t.origin
	for range 3 {
		if pr, alive := p.pairFor(o, t.exit); alive {
			t.pair = pr
			pm, closed := pr.b.ClosedPermit()
			if !closed || epochAfter(pr.closedEpoch.Load(), t.epoch) {
				return breaker.Permit{}
			}
			return pm
		}
		o = p.liveOrigin(o.key) // swept while the attempt ran; a fresh pair's epoch is 0
	}
	return breaker.Permit{}
}

// release gives back every permit of a ticket that never produced an attempt.
func (p *Pool) release(now time.Time, t *ticket) {
	p.endAttempt(t)
	t.pairPm.Release(now)
	if t.pairPm.Probe() {
		t.pair.probeBack(now)
	}
	t.exitPm.Release(now)
	t.originPm.Release(now)
}
