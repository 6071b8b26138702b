package pool

import (
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Retuning: an exit that stays in the pool — the same proxy under the same label, through Sync, or
// back within retention through Add — but whose own settings changed (Exit.WithPairSettings,
// Exit.WithExitSettings, or a proxy list's failures=, cooldown=, …) gets breakers made with the new
// settings. A breaker's policy is fixed when it is made, so each breaker whose settings changed is
// replaced by a new one that takes over its state, as a restart would: through Save and Restore,
// and so clamped to what the new settings could produce (a ban longer than the new settings allow
// is cut to their longest window). What a Save does not keep goes: failures counted in the window
// of a CLOSED breaker, and the verdicts of leases in flight, which land on the old breaker and no
// longer count. Observers hear nothing: the exit's state has not changed, only its settings.
//
// One probe at a time, across the change: the old breaker is muted and, when out of CLOSED,
// frozen OPEN the moment its state is taken, so that a pick still holding it cannot probe through
// it; and a replacement whose predecessor had a probe out admits none of its own until that
// probe's lease could have ended (handOver).

// retunes collects, for one Add or Sync, the exits whose breakers were remade: the new versions
// whose exit breaker's bit must follow it once the set is stored, and those whose pairs must be
// remade then.
type retunes struct {
	now   time.Time
	pairs []*exitState // new versions whose pair settings changed
	wides []*exitState // new versions whose exit breaker was remade
}

// retune returns the version of cur that carries e and tuning t: a copy with the same id, bucket,
// life and leases, and, if its exit settings changed, a new exit breaker that has taken over cur's
// state. Pairs whose settings changed are left in rs. The caller holds p.mu, stores the set, then
// calls rs.finish.
func (p *Pool) retune(cur *exitState, e *Exit, t *exitTuning, rs *retunes) *exitState {
	next := *cur
	next.exit = e
	next.priced, next.kept = p.CostOf(e) != Cost{}, e.gw != nil && !e.gw.s.g.spec.rotate
	if (next.blocks != nil) != isRotating(e) {
		next.blocks = newBlockRates(e) // rotate=request came or went (gateway_blockrate.go)
	}
	if sameOverride(cur.exit.over, e.over) {
		return &next // the same settings: keep the tuning it was resolved with
	}
	next.tune, next.eager = t, t != nil && t.eager
	p.keepFor(t)
	if rs.now.IsZero() {
		rs.now = p.clock.Now()
	}
	oldOver, newOver := cur.exit.override(), e.override()
	if !sameSettings(oldOver.exit, newOver.exit) {
		// The new breaker's hooks speak for the exit's current version only (newExitBreaker):
		// until the set holds next, its restore is silent. An exit's probes hold the pair policy's
		// lease (acquire).
		next.wide, next.wideMute, next.closedEpoch = p.newExitBreaker(next.id, p.exitPolicy(t))
		next.quiet = quietBreaker(next.wide)
		cur.wideMute.Store(true)
		next.wide.Restore(rs.now, handOver(rs.now, cur.wide, p.probeLease))
		rs.wides = append(rs.wides, &next)
	}
	if !sameSettings(oldOver.pair, newOver.pair) {
		rs.pairs = append(rs.pairs, &next)
	}
	return &next
}

// finish completes the retunes once the new exit set is stored: the exitOpen bits follow the new
// exit breakers, and every pair of a retuned exit whose policy changed is remade in place. The
// caller holds p.mu (lock order: Pool.mu → the origin table → an origin's pairs).
func (rs *retunes) finish(p *Pool) {
	for _, es := range rs.wides {
		p.exitOpen.set(es.id, es.wide.State(rs.now) != breaker.Closed)
	}
	if len(rs.pairs) == 0 {
		return
	}
	for _, o := range p.originList() {
		o.mu.Lock()
		for _, es := range rs.pairs {
			if old := o.pairs[es.id]; old != nil && !o.dead.Load() {
				if pol := p.pairPolicy(o, es.tune); old.b.Policy() != pol {
					o.pairs[es.id] = p.remakePair(rs.now, o, es, old, pol)
				}
			}
		}
		o.mu.Unlock()
	}
}

// remakePair returns the pair that replaces old under policy pol, with old's state, pace and
// closedEpoch; old is muted and frozen for good. The caller holds o.mu and puts the result in
// o.pairs.
func (p *Pool) remakePair(now time.Time, o *originState, es *exitState, old *pair, pol *breaker.Policy) *pair {
	pr := p.newPair(o, es, pol) // its pace, kept by exit id in o.paces, stays
	pr.flags.setMuted(true)     // nobody else sees pr yet: its restore tells no one
	old.flags.setMuted(true)
	old.due.Store(dueSwept) // its entries in the origin's bound are void; pr's restore adds its own
	pr.b.Restore(now, handOver(now, &old.b, old.b.Policy().Settings().ProbeLease))
	pr.closedEpoch.Store(old.closedEpoch.Load())
	o.open.set(es.id, pr.b.State(now) != breaker.Closed)
	pr.flags.setMuted(false)
	return pr
}

// handOver takes old's state at now for the breaker that replaces it, and freezes old: out of
// CLOSED, it is made OPEN for the longest window its policy allows, so that a pick still holding it
// cannot take a probe through it beside its replacement's (a CLOSED breaker hands out no probes and
// is left alone: picks through it go on). Its hooks must be muted. When old has a probe out, the
// state handed over admits no probe before a probe lease (lease, the longest old may have handed
// out) has passed from now: that probe may still be in flight. Between the look and the freeze old
// could hand out one more probe, in the few instructions between them; nothing else can.
func handOver(now time.Time, old *breaker.Breaker, lease time.Duration) breaker.Saved {
	snap := old.Snapshot(now)
	s := old.Save(now)
	if snap.State == breaker.Closed {
		return s
	}
	old.Restore(now, breaker.Saved{State: breaker.Open, NextProbe: now.Add(old.Policy().LongestOpen()), LastFailure: "retuned"})
	if snap.ProbesInFlight > 0 {
		s.NextProbe = now.Add(lease)
	}
	return s
}
