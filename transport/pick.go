package transport

import (
	"context"
	"fmt"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

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
	lease := p.probeLease
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
	case o.open.get(id) || (p.gate != nil && o.limited.get(id)):
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
