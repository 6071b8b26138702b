package pool

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// exitState is an exit as the pool tracks it. Sync may replace an exit's *Exit by another of the
// same label and dialing URL (a new tier or weight) with a copy of its exitState: the copy keeps
// the id, and with it every breaker, bucket and count, and shares life with the old version,
// which pairs made before the change still point to. Add does the same for an exit coming back.
type exitState struct {
	exit   *Exit
	id     uint32
	wide   *breaker.Breaker
	bucket *ratelimit.Bucket // the exit's own token bucket; nil if not limited
	life   *atomic.Int32     // lifeIn, lifeRetired or lifeForgotten; shared by every version
	tune   *exitTuning       // the exit's own breaker settings, resolved; nil: the pool's
	// wideMute silences wide's hooks once a retune has replaced it (retune.go); closedEpoch is the
	// pool's exit epoch when wide last returned to CLOSED (0: never; see exitPermit). Both are
	// shared, like wide, by every version that has this breaker.
	wideMute    *atomic.Bool
	closedEpoch *atomic.Uint32
	// eager: the exit's pair settings count successes, so its pairs get a breaker on their first
	// pick (a copy of tune.eager, where acquire reads it).
	eager bool
	// quiet: wide counts no successes (its FailureRatio is 0), so a success admitted lazily
	// (exitPermit) need not touch it — at 100,000 exits, a cache miss a report saved.
	quiet bool
	// priced: the exit has a price (CostOf is not zero); a report of one without a price and
	// without budgets reads nothing of the Exit to count its spend (spendOn).
	priced bool
	// kept: a rotate=off gateway's session, whose own breaker hears its successes (gateway_kept.go).
	kept bool
	// blocks: a rotating gateway's block rate per origin (gateway_blockrate.go); nil: not one.
	blocks *blockRates
}

// Where an exit is in its life in the pool.
const (
	lifeIn        int32 = iota // in the exit set
	lifeRetired                // removed, its state kept for the same proxy coming back (retention)
	lifeForgotten              // removed for good: the next sweep drops its pairs
)

// quietBreaker reports whether b counts no successes: a CLOSED permit's success only marks it used.
func quietBreaker(b *breaker.Breaker) bool { return b.Policy().Settings().FailureRatio == 0 }

// out reports whether the exit has left the pool's exit set (retired or forgotten).
func (es *exitState) out() bool { return es.life.Load() != lifeIn }

// retiredExit is the state of a removed exit, kept under its label until retention has passed.
type retiredExit struct {
	es *exitState
	at time.Time
}

// exitSet is an immutable view of the exits, replaced whole on every change.
type exitSet struct {
	all     []*exitState
	byLabel map[string]*exitState
	byID    map[uint32]*exitState
	where   map[uint32]exitPos // group and index of each exit, for picks pinned to one exit
	groups  []tierGroup        // by ascending tier; one group of everything when tiers are ignored
	// anyEager and anyBucket say whether some exit is eager or has a token bucket: when none is,
	// a pick need not load the exit it chose to find out.
	anyEager, anyBucket bool
	// kin is the set's groups of exits (group.go); nil when no two exits share one.
	kin *kinship
	// views holds the set's index for each Want a pick met (*Want → *wantView; wantview.go).
	views sync.Map
}

type exitPos struct{ group, index int }

type tierGroup struct {
	tier  int
	exits []*exitState
	ids   []uint32 // ids[i] is exits[i].id: the picker's first look reads this array only
	// buckets[i] is exits[i].bucket; nil when no exit of the group is rate-limited.
	buckets []*ratelimit.Bucket
	cum     []float64 // cumulative weights; nil when every weight is equal
	// consecutive: ids[i] is ids[0] + i for every i — a tier whose exits were added together and
	// none removed since, the usual case — and id need not read ids.
	consecutive bool
}

// id returns ids[i]. At 100,000 exits the 400 KB of ids are mostly out of the cache, and a pick
// reads the id of every candidate first; for a group of consecutive ids it is computed instead.
func (g *tierGroup) id(i int) uint32 {
	if g.consecutive {
		return g.ids[0] + uint32(i)
	}
	return g.ids[i]
}

// Add adds exits. Labels must be unique in the pool; weights positive and finite. Nothing is added
// if any exit is invalid.
func (p *Pool) Add(exits ...*Exit) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	old := p.set.Load()
	exits, made, _, err := p.expandGateways(exits, old.byLabel, false) // templates → sessions (gateway.go)
	if err != nil {
		return err
	}
	if err := checkExits(exits, old.byLabel); err != nil {
		return err
	}
	tunes, err := p.tuneExits(exits)
	if err != nil {
		return err
	}
	all := slices.Clone(old.all)
	var rs retunes
	for i, e := range exits {
		all = append(all, p.joinExit(e, tunes[i], &rs))
	}
	p.set.Store(p.buildSet(all))
	p.settleGateways(made, nil, false)
	rs.finish(p)
	return nil
}

