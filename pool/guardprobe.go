package pool

import "time"

// The origin guard's probe. While an origin's guard is HALF_OPEN (guard.go) one request at a time
// goes through to ask "is the origin back?", and its verdict closes or re-trips the guard. The
// answer says something of the origin only if the exit it went through is sound: a probe that
// rode on a flaky exit's timeout, or on a banned pair's own probe, answers for that exit and
// re-trips the guard — one rung higher each time, up to its MaxCooldown — while the origin
// serves everyone else. Traced in the bench's round-3 world (seed 24, docs/decisions.md): after
// a 7-minute outage ended, four guard probes in a row took the due probe of a flaky exit's pair
// (a pick takes a due probe first, due.go), each timed out, and the origin was refused to
// every exit for 29 more minutes.
//
// So the guard's probe goes through a sound exit: both its breakers CLOSED, its pair not tracked
// as slow, flaky or ramping (latency.go), not held for its group (grouphold.go), its buckets
// ready — one drawn at random among them, by weight, from the first tier that has one. Only when
// no exit is sound does the probe take whatever an ordinary pick would (choose). It costs a scan
// of the pool's exits, once per guard probe: once per guard cooldown (10 s and up) per origin in
// trouble, never on an origin whose guard is CLOSED (the pick reads the guard permit's probe
// flag, which it holds anyway).

// chooseForGuardProbe is choose for a pick that carries its origin guard's probe.
func (p *Pool) chooseForGuardProbe(now time.Time, o *originState, avoid *Retries, view *wantView, failFast bool) choice {
	set := p.set.Load()
	for gi := range set.groups {
		g := &set.groups[gi]
		sub := view.group(gi, g)
		var c choice
		if p.tierSpent(now, g, sub, &c) {
			continue
		}
		n := sub.size(g)
		if n == 0 {
			continue
		}
		var pick reservoir
		start := int(p.rand() % uint64(n))
		for k := range n {
			i := sub.index((start + k) % n)
			if p.soundForProbe(now, o, g, i, avoid) {
				pick.offer(p, g.exits[i], g.id(i))
			}
		}
		if pick.es != nil {
			return choice{exit: pick.es, id: pick.id}
		}
	}
	return p.choose(now, o, avoid, view, failFast)
}

// soundForProbe reports whether exit i of g is sound enough to carry o's guard probe: nothing
// of its own answers for the probe's verdict.
func (p *Pool) soundForProbe(now time.Time, o *originState, g *tierGroup, i int, avoid *Retries) bool {
	id := g.id(i)
	if p.exitOpen.get(id) || o.open.get(id) || o.lat.slow.get(id) {
		return false
	}
	if avoid != nil && avoid.Avoids(g.exits[i].exit) {
		return false
	}
	if m := o.kin.held.Load(); m != nil && (*m)[id] != nil {
		return false
	}
	ok, _, _ := p.tokensReady(now, o, g, i)
	return ok
}
