package breaker

import "time"

// Permit is the right to send one request, handed out by Acquire. It takes exactly one verdict:
// Success, Failure, Neutral or Release. A verdict from an older generation (the breaker changed
// state after the permit was issued) is dropped. The zero Permit is valid and ignores verdicts.
// Permits are small values; copy them freely, but give each issued permit only one verdict.
type Permit struct {
	b    *Breaker
	gen  uint64
	slot int16 // probe slot in HALF_OPEN; -1 for a CLOSED permit
	seq  uint32
}

// Probe reports whether the permit is a HALF_OPEN probe.
func (p Permit) Probe() bool { return p.b != nil && p.slot >= 0 }

// Generation is the breaker generation the permit was issued in.
func (p Permit) Generation() uint64 { return p.gen }

// Valid reports whether the permit came from a successful Acquire.
func (p Permit) Valid() bool { return p.b != nil }

type verdict uint8

const (
	vSuccess verdict = iota
	vFailure
	vNeutral
)

// Success records that the request went well. In HALF_OPEN, SuccessesToClose successes close the
// breaker. A CLOSED permit's success, when the breaker counts no successes (FailureRatio 0), only
// marks the breaker used: it does not take the lock.
func (p Permit) Success(now time.Time) {
	if b := p.b; b != nil && p.slot < 0 && b.p.s.FailureRatio == 0 {
		if b.word.Load() == p.gen<<1 { // CLOSED, in the permit's generation
			b.touch(now.UnixNano())
		}
		return
	}
	p.report(now, vSuccess, Failure{})
}

// Failure records a failed request: it counts toward a trip in CLOSED, re-opens a HALF_OPEN breaker
// one backoff level higher, and parks the breaker if f.Permanent.
func (p Permit) Failure(now time.Time, f Failure) { p.report(now, vFailure, f) }

// Neutral records an outcome that says nothing about the key (the caller gave up, the origin had a
// bug of its own). A probe slot is freed; nothing is counted, so for a CLOSED permit it is free:
// it does not even take the breaker's lock.
func (p Permit) Neutral(now time.Time) {
	if p.slot < 0 || p.b == nil {
		return // inlined: a CLOSED permit, or none (the zero Permit)
	}
	p.report(now, vNeutral, Failure{})
}

// Release gives the permit back without a verdict. It has the effect of Neutral.
func (p Permit) Release(now time.Time) { p.Neutral(now) }

func (p Permit) report(now time.Time, v verdict, f Failure) {
	b := p.b
	if b == nil {
		return
	}
	t := now.UnixNano()
	var ev events
	b.mu.Lock()
	b.expireLeases(t, &ev)
	if p.gen == b.generation() && b.holds(p) {
		b.apply(t, p, v, f, &ev)
	}
	b.mu.Unlock()
	b.deliver(&ev)
}

// touch marks the breaker used at now. Verdicts arrive out of order: an older instant never
// moves lastUse back, and an equal one does not write (many verdicts share an instant).
func (b *Breaker) touch(now int64) {
	if b.lastUse.Load() < now {
		b.lastUse.Store(now)
	}
}

// holds reports whether p's probe slot (if it is a probe) is still p's.
func (b *Breaker) holds(p Permit) bool {
	if p.slot < 0 {
		return b.state == Closed
	}
	leases := b.leases()
	if int(p.slot) >= len(leases) {
		return false
	}
	l := leases[p.slot]
	return l.deadline != 0 && l.seq == p.seq
}

func (b *Breaker) apply(now int64, p Permit, v verdict, f Failure, ev *events) {
	b.touch(now)
	if p.slot >= 0 {
		b.probe.leases[p.slot] = lease{} // holds(p): HALF_OPEN, so probe is there
		b.probe.inflight--
	}
	switch v {
	case vSuccess:
		if b.p.s.FailureRatio > 0 && b.state == Closed {
			b.tallied().volume.add(now, false)
		}
		if b.state == HalfOpen {
			b.probe.successes++
			if b.probe.successes >= b.p.s.SuccessesToClose {
				b.close(now, ev)
			}
		}
	case vFailure:
		b.lastFail, b.lastFailT = reason(f.Reason), now
		if f.Permanent {
			b.park(now, ev)
			return
		}
		if b.state == HalfOpen {
			b.trip(now, f, CauseProbeFailed, ev)
			return
		}
		t := b.tallied()
		if f.Soft && f.RetryAfter <= 0 {
			if !b.softPending(now) {
				t.softAt = now // the first half of a failure; it waits one Window for its other half
				return
			}
			t.softAt = 0
		}
		t.add(now, b.p.s.FailureThreshold)
		if t.volume != nil {
			t.volume.add(now, true)
		}
		switch {
		case f.RetryAfter > 0:
			b.trip(now, f, CauseRetryAfter, ev)
		case f.Decisive:
			b.trip(now, f, CauseDecisive, ev)
		case b.shouldTrip(now):
			b.trip(now, f, CauseFailures, ev)
		}
	}
}

// shouldTrip applies the count condition and, for busy breakers, the ratio condition.
func (b *Breaker) shouldTrip(now int64) bool {
	t := b.tally
	if !t.full(now - int64(b.p.s.Window)) {
		return false
	}
	if t.volume == nil {
		return true
	}
	total, fails := t.volume.totals(now)
	if total < b.p.s.MinVolume {
		return true
	}
	return float64(fails) >= b.p.s.FailureRatio*float64(total)
}
