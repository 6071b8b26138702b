package breaker

import "time"

// Save returns the breaker's state at now, for a store or a fleet (see Saved).
func (b *Breaker) Save(now time.Time) Saved {
	t := now.UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	st, until := b.view(t)
	s := Saved{
		State: Closed, Level: b.effectiveLevel(t), Trips: b.trips,
		ClosedAt: unixTime(b.closedAt), LastFailure: b.lastReason(), Changed: unixTime(b.changedAt),
	}
	switch st {
	case Open:
		s.State, s.Parked, s.NextProbe = Open, b.parked, time.Unix(0, until)
	case HalfOpen:
		// Probing may start at once: whoever loads this will admit a probe of its own.
		s.State, s.NextProbe = Open, time.Unix(0, min(b.nextProbe, t))
		if b.state == HalfOpen {
			s.NextProbe = now
		}
	}
	return s
}

// Restore makes the breaker take the state s at now, unless the breaker has changed state since
// s.Changed (its own news is newer). An OPEN s keeps its NextProbe (if that has passed, the
// breaker admits a probe at once); a CLOSED s closes the breaker. Probes in flight lose their
// slots (their verdicts are dropped as stale). It reports whether anything changed, and calls the
// state-change callback with CauseRestored when the state did.
//
// s comes from outside — a file, another process, a clock that may be ahead — so it is first
// clamped to what this breaker's policy could have produced (Policy.Clamp): one bad row or one
// fleet member whose clock runs fast cannot take a key out for longer than the policy ever would.
func (b *Breaker) Restore(now time.Time, s Saved) bool {
	s, ok := b.p.Clamp(now, s)
	if !ok {
		return false
	}
	var ev events
	b.mu.Lock()
	if s.Changed.UnixNano() < b.changedAt && !s.Changed.IsZero() {
		b.mu.Unlock()
		return false
	}
	if s.State == Closed && b.state == Closed {
		// Nothing to move; keep the later memory of the backoff level.
		changed := s.Level != int(b.level)
		b.level, b.trips = uint8(s.Level), max(b.trips, s.Trips) // s.Level is clamped
		if !s.ClosedAt.IsZero() {
			b.closedAt = s.ClosedAt.UnixNano()
		}
		b.mu.Unlock()
		return changed
	}
	b.applySaved(now, s, CauseRestored, &ev)
	b.mu.Unlock()
	b.deliver(&ev)
	return true
}

// applySaved makes the breaker take s at now, with cause c, and adds the transition to ev. The
// caller holds b.mu, and delivers ev after unlocking.
func (b *Breaker) applySaved(now time.Time, s Saved, c Cause, ev *events) {
	t := now.UnixNano()
	from, _ := b.view(t)
	b.level = uint8(min(max(s.Level, 0), b.p.maxLevel))
	b.trips = s.Trips
	if s.LastFailure != "" {
		b.lastFail = reason(s.LastFailure)
	}
	if !s.ClosedAt.IsZero() {
		b.closedAt = s.ClosedAt.UnixNano()
	}
	gen := b.newGeneration()
	if s.State == Closed {
		b.state, b.parked = Closed, false
	} else {
		b.state, b.parked = Open, s.Parked
		b.nextProbe = s.NextProbe.UnixNano()
	}
	b.publish(gen)
	b.changedAt, b.cause = t, causeOf(c)
	if !s.Changed.IsZero() {
		b.changedAt = s.Changed.UnixNano()
	}
	tr := Transition{
		From: from, To: b.state, At: now, Cause: c, Reason: b.lastReason(),
		Generation: b.generation(), Level: int(b.level), Trips: b.trips, Parked: b.parked,
	}
	if b.state == Open {
		tr.NextProbe = time.Unix(0, b.nextProbe)
	}
	ev.add(tr)
}

// CauseOverride is the cause of a transition made by Override: an operator's hand.
const CauseOverride Cause = "override"

// Override is an operator's hand on the breaker at now: with until after now it opens the breaker
// (parked: no probe) until then, whatever its policy would have done, recording reason as its last
// failure; with a zero until it closes it, fresh (backoff level 0). Probes in flight lose their
// slots. It calls the state-change callback with CauseOverride, and reports whether the state
// changed. An override is no failure: the trip count is kept, and no backoff level grows.
func (b *Breaker) Override(now time.Time, until time.Time, reason string) bool {
	var ev events
	b.mu.Lock()
	from, _ := b.view(now.UnixNano())
	s := Saved{State: Closed, Trips: b.trips, Changed: now}
	if until.After(now) {
		s.State, s.Parked, s.NextProbe, s.LastFailure = Open, true, until, reason
		s.Level = int(b.level)
	} else if from == Closed {
		b.mu.Unlock()
		return false
	}
	b.applySaved(now, s, CauseOverride, &ev)
	b.mu.Unlock()
	b.deliver(&ev)
	return true
}

// maxReasonLen bounds the LastFailure a restored state may bring: reasons are short class names.
const maxReasonLen = 128

// LongestOpen is the longest OPEN window the policy can produce: the longest of MaxCooldown,
// ParkFor and MaxRetryAfter, lengthened by the most jitter.
func (p *Policy) LongestOpen() time.Duration {
	d := max(p.s.MaxCooldown, p.s.ParkFor, p.s.MaxRetryAfter)
	return time.Duration(addSat(int64(d), int64(float64(d)*p.s.Jitter)))
}

// Clamp returns s made possible for this policy at now, or ok false if s cannot be a saved state
// at all (an unknown State). Restore applies it to everything it is given:
//   - an OPEN window ends no later than now + LongestOpen, and one that ended before now (or at an
//     instant too far in the past to compute with) ends at now: a probe may go at once;
//   - a HALF_OPEN state is taken as OPEN with its window over;
//   - Level is kept within [0, MaxLevel], whatever the state;
//   - Changed and ClosedAt are never after now (a clock ahead does not win every later
//     comparison), and instants before 1970 are taken as unknown;
//   - LastFailure is cut to 128 bytes.
func (p *Policy) Clamp(now time.Time, s Saved) (Saved, bool) {
	epoch := time.Unix(0, 0)
	switch s.State {
	case Closed, Open:
	case HalfOpen:
		s.State, s.NextProbe = Open, now
	default:
		return Saved{}, false
	}
	s.Level = min(max(s.Level, 0), p.maxLevel)
	if s.State == Open {
		if limit := now.Add(p.LongestOpen()); s.NextProbe.After(limit) {
			s.NextProbe = limit
		}
		if s.NextProbe.Before(now) {
			s.NextProbe = now
		}
	} else {
		s.Parked, s.NextProbe = false, time.Time{}
	}
	for _, t := range []*time.Time{&s.Changed, &s.ClosedAt} {
		switch {
		case t.Before(epoch):
			*t = time.Time{}
		case t.After(now):
			*t = now
		}
	}
	if len(s.LastFailure) > maxReasonLen {
		s.LastFailure = s.LastFailure[:maxReasonLen]
	}
	return s, true
}
