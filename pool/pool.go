package pool

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// Pool is a set of exits and the breakers that judge them: one per (exit, origin) pair, created
// when the pair is first used and dropped when idle and healthy; one per exit, for exit-scoped
// trouble; and one per origin, the origin guard. It picks an exit for each request. Exits can be
// added and removed while traffic flows. A Pool is safe for concurrent use.
type Pool struct {
	clock   clock.Clock
	pairPol *breaker.Policy
	exitPol *breaker.Policy
	guard   guardConfig
	// pairRaw and exitRaw are the pair and exit settings as given, zero fields unfilled: an
	// override is layered over them before defaults are filled in, so that a derived default
	// (MaxCooldown from BaseCooldown, ParkFor from MaxCooldown) follows the override.
	pairRaw, exitRaw breaker.Settings
	// exitRest caps the rests of exit breakers after transient trips (ExitRest), 0 when
	// WithExitSettings set a MaxCooldown of its own.
	exitRest time.Duration
	// rules are the WithOriginSettings patterns, most specific first (origins.go).
	rules     []*originRule
	obs       observers
	dryRun    bool
	inline    bool // sweep on the pick that finds a sweep due
	selection Selection
	tiers     bool
	idleTTL   time.Duration
	rand      func() uint64
	groups    GroupSettings // group.go

	mu     sync.Mutex // serialises exit-set changes
	set    atomic.Pointer[exitSet]
	nextID uint32

	origins originTable // origintable.go

	sessions sessionTable
	// gateways are the pool's provider gateways and their sessions (gateway.go); strictSessions
	// makes a caller session that lost its exit fail (WithStrictSessions).
	gateways       gatewayTable
	strictSessions bool

	// Per exit id, read by the picker without locks: whether the exit's own breaker is out of
	// CLOSED (kept by the breaker's Mirror hook, under its lock), and requests in flight.
	exitOpen bitTable
	// exitEpoch counts the exit breakers' returns to CLOSED: an attempt admitted without touching
	// its exit's breaker keeps the epoch it saw (ticket.exitEpoch, exitPermit).
	exitEpoch atomic.Uint32 // never 0 once the pool is made (nextExitEpoch)
	gone      bitTable      // removed exits
	forgotten bitTable      // removed exits whose state is forgotten for good (lifeForgotten)
	inflight  counterTable
	traffic   trafficTable // bytes moved, per exit id (bytes.go)
	spend     spendBook    // prices and budgets (cost.go, budget.go)
	// lazyPairs: a pair gets a breaker only when it first fails (see finish). Successes of a pair
	// with no breaker need no counting unless the failure-ratio condition is on, and it needs no
	// bucket unless every pair is rate-limited.
	lazyPairs bool
	// probeLease is the pair policy's ProbeLease, read once: acquire needs it on every pick, and
	// Policy.Settings copies the whole struct.
	probeLease time.Duration

	gate    *ratelimit.Gate // never nil: at least ratelimit.Limits{}, which paces pairs that showed limits
	limits  bool            // WithRateLimits was given: 429s without Retry-After cut paces too (AIMD)
	claimer ProbeClaimer    // nil: probes are this pool's alone
	// concurrency is WithAdaptiveConcurrency's settings; nil: no limits (limit.go).
	concurrency *ConcurrencySettings

	mix servedMix // whether several origins are served lately (goodput.go)

	lastSweep atomic.Int64
	sweeping  atomic.Bool
	sweeps    sync.WaitGroup

	// retired holds removed exits by label, under mu, for Add and Sync to bring back with their
	// breakers when the same proxy returns within retention (see Remove).
	retired   map[string]retiredExit
	retention time.Duration
}

