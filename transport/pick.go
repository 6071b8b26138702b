package transport

import (
	"context"
	"fmt"
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
	would     bool      // dry run: the breakers would have refused this attempt
	lazyPair  bool      // admitted while the pair had no breaker: CLOSED, generation 0
	now       time.Time // when the attempt was admitted (after any wait for a token)
}

// pick chooses an exit for a request to originKey at now and acquires its permits and tokens.
// When breakers would admit the request but buckets have no token, it waits for the soonest token
// (on the pool's clock, holding nothing), bounded by ctx — or refuses at once with a
// *ThrottledError if the gate fails fast. It returns a *NoHealthyExitError, *OriginUnhealthyError
// or *ThrottledError when nothing may be sent.
func (p *Pool) pick(ctx context.Context, now time.Time, originKey string) (ticket, error) {
	start := now
	var waitedFor string // the scope of the last bucket waited for
	for waits := 0; ; waits++ {
		t, tokenAt, scope, err := p.pickOnce(ctx, now, originKey)
		if err != nil || tokenAt.IsZero() {
			if err == nil && waits > 0 {
				p.throttled(ctx, Throttle{Origin: originKey, Exit: t.exit.exit, Scope: waitedFor, Waited: now.Sub(start)})
			}
			t.now = now
			return t, err
		}
		wait := tokenAt.Sub(now)
		terr := &ThrottledError{Origin: originKey, Scope: scope, RetryIn: wait}
		if dl, ok := ctx.Deadline(); p.gate.FailFast() || waits >= maxTokenWaits || (ok && dl.Before(tokenAt)) {
			p.throttled(ctx, Throttle{Origin: originKey, Scope: scope, Waited: now.Sub(start), Refused: true})
			return ticket{}, terr
		}
		waitedFor = scope
		timer := p.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			terr.Err = ctx.Err()
			p.throttled(ctx, Throttle{Origin: originKey, Scope: scope, Waited: p.clock.Now().Sub(start), Refused: true})
			return ticket{}, terr
		case <-timer.C():
		}
		now = p.clock.Now()
	}
}

// maxTokenWaits bounds how often one request waits for a token that others keep taking first.
const maxTokenWaits = 16

// pickOnce is one try of pick. When breakers would admit the request but no token is there, it
// returns the instant the soonest token comes and the scope of the bucket that lacks it.
func (p *Pool) pickOnce(ctx context.Context, now time.Time, originKey string) (t ticket, tokenAt time.Time, scope string, err error) {
	p.maybeSweep(now)
	o := p.liveOrigin(originKey)
	originPm, err := p.admitOrigin(now, o)
	if err != nil && !p.dryRun {
		return ticket{}, time.Time{}, "", err
	}
	guardWould := err != nil
	if ok, at := o.bucket.Ready(now); !ok {
		originPm.Release(now)
		return ticket{}, at, "origin", nil
	}
	if label, pinned := ctx.Value(pinKey).(string); pinned {
		t, tokenAt, scope, err := p.pickPinned(now, o, originKey, label)
		if err != nil || !tokenAt.IsZero() {
			originPm.Release(now)
			return ticket{}, tokenAt, scope, err
		}
		t.originPm = originPm
		t.would = t.would || guardWould
		return t, time.Time{}, "", nil
	}
	memo := retryMemoFrom(ctx)
	session, _ := ctx.Value(sessionKey).(string)
	var c choice
	for round, revived := 0, 0; round < maxPickRounds; round++ {
		var es *exitState
		if session != "" {
			es = p.sessions.pinned(session, originKey, p.set.Load())
			if es != nil && !p.sticks(now, o, es) {
				es = nil
			}
		}
		if es == nil {
			c = p.choose(now, o, memo)
			es = c.exit
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
				originPm, err = p.admitOrigin(now, o)
				if err != nil && !p.dryRun {
					return ticket{}, time.Time{}, "", err
				}
				guardWould = err != nil
			}
			continue // or a probe slot went to another request between peek and acquire
		}
		if !p.takeTokens(now, &t) {
			p.unacquire(now, &t)
			continue // another request took the token between peek and take
		}
		t.originPm = originPm
		t.would = t.would || guardWould
		if session != "" {
			p.sessions.pin(session, originKey, es.id)
		}
		return t, time.Time{}, "", nil
	}
	originPm.Release(now)
	if !c.tokenAt.IsZero() {
		return ticket{}, c.tokenAt, c.tokenScope, nil
	}
	return ticket{}, time.Time{}, "", &NoHealthyExitError{Origin: originKey, Exits: len(p.set.Load().all), RetryIn: untilPositive(c.probeAt, now)}
}

