package transport

import (
	"context"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// sampleTries is how many random draws selection makes before it scans the whole tier. While most
// exits are ready a draw almost always hits, so picking costs the same for 10 exits or 100,000;
// when most are not, the scan finds the few that are and the soonest probe time.
const sampleTries = 8

// maxPickRounds bounds how often a pick retries when another request took a probe slot between
// its peek and its acquire.
const maxPickRounds = 4

// ticket is one admitted attempt: the permits it holds and what it needs to report its verdict.
type ticket struct {
	exit      *exitState
	origin    *originState
	pair      *pair
	pairPm    breaker.Permit
	exitPm    breaker.Permit
	originPm  breaker.Permit
	pairState breaker.State
	exitState breaker.State
	would     bool // dry run: the breakers would have refused this attempt
}

// pick chooses an exit for a request to originKey at now and acquires its permits. It returns a
// *NoHealthyExitError or *OriginUnhealthyError when nothing may be sent.
func (p *Pool) pick(ctx context.Context, now time.Time, originKey string) (ticket, error) {
	p.maybeSweep(now)
	o := p.liveOrigin(originKey)
	originPm, err := o.guard.admit(now, originKey)
	if err != nil && !p.dryRun {
		return ticket{}, err
	}
	guardWould := err != nil
	memo := retryMemoFrom(ctx)
	session, _ := ctx.Value(sessionKey).(string)
	var soonest time.Time
	for round, revived := 0, 0; round < maxPickRounds; round++ {
		var es *exitState
		if session != "" {
			es = p.sessions.pinned(session, originKey, p.set.Load())
			if es != nil && !p.sticks(now, o, es) {
				es = nil
			}
		}
		if es == nil {
			es, soonest = p.choose(now, o, memo)
		}
		if es == nil {
			break
		}
		t, ok := p.acquire(now, o, es)
		if !ok {
			if o.isDead() && revived < 2*maxPickRounds {
				// A sweep dropped the origin between lookup and acquire: start again on its
				// fresh state (a swept origin's guard was CLOSED and idle). That is no lost race
				// for a probe slot, so it does not use up a round.
				revived++
				round--
				originPm.Release(now)
				o = p.liveOrigin(originKey)
				originPm, err = o.guard.admit(now, originKey)
				if err != nil && !p.dryRun {
					return ticket{}, err
				}
				guardWould = err != nil
			}
			continue // or a probe slot went to another request between peek and acquire
		}
		t.originPm = originPm
		t.would = t.would || guardWould
		if session != "" {
			p.sessions.pin(session, originKey, es.id)
		}
		return t, nil
	}
	originPm.Release(now)
	return ticket{}, &NoHealthyExitError{Origin: originKey, Exits: len(p.set.Load().all), RetryIn: untilPositive(soonest, now)}
}

// liveOrigin returns the state for originKey, never one a sweep has dropped.
func (p *Pool) liveOrigin(originKey string) *originState {
	for {
		o := p.origin(originKey)
		if !o.isDead() {
			return o
		}
	}
}

func (o *originState) isDead() bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return o.dead
}

func untilPositive(t, now time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return max(t.Sub(now), 0)
}

// sticks reports whether a session pinned to es may keep using it: both breakers CLOSED.
func (p *Pool) sticks(now time.Time, o *originState, es *exitState) bool {
	if es.removed.Load() || es.wide.State(now) != breaker.Closed {
		return false
	}
	pr := o.lookupPair(es.id)
	return pr == nil || pr.b.State(now) == breaker.Closed
}

// acquire takes the exit's and the pair's permits, or neither.
func (p *Pool) acquire(now time.Time, o *originState, es *exitState) (ticket, bool) {
	t := ticket{exit: es, origin: o}
	lease := p.pairPol.Settings().ProbeLease
	t.exitState = es.wide.State(now)
	var ok bool
	if t.exitPm, ok = es.wide.AcquireLease(now, lease); !ok && !p.dryRun {
		return ticket{}, false
	}
	t.would = !ok
	pr, alive := p.pairFor(o, es)
	if !alive {
		t.exitPm.Release(now)
		return ticket{}, false
	}
	t.pair = pr
	t.pairState = pr.b.State(now)
	if t.pairPm, ok = pr.b.AcquireLease(now, lease); !ok {
		if !p.dryRun {
			t.exitPm.Release(now)
			return ticket{}, false
		}
		t.would = true
	}
	es.inflight.Add(1)
	return t, true
}

