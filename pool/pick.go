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

// Request says what a pick is for. Only Origin is required.
type Request struct {
	// Origin is the key of the origin the request is for: a host, a registrable domain, any
	// string the caller groups requests by. Breakers judge each (exit, Origin) pair.
	Origin string
	// Session, when set, sticks the request to one exit per origin: the first pick of the session
	// for an origin picks as usual, later ones reuse that exit until its breaker for the origin (or
	// its own) leaves CLOSED, when the session moves to another exit. For logins and carts that
	// must keep one IP.
	Session string
	// Exit, when set, pins the pick to the exit with that label and no other: if its breakers or
	// buckets do not admit the request, Pick fails (or waits for the exit's token) rather than
	// picking another. It takes the exit's permits by the same path as any pick, so a reheat loop
	// that probes through it never holds a probe slot twice.
	Exit string
	// Retries, when set, is the memory of one logical request: the pick passes over the exits that
	// failed it while another is ready, and a failure reported on the lease is added to it.
	Retries *Retries
}

// Lease is one admitted attempt: the exit to send it through and the permits it holds. Give it
// exactly one Report (or Release, if nothing was sent): until then it holds the exit's place in
// the pool — a probe slot, its count of leases out. A Lease is a value meant to be used by one
// goroutine: do not copy it after the first use. The zero Lease ignores every call.
type Lease struct {
	p    *Pool
	t    ticket
	done bool
}

// LeaseInfo describes a lease when it was picked.
type LeaseInfo struct {
	Exit   *Exit
	Origin string
	At     time.Time // when the lease was admitted (after any wait for a token)
	// Probe reports that the lease holds a HALF_OPEN probe slot (of the pair, the exit or the origin).
	Probe bool
	// PairState and ExitState are the states of the pair's and the exit's breakers when the exit was
	// picked (CLOSED for a pair the pool holds no breaker for).
	PairState, ExitState breaker.State
	// DryRun reports that breakers did not steer this pick; WouldRefuse that they would have refused it.
	DryRun, WouldRefuse bool
}

// Reported is what a verdict left behind: the pair's and the exit's breaker states once it was applied.
type Reported struct {
	PairState, ExitState breaker.State
}

// Exit returns the exit the lease goes through; nil for the zero Lease.
func (l *Lease) Exit() *Exit {
	if l.t.exit == nil {
		return nil
	}
	return l.t.exit.exit
}

// Info describes the lease.
func (l *Lease) Info() LeaseInfo {
	if l.p == nil {
		return LeaseInfo{}
	}
	return LeaseInfo{
		Exit: l.t.exit.exit, Origin: l.t.origin.key, At: l.t.now,
		Probe:     l.t.pairPm.Probe() || l.t.exitPm.Probe() || l.t.originPm.Probe(),
		PairState: l.t.pairState, ExitState: l.t.exitState,
		DryRun: l.p.dryRun, WouldRefuse: l.t.would,
	}
}

// Report is shorthand for ReportAt(now, v) with now read from the pool's clock.
func (l *Lease) Report(v Verdict) Reported {
	if l.p == nil || l.done {
		return Reported{}
	}
	return l.ReportAt(l.p.clock.Now(), v)
}

// ReportAt gives the lease its verdict at now and returns the breakers' states afterwards. Only the
// first Report or Release of a lease counts; later ones do nothing. How a verdict moves the
// breakers is the Verdict's to say: see Outcome and Scope.
func (l *Lease) ReportAt(now time.Time, v Verdict) Reported {
	if l.p == nil || l.done {
		return Reported{}
	}
	l.done = true
	if v.Outcome == Transient || v.Outcome == Permanent {
		l.t.retries.avoidExit(l.t.exit.exit)
	}
	pair, exit := l.p.finish(now, &l.t, v)
	return Reported{PairState: pair, ExitState: exit}
}

// Release is shorthand for ReleaseAt(now) with now read from the pool's clock.
func (l *Lease) Release() {
	if l.p == nil || l.done {
		return
	}
	l.ReleaseAt(l.p.clock.Now())
}

// ReleaseAt gives the lease back at now without a verdict, for an attempt that never went out:
// every permit is freed and nothing is counted. Like ReportAt, only the first call counts.
func (l *Lease) ReleaseAt(now time.Time) {
	if l.p == nil || l.done {
		return
	}
	l.done = true
	l.p.release(now, &l.t)
}

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
	t, err := p.pick(ctx, now, r)
	if err != nil {
		p.obs.refused(ctx, r.Origin, err)
		return Lease{}, err
	}
	return Lease{p: p, t: t}, nil
}

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
	// lazyPair: admitted without looking at the pair's breaker (it had none, or the bit table
	// showed it CLOSED); epoch is the origin's epoch then (see pairPermit).
	lazyPair bool
	epoch    uint64
	retries  *Retries
	now      time.Time // when the attempt was admitted (after any wait for a token)
}