// pickPinned is pickOnce for a request pinned to the exit labelled label (PinExit).
func (p *Pool) pickPinned(now time.Time, o *originState, originKey, label string) (ticket, time.Time, string, error) {
	set := p.set.Load()
	es := set.byLabel[label]
	if es == nil {
		return ticket{}, time.Time{}, "", fmt.Errorf("transport: PinExit: no exit labelled %q", RedactRaw(label))
	}
	pos := set.where[es.id]
	g := &set.groups[pos.group]
	ok, at, scope := p.ready(now, o, g, pos.index, nil)
	if !ok && scope != "" {
		return ticket{}, at, scope, nil
	}
	refuse := &NoHealthyExitError{Origin: originKey, Exits: 1, RetryIn: untilPositive(at, now)}
	if !ok {
		return ticket{}, time.Time{}, "", refuse
	}
	t, ok := p.acquire(now, o, es)
	if !ok {
		return ticket{}, time.Time{}, "", refuse // another request took the probe slot
	}
	if !p.takeTokens(now, &t) {
		p.unacquire(now, &t)
		_, at, scope := p.tokensReady(now, o, g, pos.index)
		if at.IsZero() { // the token went between peek and take: look again at once
			at, scope = now, "exit"
		}
		return ticket{}, at, scope, nil
	}
	return t, time.Time{}, "", nil
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

func (o *originState) isDead() bool { return o.dead.Load() }

func untilPositive(t, now time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return max(t.Sub(now), 0)
}

// sticks reports whether a session pinned to es may keep using it: both breakers CLOSED.
func (p *Pool) sticks(now time.Time, o *originState, es *exitState) bool {
	if p.gone.get(es.id) || es.wide.State(now) != breaker.Closed {
		return false
	}
	pr := o.lookupPair(es.id)
	return pr == nil || pr.b.State(now) == breaker.Closed
}

// acquire takes the exit's and the pair's permits, or neither. A breaker the bit tables show
// CLOSED is not touched: the attempt gets a CLOSED permit for the breaker's current generation
// (breaker.PermitFor), whose verdict counts if the breaker is still CLOSED when it arrives — and
// a pair with no breaker at all gets one only when it first fails (pairPermit). Only breakers out of
// CLOSED — the ones with probe slots to guard — are acquired under their locks.
func (p *Pool) acquire(now time.Time, o *originState, es *exitState) (ticket, bool) {
	id := es.id
	if p.gone.get(id) {
		return ticket{}, false
	}
	t := ticket{exit: es, origin: o}
	lease := p.pairPol.Settings().ProbeLease
	var ok bool
	if !p.exitOpen.get(id) {
		t.exitPm = es.wide.PermitFor(breaker.CurrentGeneration)
	} else {
		t.exitState = es.wide.State(now)
		if t.exitPm, ok = es.wide.AcquireLease(now, lease); !ok {
			if !p.dryRun {
				return ticket{}, false
			}
			t.would = true
		}
	}
	var pr *pair
	switch {
	case !p.lazyPairs:
		var alive bool
		if pr, alive = p.pairFor(o, es); !alive {
			t.exitPm.Release(now)
			return ticket{}, false
		}
	case o.open.get(id) || o.limited.get(id):
		pr = o.lookupPair(id) // out of CLOSED, or paced: the pair's own state matters
	}
	t.lazyPair = pr == nil
	if pr != nil {
		t.pair = pr
		t.pairState = pr.b.State(now)
		if t.pairPm, ok = pr.b.AcquireLease(now, lease); !ok {
			if !p.dryRun {
				t.exitPm.Release(now)
				return ticket{}, false
			}
			t.would = true
		}
	}
	if p.claimer != nil && !p.claimProbes(now, o, es, &t, lease) {
		t.pairPm.Release(now)
		t.exitPm.Release(now)
		return ticket{}, false
	}
	p.inflight.add(id, 1)
	return t, true
}

// choice is what choose found: an exit, or when none is ready, the soonest instant a breaker may
// admit a probe and the soonest a token comes for an exit whose breakers are ready.
type choice struct {
	exit       *exitState
	probeAt    time.Time
	tokenAt    time.Time
	tokenScope string
}

// choose picks a ready exit: from the lowest tier that has one, by sampling, then by scanning.
func (p *Pool) choose(now time.Time, o *originState, memo *retryMemo) choice {
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
		for gi := range set.groups {
			g := &set.groups[gi]
			if es := p.sample(g, now, o, avoid); es != nil {
				return choice{exit: es}
			}
			if p.scan(g, now, o, avoid, &c); c.exit != nil {
				return choice{exit: c.exit}
			}
		}
	}
	return c
}