// joinExit returns the state of an exit joining the pool, tuned t: the state it had if the same
// proxy left under the same label within retention (retuned if its settings changed meanwhile;
// its pairs are left in rs), else a fresh one. The caller holds p.mu, puts the result in the
// exit set, and then retunes the pairs in rs.
func (p *Pool) joinExit(e *Exit, t *exitTuning, rs *retunes) *exitState {
	if e.gw != nil {
		return p.newSessionState(e, t) // a gateway's session: new, and never back (gateway.go)
	}
	r, ok := p.retired[e.label]
	if !ok {
		return p.newExitState(e, t)
	}
	delete(p.retired, e.label)
	if !sameProxy(r.es.exit, e) {
		// Another proxy under the label: the old one's state is of no use to it.
		r.es.life.Store(lifeForgotten)
		p.forgotten.set(r.es.id, true)
		return p.newExitState(e, t)
	}
	back := p.retune(r.es, e, t, rs)
	back.life.Store(lifeIn)
	p.gone.set(back.id, false)
	return back
}

// checkExits validates exits for the pool: none nil, labels unique among them and not in taken,
// weights positive and finite, attributes in their alphabet (attrs.go). The error names every bad exit.
func checkExits(exits []*Exit, taken map[string]*exitState) error {
	seen := make(map[string]bool, len(exits))
	var errs []error
	for i, e := range exits {
		switch {
		case e == nil:
			errs = append(errs, fmt.Errorf("pool: exit %d is nil", i))
		case taken[e.label] != nil || seen[e.label]:
			errs = append(errs, fmt.Errorf("pool: duplicate exit label %q", e.label))
		case !(e.weight > 0) || math.IsInf(e.weight, 0):
			errs = append(errs, fmt.Errorf("pool: exit %s: weight %v must be positive and finite", e.label, e.weight))
		case checkAttrs(e) != nil:
			errs = append(errs, checkAttrs(e))
		default:
			seen[e.label] = true
		}
	}
	return errors.Join(errs...)
}

// newExitState returns the state of an exit joining the pool, tuned t: a new id, a fresh breaker
// and bucket. The caller holds p.mu.
func (p *Pool) newExitState(e *Exit, t *exitTuning) *exitState {
	if e.gw != nil {
		return p.newSessionState(e, t) // a gateway's session (gateway.go)
	}
	es := p.mintState(e, t)
	es.wide, es.wideMute, es.closedEpoch = p.newExitBreaker(es.id, p.exitPolicy(t))
	es.quiet, es.priced = quietBreaker(es.wide), p.CostOf(e) != Cost{}
	p.keepFor(t)
	es.blocks = newBlockRates(e)
	return es
}

// mintState returns the part of a new exit's state every kind of exit has: a new id, with its
// in-flight counter made (the pick counts it without checking), and its bucket. The caller holds
// p.mu.
func (p *Pool) mintState(e *Exit, t *exitTuning) *exitState {
	es := &exitState{exit: e, id: p.nextID, life: new(atomic.Int32), tune: t, eager: t != nil && t.eager}
	p.nextID++
	p.inflight.make(es.id)
	es.bucket = p.gate.ExitBucket(e.label)
	return es
}

// newExitBreaker returns a breaker for exit id, governed by pol, and the switch that mutes its
// hooks. They speak only while it is the breaker of the exit's current version: Sync may give the
// exit a new tier or weight (a new version, the same breaker) or new settings (a new breaker,
// retune.go); once the exit has left the pool, transitions go unreported — its label may belong to
// another exit by now — while the bit table still follows the breaker, for the exit's return.
func (p *Pool) newExitBreaker(id uint32, pol *breaker.Policy) (*breaker.Breaker, *atomic.Bool, *atomic.Uint32) {
	var b *breaker.Breaker
	mute, closedEpoch := new(atomic.Bool), new(atomic.Uint32)
	b = pol.NewBreakerWith(breaker.Hooks{
		OnStateChange: func(t breaker.Transition) {
			if mute.Load() {
				return
			}
			if cur := p.set.Load().byID[id]; cur != nil && cur.wide == b {
				p.obs.stateChanged(StateChange{Scope: ScopeExit, Exit: cur.exit, Transition: t})
			}
		},
		Mirror: func(notClosed bool) {
			if !notClosed {
				closedEpoch.Store(p.nextExitEpoch()) // before the bit, as for pairs (MirrorClosed)
			}
			if mute.Load() {
				return
			}
			if cur := p.set.Load().byID[id]; cur == nil || cur.wide == b {
				p.exitOpen.set(id, notClosed)
			}
		},
	})
	return b, mute, closedEpoch
}

// keepFor lengthens the retention of removed exits to t's probe leases: a probe out on a removed
// exit keeps its slot until its lease ends. The caller holds p.mu.
func (p *Pool) keepFor(t *exitTuning) {
	if t == nil {
		return
	}
	for _, pol := range [2]*breaker.Policy{t.pairPol, t.exitPol} {
		if pol != nil {
			p.retention = max(p.retention, pol.Settings().ProbeLease)
		}
	}
}

