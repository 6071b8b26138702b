package pool

import (
	"context"
	"fmt"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
)

// maxPickRounds bounds how often a pick retries when another request took a probe slot between
// its peek and its acquire.
const maxPickRounds = 4

// Pick is shorthand for PickAt(ctx, now, r) with now read from the pool's clock.
func (p *Pool) Pick(ctx context.Context, r Request) (Lease, error) {
	return p.PickAt(ctx, p.clock.Now(), r)
}

// PickAt chooses an exit for r at now and acquires its permits and tokens: the exit's own breaker
// and the (exit, r.Origin) pair's must admit it, and the origin's guard must admit the origin.
// When breakers would admit it but buckets have no token, it waits for the soonest token (on the
// pool's clock, holding nothing), bounded by ctx — or refuses at once with a *ThrottledError if the
// limits fail fast. When nothing may be sent it returns a *NoHealthyExitError (with the time until
// the soonest probe), an *OriginUnhealthyError or a *ThrottledError, and observers hear of it.
// ctx is only used to bound waits and is handed to observers; Pick does not keep it.
func (p *Pool) PickAt(ctx context.Context, now time.Time, r Request) (Lease, error) {
	l := Lease{p: p} // the ticket is filled in place: it is large, and picking copies nothing
	err := p.pick(ctx, now, r, &l)
	if err == nil && l.t.origin.kin.holding() {
		err = p.holdPick(ctx, now, r, &l) // its exit's group is held for the origin (grouphold.go)
	}
	if err != nil {
		p.obs.refused(ctx, r.Origin, err)
		return Lease{}, err
	}
	return l, nil
}

// ticket is one admitted attempt: the permits it holds and what it needs to report its verdict.
type ticket struct {
	exit     *exitState
	origin   *originState
	pair     *pair
	retries  *Retries
	pairPm   breaker.Permit
	exitPm   breaker.Permit
	originPm breaker.Permit
	now      time.Time // when the attempt was admitted (after any wait for a token)
	id       uint32    // exit.id, kept so that releasing and reporting need not load the exit
	// lazyPair: admitted without looking at the pair's breaker (it had none, or the bit table
	// showed it CLOSED); epoch is the origin's epoch then (see pairPermit).
	epoch uint32
	// exitEpoch, if not 0, is the pool's exit epoch when the attempt was admitted while the exit's
	// bit showed its breaker CLOSED, without touching the breaker (see exitPermit).
	exitEpoch uint32
	pairState breaker.State
	exitState breaker.State
	would     bool // dry run: the breakers would have refused this attempt
	lazyPair  bool
}

// The ticket lives in the Lease, and the lease in each transport attempt: its fields are ordered
// so that it packs into 144 bytes.

// pick chooses an exit for r at now and acquires its permits and tokens into l's ticket (and says
// in l why its session moved, if it did), waiting for a token when
// only buckets hold it back (see PickAt), unless the pool's limits or r say to fail fast. Without
// configured limits only learned paces hold picks back, and the pick fails fast: a pair whose
// learned window is spent is treated as a rested one, as it was before it learned the window.
func (p *Pool) pick(ctx context.Context, now time.Time, r Request, l *Lease) error {
	t := &l.t
	start := now
	waitedFor := scopeNone // the scope of the last bucket waited for
	for waits := 0; ; waits++ {
		tokenAt, roomAt, scope, err := p.pickOnce(now, r, l)
		if err != nil || tokenAt.IsZero() {
			if err == nil && waits > 0 {
				p.obs.throttled(ctx, Throttle{Origin: r.Origin, Exit: t.exit.exit, Scope: waitedFor, Waited: now.Sub(start)})
			}
			if err != nil {
				p.mix.noteRefused(now) // goodput.go
			}
			t.now = now
			t.retries = r.Retries
			return err
		}
		// The pick waits for the site's next slot: the soonest token, or a probe that comes sooner.
		wait := roomAt.Sub(now)
		terr := &ThrottledError{Origin: r.Origin, Scope: scope, RetryIn: tokenAt.Sub(now), RoomIn: wait}
		if dl, ok := ctx.Deadline(); p.failsFast(r) || waits >= maxTokenWaits || (ok && dl.Before(roomAt)) {
			p.mix.noteRefused(now)
			p.obs.throttled(ctx, Throttle{Origin: r.Origin, Scope: scope, Waited: now.Sub(start), Refused: true})
			return terr
		}
		waitedFor = scope
		if err := clock.Sleep(ctx, p.clock, wait); err != nil {
			terr.Err = err
			p.obs.throttled(ctx, Throttle{Origin: r.Origin, Scope: scope, Waited: p.clock.Now().Sub(start), Refused: true})
			return terr
		}
		now = p.clock.Now()
	}
}