// ready reports whether exit i of g may take a request for o now; if not, when that may change,
// and whether only a token is missing (scope "exit" or "pair"; "" when a breaker refuses).
// Buckets are peeked at only once the breakers would admit: an OPEN pair takes no token.
func (p *Pool) ready(now time.Time, o *originState, g *tierGroup, i int, avoid *retryMemo) (bool, time.Time, string) {
	if ok, at := p.breakersReady(now, o, g, i, avoid); !ok {
		return false, at, ""
	}
	return p.tokensReady(now, o, g, i)
}

// breakersReady reports whether the breakers of exit i of g (its own and its pair's with o) would
// admit a request now, and if not when that may change. The common case — both CLOSED — is
// answered from two bit tables without touching the exit or the pair; only exits with a breaker
// out of CLOSED are looked at closely.
func (p *Pool) breakersReady(now time.Time, o *originState, g *tierGroup, i int, avoid *retryMemo) (bool, time.Time) {
	id := g.ids[i]
	if avoid != nil && avoid.avoids(id) {
		return false, time.Time{}
	}
	if p.dryRun || (!p.exitOpen.get(id) && !o.open.get(id)) {
		return true, time.Time{}
	}
	ok, at := g.exits[i].wide.Ready(now)
	if pr := o.lookupPair(id); pr != nil {
		pok, pat := pr.b.Ready(now)
		if !ok && !pok && pat.After(at) {
			at = pat // usable only once both breakers are: report the later instant
		} else if ok && !pok {
			ok, at = false, pat
		}
	}
	return ok, at
}

// tokensReady peeks, taking nothing, at the buckets of exit i of g for o.
func (p *Pool) tokensReady(now time.Time, o *originState, g *tierGroup, i int) (bool, time.Time, string) {
	if g.buckets != nil {
		if ok, at := g.buckets[i].Ready(now); !ok {
			return false, at, "exit"
		}
	}
	if o.limited.get(g.ids[i]) {
		if pr := o.lookupPair(g.ids[i]); pr != nil {
			if ok, at := pr.pace.Bucket().Ready(now); !ok {
				return false, at, "pair"
			}
		}
	}
	return true, time.Time{}, ""
}

// draw returns the index of a random exit of g, by weight.
func (p *Pool) draw(g *tierGroup) int {
	r := p.rand()
	if g.cum == nil {
		return int(r % uint64(len(g.ids)))
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
	return lo
}

// sample draws up to sampleTries exits and returns a ready one: the first, or with LeastLoaded the
// less loaded of the first two whose breakers admit — and only that one's buckets are peeked at
// (then the other's), so a pick peeks at one bucket, not at every candidate's.
func (p *Pool) sample(g *tierGroup, now time.Time, o *originState, avoid *retryMemo) *exitState {
	if len(g.ids) == 0 {
		return nil
	}
	first := -1
	for range sampleTries {
		i := p.draw(g)
		if ok, _ := p.breakersReady(now, o, g, i, avoid); !ok {
			continue
		}
		if p.selection == Random || len(g.ids) == 1 {
			if ok, _, _ := p.tokensReady(now, o, g, i); ok {
				return g.exits[i]
			}
			continue
		}
		if first < 0 {
			first = i
			continue
		}
		a, b := first, i
		if p.inflight.get(g.ids[b]) < p.inflight.get(g.ids[a]) {
			a, b = b, a
		}
		for _, j := range [2]int{a, b} {
			if ok, _, _ := p.tokensReady(now, o, g, j); ok {
				return g.exits[j]
			}
		}
		first = -1
	}
	if first >= 0 {
		if ok, _, _ := p.tokensReady(now, o, g, first); ok {
			return g.exits[first]
		}
	}
	return nil
}

// scan visits every exit of g from a random start and picks a ready one at random (by weight)
// into c.exit; when there is none it keeps in c the soonest instants a breaker or a token may
// make one ready.
func (p *Pool) scan(g *tierGroup, now time.Time, o *originState, avoid *retryMemo, c *choice) {
	n := len(g.ids)
	if n == 0 {
		return
	}
	start := int(p.rand() % uint64(n))
	var total float64
	for k := range n {
		i := (start + k) % n
		ok, at, scope := p.ready(now, o, g, i, avoid)
		switch {
		case ok:
			// Weighted reservoir sampling: each ready exit ends up chosen with probability weight/total.
			w := g.exits[i].exit.weight
			total += w
			if float64(p.rand()>>11)/(1<<53)*total < w {
				c.exit = g.exits[i]
			}
		case at.IsZero():
		case scope != "":
			if c.tokenAt.IsZero() || at.Before(c.tokenAt) {
				c.tokenAt, c.tokenScope = at, scope
			}
		case c.probeAt.IsZero() || at.Before(c.probeAt):
			c.probeAt = at
		}
	}
}