// New returns a pool configured by opts. It validates everything up front: a bad setting is an
// error naming it.
func New(opts ...Option) (*Pool, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	pairPol, err := breaker.NewPolicy(c.pair)
	if err != nil {
		return nil, fmt.Errorf("pool: pair breaker settings: %w", err)
	}
	exitPol, err := breaker.NewPolicy(c.exit)
	if err != nil {
		return nil, fmt.Errorf("pool: exit breaker settings: %w", err)
	}
	guard, err := newGuardConfig(c.guard, c.rand)
	if err != nil {
		return nil, err
	}
	if err := c.spend.build(c.ignoreTiers); err != nil {
		return nil, err
	}
	p := &Pool{
		clock: c.clock, pairPol: pairPol, exitPol: exitPol, guard: guard,
		dryRun: c.dryRun, inline: c.inlineSweep, selection: c.selection, tiers: !c.ignoreTiers, idleTTL: c.idleTTL,
		rand: c.rand, lazyPairs: pairPol.Settings().FailureRatio == 0,
		concurrency: c.concurrency, claimer: c.claimer,
		gate:     c.gate,
		limits:   c.limits,
		spend:    c.spend,
		sessions: sessionTable{max: c.maxSessions, maxAge: int64(c.sessionMaxAge), maxUses: c.sessionMaxUses, m: make(map[sessionPin]pinned)},
	}
	if p.groups, err = newGroupConfig(c.groups); err != nil {
		return nil, err
	}
	p.exitEpoch.Store(1) // a ticket's exitEpoch 0 says "not admitted lazily"
	p.pairRaw, p.exitRaw = c.pair, c.exit
	if c.exit.MaxCooldown == 0 {
		p.exitRest = ExitRest // an exit ladder of the user's own is left alone
	}
	if err := p.resolveRules(c); err != nil {
		return nil, err
	}
	p.probeLease = pairPol.Settings().ProbeLease
	p.retired = make(map[string]retiredExit)
	p.retention = max(c.idleTTL, p.probeLease, exitPol.Settings().ProbeLease, guard.policy.Settings().ProbeLease)
	for _, r := range p.rules {
		p.retention = max(p.retention, r.pairPol.Settings().ProbeLease, r.guard.policy.Settings().ProbeLease)
	}
	if p.gate.PairsLimited() {
		p.lazyPairs = false
	}
	p.gateways.init(c.seeded, c.rand)
	p.strictSessions = c.strictSessions
	p.set.Store(p.buildSet(nil))
	p.lastSweep.Store(c.clock.Now().UnixNano())
	if err := p.Add(c.exits...); err != nil {
		return nil, err
	}
	// Observers last: a Binder (a store restoring saved state, gauges) sees the whole pool.
	var bound []func()
	for _, o := range c.observers {
		remove, err := p.Observe(o)
		if err != nil {
			for _, rm := range bound {
				rm()
			}
			return nil, fmt.Errorf("pool: WithObserver: %w", err)
		}
		bound = append(bound, remove)
	}
	return p, nil
}

// Exit returns the exit labelled label, or nil.
func (p *Pool) Exit(label string) *Exit { return p.set.Load().byLabel[label].exitOrNil() }

func (es *exitState) exitOrNil() *Exit {
	if es == nil {
		return nil
	}
	return es.exit
}

// Clock returns the clock the pool reads and waits on.
func (p *Pool) Clock() clock.Clock { return p.clock }

// DryRun reports whether the pool was made WithDryRun.
func (p *Pool) DryRun() bool { return p.dryRun }

// Exits returns the pool's exits, in the order they were added.
func (p *Pool) Exits() []*Exit {
	set := p.set.Load()
	out := make([]*Exit, len(set.all))
	for i, es := range set.all {
		out[i] = es.exit
	}
	return out
}

// originState is everything the pool keeps per origin. The fields every pick reads come first,
// so that they share few cache lines (the state is allocated 64-byte aligned): at 1,000 origins
// each line of it a pick touches is a cache miss. A pick reads lines 0 and 1 (the fields up to
// the guard's breaker word), line 10 (due's last field, kin's and lat's first), and one line of
// load.
type originState struct {
	dead atomic.Bool // dropped from the pool's table by a sweep; re-look it up
	// epoch counts the times a pair of this origin returned to CLOSED. A lease admitted without
	// looking at its pair (lazyPair) remembers it, so its verdict can tell a pair that re-closed
	// since — whose generation it never saw — from one that stayed CLOSED (see pairPermit).
	epoch  atomic.Uint32     // wraps: compared with epochAfter
	bucket *ratelimit.Bucket // the origin's own bucket, across all exits; nil if not limited
	// limits is its pairs' concurrency limits; nil without WithAdaptiveConcurrency (limit.go).
	limits *originLimits
	// eager: the origin's pair settings count successes (FailureRatio), so its pairs need a
	// breaker from their first pick.
	eager bool
	open  bitTable // per exit id: the pair's breaker exists and is out of CLOSED
	// limited: per exit id, the pair has a token bucket (a configured per-pair limit, or a cut
	// pace not yet grown back).
	limited bitTable
	// guard is its origin guard (guard.go), at offset 64: the pick reads its config pointer and
	// its breaker's word, which then share the state's second cache line.
	guard originGuard
	// due bounds when its pairs out of CLOSED may next admit a request (due.go); kin is what its
	// bans taught about groups of exits, and the groups held (grouphold.go). due's last field,
	// kin's first and lat's first are read by every pick, and share a cache line.
	due dueTable
	kin groupHolds
	// lat is its typical latency and its pairs tracked as slow (latency.go); load its attempts
	// in flight per exit (load.go).
	lat  originLatency
	load originLoad

	key   string
	pool  *Pool
	mu    sync.RWMutex
	pairs map[uint32]*pair
	// paces holds the paces of the pairs that have one: made with the pair under a configured
	// per-pair limit, else at its first 429 (most pairs never meet one, and a pace costs more than
	// the rest of the pair). A pace lives as long as its pair.
	paces map[uint32]*ratelimit.Pair
	// learning: per exit id, the pair's pace counts its successes (it has met a 429), so a success
	// admitted without looking at the pair must find it (adapt); other successes look up nothing.
	learning bitTable
	pages    atomic.Pointer[pageBook] // the pages its exits got, once one was judged (softblock.go)
	// rule is the most specific WithOriginSettings pattern matching key, looked up once when the
	// origin state is made; nil when none does.
	rule *originRule
	// pace is the window the origin's pairs learned, a prior for its other pairs; learn is what
	// its bans lasted (pace.go).
	pace  originPace
	learn recoveryStats
	// spill is its tiers' health and loads (spill.go).
	spill originSpill
	// traffic is the bytes its attempts moved (bytes.go).
	traffic trafficCounter
	// harden is what its bans say of whether it hardens on repeat offenders (offence.go).
	harden offenceStats
}