// pick chooses an exit for r at now and acquires its permits and tokens, waiting for a token when
// only buckets hold it back (see PickAt).
func (p *Pool) pick(ctx context.Context, now time.Time, r Request) (ticket, error) {
	start := now
	waitedFor := scopeNone // the scope of the last bucket waited for
	for waits := 0; ; waits++ {
		t, tokenAt, scope, err := p.pickOnce(now, r)
		if err != nil || tokenAt.IsZero() {
			if err == nil && waits > 0 {
				p.obs.throttled(ctx, Throttle{Origin: r.Origin, Exit: t.exit.exit, Scope: waitedFor, Waited: now.Sub(start)})
			}
			t.now = now
			t.retries = r.Retries
			return t, err
		}
		wait := tokenAt.Sub(now)
		terr := &ThrottledError{Origin: r.Origin, Scope: scope, RetryIn: wait}
		if dl, ok := ctx.Deadline(); p.gate.FailFast() || waits >= maxTokenWaits || (ok && dl.Before(tokenAt)) {
			p.obs.throttled(ctx, Throttle{Origin: r.Origin, Scope: scope, Waited: now.Sub(start), Refused: true})
			return ticket{}, terr
		}
		waitedFor = scope
		if err := clock.Sleep(ctx, p.clock, wait); err != nil {
			terr.Err = err
			p.obs.throttled(ctx, Throttle{Origin: r.Origin, Scope: scope, Waited: p.clock.Now().Sub(start), Refused: true})
			return ticket{}, terr
		}
		now = p.clock.Now()
	}
}

// maxTokenWaits bounds how often one request waits for a token that others keep taking first.
const maxTokenWaits = 16

// pickOnce is one try of pick. When breakers would admit the request but no token is there, it
// returns the instant the soonest token comes and the scope of the bucket that lacks it.
func (p *Pool) pickOnce(now time.Time, r Request) (t ticket, tokenAt time.Time, scope Scope, err error) {
	p.maybeSweep(now)
	originKey := r.Origin
	o := p.liveOrigin(originKey)
	originPm, err := p.admitOrigin(now, o)
	if err != nil && !p.dryRun {
		return ticket{}, time.Time{}, scopeNone, err
	}
	guardWould := err != nil
	if ok, at := o.bucket.Ready(now); !ok {
		originPm.Release(now)
		return ticket{}, at, ScopeOrigin, nil
	}
	if r.Exit != "" {
		t, tokenAt, scope, err := p.pickPinned(now, o, originKey, r.Exit)
		if err != nil || !tokenAt.IsZero() {
			originPm.Release(now)
			return ticket{}, tokenAt, scope, err
		}
		t.originPm = originPm
		t.would = t.would || guardWould
		return t, time.Time{}, scopeNone, nil
	}
	memo, session := r.Retries, r.Session
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
					return ticket{}, time.Time{}, scopeNone, err
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
		return t, time.Time{}, scopeNone, nil
	}
	originPm.Release(now)
	if !c.tokenAt.IsZero() {
		return ticket{}, c.tokenAt, c.tokenScope, nil
	}
	return ticket{}, time.Time{}, scopeNone, &NoHealthyExitError{Origin: originKey, Exits: len(p.set.Load().all), RetryIn: untilPositive(c.probeAt, now)}
}

// pickPinned is pickOnce for a request pinned to the exit labelled label (Request.Exit).
func (p *Pool) pickPinned(now time.Time, o *originState, originKey, label string) (ticket, time.Time, Scope, error) {
	set := p.set.Load()
	es := set.byLabel[label]
	if es == nil {
		return ticket{}, time.Time{}, scopeNone, fmt.Errorf("pool: Request.Exit: no exit labelled %q", RedactRaw(label))
	}
	pos := set.where[es.id]
	g := &set.groups[pos.group]
	ok, at, scope := p.ready(now, o, g, pos.index, nil)
	if !ok && scope != scopeNone {
		return ticket{}, at, scope, nil
	}
	refuse := &NoHealthyExitError{Origin: originKey, Exits: 1, RetryIn: untilPositive(at, now)}
	if !ok {
		return ticket{}, time.Time{}, scopeNone, refuse
	}
	t, ok := p.acquire(now, o, es)
	if !ok {
		return ticket{}, time.Time{}, scopeNone, refuse // another request took the probe slot
	}
	if !p.takeTokens(now, &t) {
		p.unacquire(now, &t)
		_, at, scope := p.tokensReady(now, o, g, pos.index)
		if at.IsZero() { // the token went between peek and take: look again at once
			at, scope = now, ScopeExit
		}
		return ticket{}, at, scope, nil
	}
	return t, time.Time{}, scopeNone, nil
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
// CLOSED is not locked: the exit's gets a lock-free CLOSED permit of its current generation
// (breaker.ClosedPermit), and a pair is not even looked up — its breaker, made if need be, is
// handed the verdict only when it is a failure, and only if the pair has not re-closed since
// (pairPermit). Either way a verdict counts only in the generation the attempt was admitted in.
// Only breakers out of CLOSED — the ones with probe slots to guard — are acquired under their locks.
func (p *Pool) acquire(now time.Time, o *originState, es *exitState) (ticket, bool) {
	id := es.id
	if p.gone.get(id) {
		return ticket{}, false
	}
	t := ticket{exit: es, origin: o}
	lease := p.probeLease
	ok := false
	if !p.exitOpen.get(id) {
		t.exitPm, ok = es.wide.ClosedPermit()
	}
	if !ok {
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
	if t.lazyPair {
		t.epoch = o.epoch.Load()
	} else {
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
