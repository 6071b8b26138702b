package pool

import "time"

// sampleTries is how many random draws selection makes before it scans the whole tier. While most
// exits are ready a draw almost always hits, so picking costs the same for 10 exits or 100,000;
// when most are not, the scan finds the few that are and the soonest probe time.
const sampleTries = 8

// distinctTries bounds the redraws that make a pick's second candidate another exit than its
// first (by weight, one exit may hold most of a tier's weight).
const distinctTries = 4

// choice is what choose found: an exit, or when none is ready, the soonest instant a breaker may
// admit a probe and the soonest a token comes for an exit whose breakers are ready.
type choice struct {
	exit       *exitState
	id         uint32 // exit.id, so that acquiring it need not load the exit
	probeAt    time.Time
	tokenAt    time.Time
	tokenScope Scope
	// budget, when set, is a spent budget of a tier that had candidates (budget.go), the one
	// that renews soonest, at budgetRenews.
	budget       *tierBudget
	budgetRenews time.Time
}

// choose picks a ready exit: a due probe first, then by sampling, then by scanning, from the tier
// spillFrom says, else the others in order — among the exits of view only, when the request has a
// Want (nil: every exit). failFast says the caller gets a refusal rather than a wait for a token
// (holdsSlow, goodput.go).
func (p *Pool) choose(now time.Time, o *originState, memo *Retries, view *wantView, failFast bool) choice {
	set := p.set.Load()
	var c choice
	for pass := 0; pass < 2; pass++ {
		avoid := memo
		if pass == 1 {
			if memo.empty() {
				break
			}
			avoid = nil // only exits that already failed this request are left: use them
		}
		start := p.spillFrom(now, o, set) // the tier to try first: spill.go
		if o.due.passed(now.UnixNano()) {
			if es, id := p.dueProbe(now, o, set, view, start, avoid, &c); es != nil {
				return choice{exit: es, id: id} // a probe due first goes first (due.go)
			}
		}
		if start > 0 {
			if es, id := p.probeBelow(now, o, set, view, start, avoid, &c); es != nil {
				return choice{exit: es, id: id} // a tier passed by for want of health still probes
			}
		}
		for k := range set.groups {
			gi := spillOrder(k, start)
			g := &set.groups[gi]
			sub := view.group(gi, g)
			if p.tierSpent(now, g, sub, &c) {
				continue // escalate: the tier has spent its budget
			}
			if es, id := p.sample(g, sub, now, o, avoid); es != nil {
				return choice{exit: es, id: id}
			}
			if p.scan(g, sub, now, o, avoid, failFast, &c); c.exit != nil {
				return choice{exit: c.exit, id: c.id}
			}
		}
	}
	return c
}

// ready reports whether exit i of g may take a request for o now; if not, when that may change,
// and whether only a token is missing (scope ScopeExit or ScopePair; scopeNone when a breaker
// refuses). Buckets are peeked at only once the breakers would admit: an OPEN pair takes no token.
func (p *Pool) ready(now time.Time, o *originState, g *tierGroup, i int, avoid *Retries) (bool, time.Time, Scope) {
	if ok, at := p.breakersReady(now, o, g, i, avoid); !ok {
		return false, at, scopeNone
	}
	return p.tokensReady(now, o, g, i)
}

// breakersReady reports whether the breakers of exit i of g (its own and its pair's with o) would
// admit a request now, and if not when that may change. The common case — both CLOSED — is
// answered from two bit tables without touching the exit or the pair; only exits with a breaker
// out of CLOSED are looked at closely.
func (p *Pool) breakersReady(now time.Time, o *originState, g *tierGroup, i int, avoid *Retries) (bool, time.Time) {
	id := g.id(i)
	if avoid != nil && avoid.Avoids(g.exits[i].exit) {
		return false, time.Time{}
	}
	if !p.dryRun && o.kin.heldOff(now, id, p.probeLease) {
		return false, time.Time{} // its group is held for o, and its probe is out (grouphold.go)
	}
	if p.dryRun || (!p.exitOpen.get(id) && !o.open.get(id)) {
		return true, time.Time{}
	}
	ok, at := true, time.Time{}
	if p.exitOpen.get(id) {
		ok, at = exitReady(now, g.exits[i]) // a kept gateway session's own rest too (gateway_kept.go)
	} else if until, known := o.due.notBefore(now); known {
		return false, until // the pair is out of CLOSED, and none of the origin's admits before until
	}
	if pr := o.lookupPair(id); pr != nil {
		pok, pat := pr.b.Ready(now)
		if !ok && pok && passesRest(now, g.exits[i], pr) {
			return true, time.Time{}
		}
		if !ok && !pok && pat.After(at) {
			at = pat // usable only once both breakers are: report the later instant
		} else if ok && !pok {
			ok, at = false, pat
		}
	}
	return ok, at
}