// choose picks a ready exit: from the lowest tier that has one, by sampling, then by scanning.
// When none is ready it returns the soonest instant one may become probeable.
func (p *Pool) choose(now time.Time, o *originState, memo *retryMemo) (*exitState, time.Time) {
	set := p.set.Load()
	var soonest time.Time
	for pass := 0; pass < 2; pass++ {
		avoid := memo
		if pass == 1 {
			if memo.empty() {
				break
			}
			avoid = nil // only exits that already failed this request are left: use them
		}
		for gi := range set.groups {
			g := &set.groups[gi]
			if es := p.sample(g, now, o, avoid); es != nil {
				return es, time.Time{}
			}
			es, s := p.scan(g, now, o, avoid)
			if es != nil {
				return es, time.Time{}
			}
			if !s.IsZero() && (soonest.IsZero() || s.Before(soonest)) {
				soonest = s
			}
		}
	}
	return nil, soonest
}

// ready reports whether es may take a request for o now; if not, when that may change.
func (p *Pool) ready(now time.Time, o *originState, es *exitState, avoid *retryMemo) (bool, time.Time) {
	if es.removed.Load() || avoid.avoids(es.id) {
		return false, time.Time{}
	}
	if p.dryRun {
		return true, time.Time{}
	}
	ok, at := es.wide.Ready(now)
	if pr := o.lookupPair(es.id); pr != nil {
		if !ok {
			// The exit is usable for o only once both breakers are: report the later instant.
			if pok, pat := pr.b.Ready(now); !pok && pat.After(at) {
				at = pat
			}
			return false, at
		}
		return pr.b.Ready(now)
	}
	return ok, at
}

// draw returns a random exit of g, by weight.
func (p *Pool) draw(g *tierGroup) *exitState {
	r := p.rand()
	if g.cum == nil {
		return g.exits[r%uint64(len(g.exits))]
	}
	total := g.cum[len(g.cum)-1]
	x := float64(r>>11) / (1 << 53) * total
	lo, hi := 0, len(g.cum)-1
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if g.cum[mid] <= x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return g.exits[lo]
}

// sample draws up to sampleTries exits and returns a ready one: the first, or with LeastLoaded the
// less loaded of the first two.
func (p *Pool) sample(g *tierGroup, now time.Time, o *originState, avoid *retryMemo) *exitState {
	if len(g.exits) == 0 {
		return nil
	}
	var first *exitState
	for range sampleTries {
		es := p.draw(g)
		if ok, _ := p.ready(now, o, es, avoid); !ok {
			continue
		}
		if p.selection == Random || len(g.exits) == 1 {
			return es
		}
		if first == nil {
			first = es
			continue
		}
		if es.inflight.Load() < first.inflight.Load() {
			return es
		}
		return first
	}
	return first
}

// scan visits every exit of g from a random start and picks a ready one at random (by weight),
// or reports the soonest instant one may become ready.
func (p *Pool) scan(g *tierGroup, now time.Time, o *originState, avoid *retryMemo) (*exitState, time.Time) {
	n := len(g.exits)
	if n == 0 {
		return nil, time.Time{}
	}
	start := int(p.rand() % uint64(n))
	var (
		chosen  *exitState
		total   float64
		soonest time.Time
	)
	for i := range n {
		es := g.exits[(start+i)%n]
		ok, at := p.ready(now, o, es, avoid)
		if !ok {
			if !at.IsZero() && (soonest.IsZero() || at.Before(soonest)) {
				soonest = at
			}
			continue
		}
		// Weighted reservoir sampling: each ready exit ends up chosen with probability weight/total.
		w := es.exit.weight
		total += w
		if float64(p.rand()>>11)/(1<<53)*total < w {
			chosen = es
		}
	}
	return chosen, soonest
}
