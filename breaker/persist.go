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
		ClosedAt: unixTime(b.closedAt), LastFailure: b.lastFail, Changed: unixTime(b.changedAt),
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
func (b *Breaker) Restore(now time.Time, s Saved) bool {
	t := now.UnixNano()
	var ev events
	b.mu.Lock()
	if s.Changed.UnixNano() < b.changedAt && !s.Changed.IsZero() {
		b.mu.Unlock()
		return false
	}
	from, _ := b.view(t)
	if s.State == Closed && b.state == Closed {
		// Nothing to move; keep the later memory of the backoff level.
		changed := s.Level != b.level
		b.level, b.trips = s.Level, max(b.trips, s.Trips)
		if !s.ClosedAt.IsZero() {
			b.closedAt = s.ClosedAt.UnixNano()
		}
		b.mu.Unlock()
		return changed
	}
	b.level = min(max(s.Level, 0), b.p.maxLevel)
	b.trips = s.Trips
	if s.LastFailure != "" {
		b.lastFail = s.LastFailure
	}
	if !s.ClosedAt.IsZero() {
		b.closedAt = s.ClosedAt.UnixNano()
	}
	b.newGeneration()
	if s.State == Closed {
		b.state, b.parked = Closed, false
	} else {
		b.state, b.parked = Open, s.Parked
		b.nextProbe = s.NextProbe.UnixNano()
	}
	b.publish()
	b.changedAt, b.lastCause = t, CauseRestored
	if !s.Changed.IsZero() {
		b.changedAt = s.Changed.UnixNano()
	}
	tr := Transition{
		From: from, To: b.state, At: now, Cause: CauseRestored, Reason: b.lastFail,
		Generation: b.gen, Level: b.level, Trips: b.trips, Parked: b.parked,
	}
	if b.state == Open {
		tr.NextProbe = time.Unix(0, b.nextProbe)
	}
	ev.add(tr)
	b.mu.Unlock()
	b.deliver(&ev)
	return true
}