// Remove removes the exits with the given labels; observers hear of each (a transport closes the
// exit's idle connections). Leases out on them finish normally, but their breakers report no more
// transitions to observers. Unknown labels are an error; known ones are removed anyway.
//
// The pool keeps a removed exit's breakers for a while (the longer of the idle TTL and the probe
// leases): if the same proxy — the same dialing URL, credentials included — comes back under the
// same label in that time, through Add or Sync, it comes back with them, OPEN pairs and probes
// out included. A list that flaps cannot turn a banned exit into a fresh one, and a probe still
// out on the removed exit keeps its pair's only probe slot. Another proxy under the label starts
// fresh.
func (p *Pool) Remove(labels ...string) error {
	p.mu.Lock()
	old := p.set.Load()
	labels, named, err := p.gatewayLabels(labels, old) // a gateway leaves with its sessions (gateway.go)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	drop := make(map[string]bool, len(labels))
	var errs []error
	for _, l := range labels {
		if old.byLabel[l] == nil {
			// Redacted: a caller that removes by proxy-list line or dialing URL passed a password.
			errs = append(errs, fmt.Errorf("pool: no exit labelled %q", RedactRaw(l)))
		}
		drop[l] = true
	}
	var kept, gone []*exitState
	for _, es := range old.all {
		if drop[es.exit.label] {
			gone = append(gone, es)
		} else {
			kept = append(kept, es)
		}
	}
	p.set.Store(p.buildSet(kept))
	p.retire(gone, true)
	p.dropGateways(named)
	p.mu.Unlock()
	p.tellRemoved(gone)
	return errors.Join(errs...)
}

// retire marks exits that have left the exit set: kept for a return within retention, or, if
// keep is false, forgotten. The caller holds p.mu and has stored the set without them.
func (p *Pool) retire(gone []*exitState, keep bool) {
	now := p.clock.Now()
	for _, es := range gone {
		p.gone.set(es.id, true)
		if !keep {
			es.life.Store(lifeForgotten)
			p.forgotten.set(es.id, true)
			continue
		}
		es.life.Store(lifeRetired)
		if r, ok := p.retired[es.exit.label]; ok && r.es.id != es.id {
			r.es.life.Store(lifeForgotten)
			p.forgotten.set(r.es.id, true)
		}
		p.retired[es.exit.label] = retiredExit{es: es, at: now}
	}
}

// tellRemoved tells observers of exits that have left the exit set. The caller has released p.mu.
func (p *Pool) tellRemoved(gone []*exitState) {
	for _, es := range gone {
		p.obs.exitRemoved(es.exit)
	}
}

// forgetRetired forgets the removed exits kept longer than retention at now.
func (p *Pool) forgetRetired(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for label, r := range p.retired {
		if now.Sub(r.at) >= p.retention {
			r.es.life.Store(lifeForgotten)
			p.forgotten.set(r.es.id, true)
			delete(p.retired, label)
		}
	}
}

func (p *Pool) buildSet(all []*exitState) *exitSet {
	s := &exitSet{all: all, byLabel: make(map[string]*exitState, len(all)), byID: make(map[uint32]*exitState, len(all))}
	for _, es := range all {
		s.byLabel[es.exit.label] = es
		s.byID[es.id] = es
		s.anyEager = s.anyEager || es.eager
		s.anyBucket = s.anyBucket || es.bucket != nil
	}
	byTier := map[int][]*exitState{}
	for _, es := range all {
		t := es.exit.tier
		if !p.tiers {
			t = 0
		}
		byTier[t] = append(byTier[t], es)
	}
	for t, exits := range byTier {
		g := tierGroup{tier: t, exits: exits, ids: make([]uint32, len(exits))}
		for i, es := range exits {
			g.ids[i] = es.id
			if es.bucket != nil && g.buckets == nil {
				g.buckets = make([]*ratelimit.Bucket, len(exits))
			}
		}
		g.consecutive = true
		for i, id := range g.ids {
			g.consecutive = g.consecutive && id == g.ids[0]+uint32(i)
		}
		if g.buckets != nil {
			for i, es := range exits {
				g.buckets[i] = es.bucket
			}
		}
		equal := true
		for _, es := range exits {
			equal = equal && es.exit.weight == exits[0].exit.weight
		}
		if !equal {
			g.cum = make([]float64, len(exits))
			sum := 0.0
			for i, es := range exits {
				sum += es.exit.weight
				g.cum[i] = sum
			}
		}
		s.groups = append(s.groups, g)
	}
	slices.SortFunc(s.groups, func(a, b tierGroup) int { return cmp.Compare(a.tier, b.tier) })
	s.kin = p.buildKinship(all)
	s.where = make(map[uint32]exitPos, len(all))
	for gi, g := range s.groups {
		for i, id := range g.ids {
			s.where[id] = exitPos{gi, i}
		}
	}
	return s
}