type pair struct {
	// b is the pair's breaker, embedded: the pair is its Watcher (StateChanged, MirrorClosed), so
	// a pair is one allocation with no callbacks of its own.
	b      breaker.Breaker
	origin *originState
	// episode is when the pair's current ban episode began (episodeClock; 0: none): its trip from
	// CLOSED for a block or a rate limit without Retry-After (pace.go).
	episode atomic.Uint32
	// closedEpoch is the origin's epoch when the pair last returned to CLOSED; 0 if never.
	closedEpoch atomic.Uint32
	// due is the instant before which the pair cannot admit a request (0: CLOSED; dueSwept once
	// swept): its key in the origin's due table (due.go).
	due atomic.Int64
	id  uint32 // the exit's
	// flags: mute silences the breaker's hooks, while a retune restores its state into it before
	// it is in the table and for good once a retune has replaced it (retune.go); and the pair's
	// memory of its recent bans (offence.go).
	flags pairFlags
}

// StateChanged reports the pair's transitions to the pool's observers, for the exit's current
// version (as for the exit's own breaker, newExitBreaker), or to nobody.
func (pr *pair) StateChanged(t breaker.Transition) {
	pr.noteDue(t) // muted or not: the origin's bound must hear of it (due.go)
	if pr.flags.muted() {
		return
	}
	pr.noteOffence(t) // offence.go; before noteEpisode, which forgets the episode
	pr.noteEpisode(t)
	pr.noteGroupBan(t)
	if t.From == breaker.HalfOpen && t.To == breaker.Closed {
		pr.origin.lat.startRamp(t.At, pr.id) // slow start (latency.go)
	}
	p := pr.origin.pool
	if cur := p.set.Load().byID[pr.id]; cur != nil {
		p.obs.stateChanged(StateChange{Scope: ScopePair, Exit: cur.exit, Origin: pr.origin.key, Transition: t})
	}
}

// MirrorClosed keeps the origin's bit table, and the pair's closedEpoch, in step with the breaker.
func (pr *pair) MirrorClosed(notClosed bool) {
	if pr.flags.muted() {
		return
	}
	o := pr.origin
	if !notClosed {
		pr.closedEpoch.Store(o.epoch.Add(1))
	}
	o.open.set(pr.id, notClosed)
}

// pacer returns the pair's pace, nil if it has none yet. It takes the origin's read lock: callers
// that hold o.mu read o.paces themselves.
func (pr *pair) pacer() *ratelimit.Pair { return pr.origin.pacer(pr.id) }

// pacer returns the pace of the pair with exit id, nil if it has none.
func (o *originState) pacer(id uint32) *ratelimit.Pair {
	o.mu.RLock()
	pc := o.paces[id]
	o.mu.RUnlock()
	return pc
}

// setPace gives the pair with exit id the pace pc unless it has one, and returns the pair's pace.
func (o *originState) setPace(id uint32, pc *ratelimit.Pair) *ratelimit.Pair {
	o.mu.Lock()
	defer o.mu.Unlock()
	if cur := o.paces[id]; cur != nil {
		return cur
	}
	if o.paces == nil {
		o.paces = make(map[uint32]*ratelimit.Pair)
	}
	o.paces[id] = pc
	return pc
}

// origin returns the state for key, creating it if needed.
func (p *Pool) origin(key string) *originState {
	return p.origins.get(key, func() *originState {
		o := &originState{key: key, pool: p, pairs: make(map[uint32]*pair), rule: p.ruleFor(key)}
		o.due.min.Store(math.MaxInt64)
		o.eager = o.rule != nil && o.rule.eager
		o.bucket = p.gate.OriginBucket(key)
		p.initOriginGuard(o)
		o.limits = newOriginLimits(p.concurrency)
		return o
	})
}