// maxTokenWaits bounds how often one request waits for a token that others keep taking first.
const maxTokenWaits = 16

// pickOnce is one try of pick. When breakers would admit the request but no token is there, it
// returns the instant the soonest token comes, the scope of the bucket that lacks it, and the
// origin's next slot (roomAt: that token, or a probe that comes sooner; nextslot.go).
func (p *Pool) pickOnce(now time.Time, r Request, l *Lease) (tokenAt, roomAt time.Time, scope Scope, err error) {
	t := &l.t
	if at := now.UnixNano(); p.sweepDue(at) || p.gateways.expiryDue(at) { // mostly neither: asked inlined
		p.maybeSweep(now)
		p.maybeExpireSessions(now) // gateway sessions past their TTL (gateway_rotate.go)
	}
	originKey := r.Origin
	o := p.liveOrigin(originKey)
	originPm, err := p.admitOrigin(now, o)
	if err != nil && !p.dryRun {
		return time.Time{}, time.Time{}, scopeNone, err
	}
	guardWould := err != nil
	if ok, at := o.bucket.Ready(now); !ok {
		originPm.Release(now)
		return at, at, ScopeOrigin, nil
	}
	if r.Exit != "" {
		tokenAt, scope, err := p.pickPinned(now, o, originKey, r.Exit, r.Want, t)
		if err != nil || !tokenAt.IsZero() {
			originPm.Release(now)
			return tokenAt, tokenAt, scope, err
		}
		t.originPm = originPm
		t.would = t.would || guardWould
		return time.Time{}, time.Time{}, scopeNone, nil
	}
	memo, session := r.Retries, r.Session
	set := p.set.Load()
	view := set.view(r.Want)
	if view != nil && view.n == 0 {
		originPm.Release(now)
		return time.Time{}, time.Time{}, scopeNone, &NoMatchingExitError{Origin: originKey, Want: r.Want.String(), Exits: len(set.all)}
	}
	var c choice
	var st sessionStep // the session's pin (session_limits.go)
	for round, revived := 0, 0; round < maxPickRounds; round++ {
		var es *exitState
		var id uint32 // es.id, from the choice where there is one: loading es for it is a cache miss
		if session != "" {
			if es, err = p.stick(now, o, set, session, originKey, r.Want, &st); err != nil {
				originPm.Release(now)
				return time.Time{}, time.Time{}, scopeNone, err
			}
			if es != nil {
				id = es.id
			}
		}
		if es == nil {
			avoid := memo
			if st.claim.had {
				if old := set.byID[st.claim.pin.id]; old != nil {
					avoid = avoidingPin(memo, old.exit) // re-pinning: another IP while one is ready
				}
			}
			if originPm.Probe() {
				c = p.chooseForGuardProbe(now, o, avoid, view, p.failsFast(r)) // a sound exit (guardprobe.go)
			} else {
				c = p.choose(now, o, avoid, view, p.failsFast(r))
			}
			es, id = c.exit, c.id
			if es != nil && session != "" {
				if es = p.repin(now, set, session, originKey, &st, es); es == nil {
					continue // it joined a pin whose exit just left
				}
				id = es.id // a joined pin's exit may not be the one chosen
			}
		}
		if es == nil {
			break
		}
		ok := p.acquire(now, o, es, id, t)
		if !ok {
			p.refund(session, originKey, &st)
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
					return time.Time{}, time.Time{}, scopeNone, err
				}
				guardWould = err != nil
			}
			continue // or a probe slot went to another request between peek and acquire
		}
		if !p.takeTokens(now, t) {
			p.unacquire(now, t)
			p.refund(session, originKey, &st)
			continue // another request took the token between peek and take
		}
		t.originPm = originPm
		t.would = t.would || guardWould
		l.move = st.move
		return time.Time{}, time.Time{}, scopeNone, nil
	}
	originPm.Release(now)
	if !c.tokenAt.IsZero() {
		return c.tokenAt, soonestOf(c.tokenAt, c.probeAt), c.tokenScope, nil
	}
	if c.budget != nil && c.probeAt.IsZero() {
		return time.Time{}, time.Time{}, scopeNone, budgetError(originKey, &c, now) // only spent tiers match
	}
	exits := len(set.all)
	if view != nil {
		exits = view.n
	}
	in := untilPositive(c.probeAt, now)
	return time.Time{}, time.Time{}, scopeNone, &NoHealthyExitError{Origin: originKey, Exits: exits, Want: r.Want.String(), RetryIn: in, RoomIn: in}
}

