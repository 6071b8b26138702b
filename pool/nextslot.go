package pool

import "time"

// When does a site have room next?
//
// A crawler whose pick for a site is refused should learn when the site will take a request
// again — through any of its exits — so that it can schedule the site instead of idling or
// abandoning it. The answer is what the pool already holds: each exit's and pair's breaker (when
// it may be probed), each bucket and learned window (when its next token or slot comes), and the
// origin's guard and bucket. A refused pick has just looked at all of it (its scan keeps the
// soonest probe and the soonest token), so the refusal errors carry it at no cost (RoomIn); a
// scheduler that asks ahead of a pick calls NextSlot, which looks at every exit once and is not
// for each request.

// NextSlot is shorthand for NextSlotAt(now, origin) with now read from the pool's clock.
func (p *Pool) NextSlot(origin string) time.Time { return p.NextSlotAt(p.clock.Now(), origin) }

// NextSlotAt returns the soonest instant, at or after now, at which some exit may take a request
// for origin by what the pool knows: now when one may take it now; else the soonest of the
// instants its exits' and pairs' breakers may admit a probe, its buckets and learned windows give
// a token, and the origin's guard and bucket admit the origin. It returns the zero time when no
// exit may ever take one by what the pool knows (no exits, or every exit removed). It takes
// nothing and changes nothing; it looks at every exit (as Capacity does), so it is for a
// scheduler between picks, not for each request. Safe for concurrent use.
func (p *Pool) NextSlotAt(now time.Time, origin string) time.Time {
	o := p.liveOrigin(origin)
	floor := now
	if !o.guard.cfg.Disabled {
		if ok, at := o.guard.b.Ready(now); !ok {
			floor = later(floor, at)
		}
	}
	if ok, at := o.bucket.Ready(now); !ok {
		floor = later(floor, at)
	}
	set := p.set.Load()
	var soonest time.Time
	for gi := range set.groups {
		g := &set.groups[gi]
		for i := range g.exits {
			if p.gone.get(g.id(i)) {
				continue
			}
			ok, at, _ := p.ready(now, o, g, i, nil)
			if ok {
				at = now
			}
			if !at.IsZero() && (soonest.IsZero() || at.Before(soonest)) {
				soonest = at
			}
		}
	}
	if soonest.IsZero() {
		return time.Time{}
	}
	return later(soonest, floor)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// soonestOf returns the sooner of two instants, either of which may be zero (unknown).
func soonestOf(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