// lookupPair returns the pair's breaker, or nil if the pair has none yet (it is CLOSED and fresh).
func (o *originState) lookupPair(id uint32) *pair {
	o.mu.RLock()
	pr := o.pairs[id]
	o.mu.RUnlock()
	return pr
}

// pairFor returns the pair for es, creating it. ok is false if o was dropped meanwhile.
func (p *Pool) pairFor(o *originState, es *exitState) (*pair, bool) {
	if pr := o.lookupPair(es.id); pr != nil {
		return pr, true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.dead.Load() {
		return nil, false
	}
	if pr := o.pairs[es.id]; pr != nil {
		return pr, true
	}
	// The exit's current version carries its current settings: es may be one a lease picked
	// before a Sync retuned the exit.
	tune := es.tune
	if cur := p.set.Load().byID[es.id]; cur != nil {
		tune = cur.tune
	}
	pr := p.newPair(o, es, p.pairPolicy(o, tune))
	if p.gate.PairsLimited() {
		if o.paces == nil {
			o.paces = make(map[uint32]*ratelimit.Pair)
		}
		o.paces[es.id] = p.gate.NewPair(es.exit.label)
		o.limited.set(es.id, true)
	}
	o.pairs[es.id] = pr
	return pr, true
}

// newPair returns a pair of o and es whose breaker pol governs, not yet in o's table and without a
// pace.
func (p *Pool) newPair(o *originState, es *exitState, pol *breaker.Policy) *pair {
	pr := &pair{origin: o, id: es.id}
	pol.Init(&pr.b, pr)
	return pr
}

// originList returns the origins the pool holds now, so callers can visit them without holding
// the pool's origin lock.
func (p *Pool) originList() []*originState { return p.origins.list() }

// sweepDue reports whether a sweep is due at (Unix ns): the pick asks, inlined, before it calls
// maybeSweep.
func (p *Pool) sweepDue(at int64) bool { return at-p.lastSweep.Load() >= int64(p.idleTTL/2) }

// maybeSweep sweeps idle breakers at most once per half idle TTL: in the background, or at once
// WithInlineSweep.
func (p *Pool) maybeSweep(now time.Time) {
	if !p.sweepDue(now.UnixNano()) || !p.sweeping.CompareAndSwap(false, true) {
		return
	}
	p.lastSweep.Store(now.UnixNano())
	if p.inline {
		p.Sweep(now)
		p.sweeping.Store(false)
		return
	}
	p.sweeps.Add(1)
	go func() {
		defer p.sweeps.Done()
		defer p.sweeping.Store(false)
		p.Sweep(now)
	}()
}

// Sweep drops, at now, the pair breakers that are idle and healthy (breaker.Breaker.Idle with the
// pool's idle TTL) or belong to exits removed longer ago than their retention (see Remove), and
// origins left with nothing to remember. The pool
// sweeps by itself as picks flow (in the background, or inline WithInlineSweep); Sweep is for
// tests and for callers that want memory back at once.
func (p *Pool) Sweep(now time.Time) {
	p.forgetRetired(now)
	for _, o := range p.originList() {
		o.mu.Lock()
		for id, pr := range o.pairs {
			// An OPEN pair whose exit is itself out of CLOSED is not idle, whatever its breaker
			// says: nothing could probe it. Forgetting it would bring it back fresh, at level 0.
			blocked := o.open.get(id) && p.exitOpen.get(id)
			if p.forgotten.get(id) || (!blocked && pr.b.Idle(now, p.idleTTL) && !o.paces[id].Throttled() && pr.flags.offences(now) == 0) {
				delete(o.pairs, id)
				delete(o.paces, id)
				pr.due.Store(dueSwept)
				o.open.set(id, false)
				o.limited.set(id, false)
				o.learning.set(id, false)
			}
		}
		empty := len(o.pairs) == 0 && o.guard.idle(now, p.idleTTL) && o.kin.rests.Load() == 0 // a gateway's site rest keeps it (gateway_rest.go)
		o.mu.Unlock()
		if !empty {
			continue
		}
		dropped := p.origins.drop(o, func() bool {
			o.mu.Lock()
			defer o.mu.Unlock()
			if len(o.pairs) != 0 || !o.guard.idle(now, p.idleTTL) || o.kin.rests.Load() != 0 {
				return false
			}
			o.dead.Store(true) // under o.mu: pairFor adds no pair to it from now on
			return true
		})
		if dropped {
			p.forgetHolds(o, now) // its groups' holds go with it; observers hear so (grouphold.go)
		}
	}
	p.origins.publishDrops()
	p.sessions.sweep(p.set.Load())
}

// Close waits for background sweeps to end. The pool stays usable.
func (p *Pool) Close() { p.sweeps.Wait() }