// pickPinned is pickOnce for a request pinned to the exit labelled label (Request.Exit).
func (p *Pool) pickPinned(now time.Time, o *originState, originKey, label string, want *Want, t *ticket) (time.Time, Scope, error) {
	set := p.set.Load()
	es := set.byLabel[label]
	if es == nil {
		return time.Time{}, scopeNone, fmt.Errorf("pool: Request.Exit: no exit labelled %q", RedactRaw(label))
	}
	if !want.Admits(es.exit) {
		return time.Time{}, scopeNone, &NoMatchingExitError{Origin: originKey, Want: want.String(), Exits: len(set.all), Exit: es.exit.label}
	}
	pos := set.where[es.id]
	g := &set.groups[pos.group]
	if c := (choice{}); p.tierSpent(now, g, nil, &c) {
		return time.Time{}, scopeNone, budgetError(originKey, &c, now)
	}
	ok, at, scope := p.ready(now, o, g, pos.index, nil)
	if !ok && scope != scopeNone {
		return at, scope, nil
	}
	in := untilPositive(at, now)
	refuse := &NoHealthyExitError{Origin: originKey, Exits: 1, RetryIn: in, RoomIn: in}
	if !ok {
		return time.Time{}, scopeNone, refuse
	}
	ok = p.acquire(now, o, es, es.id, t)
	if !ok {
		return time.Time{}, scopeNone, refuse // another request took the probe slot
	}
	if !p.takeTokens(now, t) {
		p.unacquire(now, t)
		_, at, scope := p.tokensReady(now, o, g, pos.index)
		if at.IsZero() { // the token went between peek and take: look again at once
			at, scope = now, ScopeExit
		}
		return at, scope, nil
	}
	return time.Time{}, scopeNone, nil
}

// liveOrigin returns the state for originKey, never one a sweep has dropped.
func (p *Pool) liveOrigin(originKey string) *originState {
	if o := p.origins.published(originKey); o != nil {
		return o // inlined into the pick: an origin seen before
	}
	return p.liveOriginMade(originKey)
}

// liveOriginMade is liveOrigin past the published table: the origin's state, made if need be.
func (p *Pool) liveOriginMade(originKey string) *originState {
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
	if p.gone.get(es.id) || !exitClosed(now, es) || (!p.dryRun && o.kin.heldOff(now, es.id, p.probeLease)) ||
		p.tierBudgetSpent(now, es) {
		return false
	}
	pr := o.lookupPair(es.id)
	return pr == nil || pr.b.State(now) == breaker.Closed
}