// tokensReady peeks, taking nothing, at the buckets of exit i of g for o. Without configured
// limits, and while the pair has shown none, it reads one bit table and nothing else.
func (p *Pool) tokensReady(now time.Time, o *originState, g *tierGroup, i int) (bool, time.Time, Scope) {
	if o.limits != nil { // WithAdaptiveConcurrency
		if full, at := o.limits.full(now, &o.load, g.id(i)); full {
			return false, at, ScopePair // at its concurrency limit (limit.go): as good as no token
		}
	}
	if g.buckets != nil {
		if ok, at := g.buckets[i].Ready(now); !ok {
			return false, at, ScopeExit
		}
	}
	if o.limited.get(g.id(i)) {
		if ok, at := o.pacer(g.id(i)).Bucket().Ready(now); !ok {
			return false, at, ScopePair
		}
	}
	return true, time.Time{}, scopeNone
}

// draw returns the index in g of a random exit of sub (of g), by weight.
func (p *Pool) draw(g *tierGroup, sub *subset) int {
	return sub.index(p.drawK(sub.size(g), sub.weights(g)))
}

// drawK returns a random k in [0, n), by the cumulative weights cum (nil: equal weights).
func (p *Pool) drawK(n int, cum []float64) int {
	r := p.rand()
	if cum == nil {
		return below(uint32(r), n)
	}
	total := cum[len(cum)-1]
	x := float64(r>>11) / (1 << 53) * total
	lo, hi := 0, len(cum)-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if cum[mid] <= x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// below returns a number in [0, n) from 32 random bits x, n < 2³²: Lemire's multiply-shift,
// which needs no division (a 64-bit division costs more than the rest of a draw).
func below(x uint32, n int) int { return int(uint64(x) * uint64(n) >> 32) }

// drawTwo returns the indexes in g of two random exits of sub (of at least two), by weight,
// distinct: two draws of one exit would let it win whatever its load. Without weights the second
// is drawn among the others; with weights it is drawn again, up to distinctTries times (one exit
// may hold nearly all of a tier's weight, and then it may be both).
func (p *Pool) drawTwo(g *tierGroup, sub *subset) (int, int) {
	n, cum := sub.size(g), sub.weights(g)
	if cum == nil { // both from one random word: a draw costs as much as the rest of a candidate
		r := p.rand()
		i := below(uint32(r), n)
		j := i + 1 + below(uint32(r>>32), n-1)
		if j >= n {
			j -= n
		}
		return sub.index(i), sub.index(j)
	}
	i := p.drawK(n, cum)
	j := p.drawK(n, cum)
	for try := 0; j == i && try < distinctTries; try++ {
		j = p.drawK(n, cum)
	}
	return sub.index(i), sub.index(j)
}

// sample draws up to sampleTries exits and returns a ready one: the first, or with LeastLoaded the
// better of the first two distinct ones whose breakers admit (lower expected latency × (in flight
// + 1): prefer, latency.go) — and only that one's buckets are peeked at (then the other's), so a
// pick peeks at one bucket, not at every candidate's.
func (p *Pool) sample(g *tierGroup, sub *subset, now time.Time, o *originState, avoid *Retries) (*exitState, uint32) {
	n := sub.size(g)
	if n == 0 {
		return nil, 0
	}
	if p.selection == Random || n == 1 {
		tracking := o.lat.tracking() // slow or ramping pairs: their rules apply
		for range sampleTries {
			i := p.draw(g, sub)
			if ok, _ := p.breakersReady(now, o, g, i, avoid); !ok {
				continue
			}
			if tracking && !o.lat.ramped(now, g.id(i), p.rand()) {
				continue // back from OPEN: not yet its full share (slow start)
			}
			if ok, _, _ := p.tokensReady(now, o, g, i); ok {
				return g.exits[i], g.id(i)
			}
		}
		return nil, 0
	}
	var first candidate
	have, tracking := false, o.lat.tracking() // slow or ramping pairs: their rules apply
	for k := 0; k < sampleTries; k += 2 {
		// Two candidates at a time, their pair bits and their exits loaded before either is
		// judged: in a pool of many exits and origins each of these loads misses the cache, and
		// the misses then overlap. (The winner's exit, loaded only once it had won, was a miss of
		// its own, which the atomic counting it in flight then waited for.)
		i, j := p.drawTwo(g, sub)
		cand := [2]candidate{{i, g.id(i), g.exits[i]}, {j, g.id(j), g.exits[j]}}
		o.open.touch(cand[0].id, cand[1].id)
		for _, c := range cand {
			if have && c.id == first.id {
				continue // the same exit again: no comparison
			}
			if ok, _ := p.breakersReady(now, o, g, c.i, avoid); !ok {
				continue
			}
			if tracking && !o.lat.ramped(now, c.id, p.rand()) {
				continue // back from OPEN: not yet its full share (slow start)
			}
			if !have {
				first, have = c, true
				continue
			}
			a, b := first, c
			if p.prefer(now, o, a, b) {
				a, b = b, a
			}
			for _, x := range [2]candidate{a, b} {
				if tracking && p.passOver(now, o, x.id) {
					continue // slow: draw again; the scan takes a slow exit only if nothing else is ready
				}
				if ok, _, _ := p.tokensReady(now, o, g, x.i); ok {
					return x.es, x.id
				}
			}
			have = false
		}
	}
	if have && !(tracking && p.passOver(now, o, first.id)) {
		if ok, _, _ := p.tokensReady(now, o, g, first.i); ok {
			return first.es, first.id
		}
	}
	return nil, 0 // the scan looks at every exit, and takes a slow one only if nothing else is ready
}

// candidate is one draw of sample: the exit's index in its group, its id and its state.
type candidate struct {
	i  int
	id uint32
	es *exitState
}

// scan visits every exit of sub (of g) from a random start and picks a ready one at random (by
// weight) into c.exit — one the origin does not track as slow, if any is ready, else the slow one
// of the lowest cost (latency.go); when there is none it keeps in c the soonest instants a breaker or a token may make one ready. A slow one is
// taken only when the worker is not better off refused (holdsSlow) and no other exit's token
// comes sooner than its answer would.
func (p *Pool) scan(g *tierGroup, sub *subset, now time.Time, o *originState, avoid *Retries, failFast bool, c *choice) {
	n := sub.size(g)
	if n == 0 {
		return
	}
	start := int(p.rand() % uint64(n))
	tracking := o.lat.tracking()
	var fast reservoir
	var slow cheapest
	for k := range n {
		i := sub.index((start + k) % n)
		ok, at, scope := p.ready(now, o, g, i, avoid)
		switch {
		case ok && tracking && p.passOver(now, o, g.id(i)):
			slow.offer(p.cost(now, o, g.id(i)), g.exits[i], g.id(i))
		case ok:
			fast.offer(p, g.exits[i], g.id(i))
		case at.IsZero():
		case scope != scopeNone:
			if c.tokenAt.IsZero() || at.Before(c.tokenAt) {
				c.tokenAt, c.tokenScope = at, scope
			}
		case c.probeAt.IsZero() || at.Before(c.probeAt):
			c.probeAt = at
		}
	}
	c.exit, c.id = fast.es, fast.id
	if c.exit == nil {
		o.lat.noteBound(now) // no fast exit ready: the origin binds (goodput.go)
	}
	if c.exit == nil && slow.es != nil {
		p.takeSlow(now, o, slow, failFast, c)
	}
}

// takeSlow takes into c the slow exit of slow, when only slow exits are ready, if the worker is not
// better off refused or waiting for another exit's token (goodput.go).
func (p *Pool) takeSlow(now time.Time, o *originState, slow cheapest, failFast bool, c *choice) {
	idle := p.waitsIdle(now, o, slow.id)
	if idle || p.holdsSlow(now, o, failFast) {
		// Only slow exits are ready. Holding a worker for a slow answer beats waiting only when no
		// other exit's token comes sooner than that answer would: goodput per worker-second —
		// unless the pool's workers mostly wait (goodput.go), when the slow pair's share adds to
		// what the other exits' tokens serve.
		wait := c.tokenAt.Sub(now).Seconds()
		if c.tokenAt.IsZero() || idle || wait >= o.lat.estimate(now, slow.id, o.lat.typicalSeconds()) {
			c.exit, c.id = slow.es, slow.id
		}
	}
}

// cheapest keeps the exit of the lowest cost offered to it (the first of equals): among slow
// exits, the one whose answer holds a worker the least — a 1.5 s exit is not drawn as often as
// one a single noisy answer made slow.
type cheapest struct {
	cost float64
	es   *exitState
	id   uint32
}

func (c *cheapest) offer(cost float64, es *exitState, id uint32) {
	if c.es == nil || cost < c.cost {
		c.cost, c.es, c.id = cost, es, id
	}
}

// reservoir is weighted reservoir sampling over the exits offered to it: each ends up its choice
// with probability weight / the total weight offered.
type reservoir struct {
	total float64
	es    *exitState
	id    uint32
}

func (r *reservoir) offer(p *Pool, es *exitState, id uint32) {
	w := es.exit.weight
	r.total += w
	if float64(p.rand()>>11)/(1<<53)*r.total < w {
		r.es, r.id = es, id
	}
}