// acquire takes the exit's and the pair's permits, or neither. A breaker the bit tables show
// CLOSED is not locked: the exit's gets a lock-free CLOSED permit of its current generation
// (breaker.ClosedPermit), and a pair is not even looked up — its breaker, made if need be, is
// handed the verdict only when it is a failure, and only if the pair has not re-closed since
// (pairPermit). Either way a verdict counts only in the generation the attempt was admitted in.
// Only breakers out of CLOSED — the ones with probe slots to guard — are acquired under their locks.
func (p *Pool) acquire(now time.Time, o *originState, es *exitState, id uint32, t *ticket) bool {
	if p.gone.get(id) {
		return false
	}
	*t = ticket{exit: es, id: id, origin: o}
	lease := p.probeLease
	ok := false
	if !p.exitOpen.get(id) {
		t.exitEpoch, ok = p.exitEpoch.Load(), true // never 0 (nextExitEpoch)
	}
	banProbe := false // the pair's probe passes its exit's rest (passesRest)
	if !ok {
		t.exitState = es.wide.State(now)
		if t.exitPm, ok = exitLease(now, es, lease); !ok { // a kept gateway session's own rest too (gateway_kept.go)
			switch pr := o.lookupPair(id); {
			case pr != nil && passesRest(now, es, pr):
				banProbe = true
			case !p.dryRun:
				return false
			default:
				t.would = true
			}
		}
	}
	var pr *pair
	switch {
	case !p.lazyPairs || o.eager || (p.set.Load().anyEager && es.eager):
		var alive bool
		if pr, alive = p.pairFor(o, es); !alive {
			t.exitPm.Release(now)
			return false
		}
	case o.open.get(id) || o.limited.get(id):
		pr = o.lookupPair(id) // out of CLOSED, or paced: the pair's own state matters
	}
	t.lazyPair = pr == nil
	if t.lazyPair {
		t.epoch = o.epoch.Load()
	} else {
		t.pair = pr
		t.pairState = pr.b.State(now)
		pairLease := lease
		if pr.b.Policy() != p.pairPol {
			pairLease = 0 // an origin's or an exit's own settings: the breaker's own ProbeLease
		}
		if t.pairPm, ok = pr.b.AcquireLease(now, pairLease); !ok {
			if !p.dryRun {
				t.exitPm.Release(now)
				return false
			}
			t.would = true
		}
	}
	if banProbe && !t.pairPm.Probe() {
		t.pairPm.Release(now) // another request's probe took the slot: no probe, no passing
		return false
	}
	if p.claimer != nil && !p.claimProbes(now, o, es, t, lease) {
		t.pairPm.Release(now)
		t.exitPm.Release(now)
		return false
	}
	p.startAttempt(o, id)
	return true
}

// passesRest reports whether pair pr, out for a ban, may send its probe now through exit es
// although the exit's own breaker is resting on transient trouble (timeouts, dropped
// connections; never a park): the probe says whether the ban is over, which the pair could not
// learn otherwise until the exit's breaker closes — on an exit that keeps tripping on its own
// timeouts, maybe never in a run. The exit's breaker hears nothing of the probe (the attempt holds
// no permit of it), and the pair is probed on its ban's cadence whatever the probe meets.
func passesRest(now time.Time, es *exitState, pr *pair) bool {
	return pr.episode.Load() != 0 && es.wide.Resting(now)
}

// exitPermit returns the exit's permit for t's verdict. An attempt admitted while the exit's bit
// showed it CLOSED (exitEpoch set) held a CLOSED permit of the generation it was admitted in, in
// spirit, as a lazy pair does (pairPermit): if the exit tripped since, it is not CLOSED now; if it
// tripped and closed again, its closedEpoch is later than the attempt's exitEpoch. Either way the
// verdict is stale and the zero permit drops it.
func (p *Pool) exitPermit(t *ticket) breaker.Permit {
	if t.exitEpoch == 0 {
		return t.exitPm
	}
	pm, closed := t.exit.wide.ClosedPermit()
	if !closed || epochAfter(t.exit.closedEpoch.Load(), t.exitEpoch) {
		return breaker.Permit{}
	}
	return pm
}

// nextExitEpoch advances the pool's exit epoch, skipping 0 (which says "not lazy" in a ticket).
func (p *Pool) nextExitEpoch() uint32 {
	for {
		if e := p.exitEpoch.Add(1); e != 0 {
			return e
		}
	}
}
