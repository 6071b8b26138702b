package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
)

// Defaults for Settings.
const (
	DefaultNamespace      = "default"
	DefaultLinger         = 10 * time.Minute
	DefaultClaimTimeout   = 50 * time.Millisecond
	DefaultOpTimeout      = 2 * time.Second
	DefaultHealthInterval = 500 * time.Millisecond
	DefaultQueueSize      = 4096
	DefaultLeaseWait      = 50 * time.Millisecond
	DefaultLeaseTTL       = time.Second
	DefaultFallbackShare  = 1.0
)

// maxTTL caps how long a state key lives: a breaker parked "forever" still expires.
const maxTTL = 30 * 24 * time.Hour

// Settings tune a Store. The zero value means every default.
type Settings struct {
	// Namespace separates pools that share one Redis: members of one fleet use the same, other
	// pools another. Every key and the channel start with the hash tag "{pb:NAMESPACE}". Letters,
	// digits, '.', '_' and '-', at most 64. Default "default".
	Namespace string
	// Member names this process in the fleet; it must be unique among the members. Default: the
	// host name, the process id and a random suffix.
	Member string
	// Clock must be the pool's clock: windows and key lifetimes are computed from its now. Default
	// clock.System. Timeouts, retries and Redis's own key expiry run on real time.
	Clock clock.Clock
	// Linger is how long a breaker's key outlives its OPEN window (or its close), so that a member
	// that reconnects, or starts, within it learns the breaker's trip count and level and any close
	// it missed. Default 10 min; negative is an error.
	Linger time.Duration
	// ClaimTimeout bounds the one round trip a request may make to Redis: a HALF_OPEN probe's
	// claim. Past it the probe goes ahead on this member's own slot (and the store turns degraded).
	// Default 50 ms; negative is an error.
	ClaimTimeout time.Duration
	// OpTimeout bounds each background round trip (a publish batch, a page of a pull, a lease)
	// and how long Bind waits for the first sync. Default 2 s; negative is an error.
	OpTimeout time.Duration
	// HealthInterval is how often the store checks its subscription (a PING) and, while degraded,
	// tries to reconnect and re-sync. Default 500 ms; negative is an error.
	HealthInterval time.Duration
	// QueueSize is how many transitions may wait to be published; past it they are dropped from
	// the queue and the next re-sync pushes the pool's whole state (but what it learned from other
	// members) instead. Default 4096; negative
	// is an error.
	QueueSize int
	// LeaseBatch is how many tokens of an exit's fleet budget a member leases in one round trip
	// (ExitSource). 0 means a tenth of a second's worth at the exit's rate, at least 1 and at most
	// its burst. Negative is an error.
	LeaseBatch int
	// LeaseWait is how long a request may go without a token because a lease is late (Redis slow
	// or gone) before the exit's fallback bucket serves it; the request waits for the lease until
	// then, even with limits that fail fast. Default 50 ms; negative is an error.
	LeaseWait time.Duration
	// LeaseTTL: leased tokens not used within it are dropped, so an idle member cannot hoard a
	// burst and spend it later on top of the fleet's. Default 1 s; negative is an error.
	LeaseTTL time.Duration
	// FallbackShare is the share of an exit's fleet budget each member may use while Redis cannot
	// be reached, on a local bucket. Default 1: requests keep flowing at the fleet's rate per
	// member (with N members, the provider may see up to N times the budget during an outage); set
	// 1/N to stay within it. Must be in (0, 1].
	FallbackShare float64
	// OnHealth, if set, is called (from a store goroutine, never the request path) when the store
	// first comes in step with the fleet (healthy) or fails to, and whenever it turns degraded or
	// healthy again. Calls never overlap. It must not block for long.
	OnHealth func(Health)
	// Logger receives warnings (degraded, recovered, dropped entries). Default slog.Default().
	Logger *slog.Logger
}

func (s *Settings) fill() error {
	var errs []error
	neg := func(name string, d time.Duration) {
		if d < 0 {
			errs = append(errs, fmt.Errorf("redisstore: %s %v is negative", name, d))
		}
	}
	neg("Linger", s.Linger)
	neg("ClaimTimeout", s.ClaimTimeout)
	neg("OpTimeout", s.OpTimeout)
	neg("HealthInterval", s.HealthInterval)
	neg("LeaseWait", s.LeaseWait)
	neg("LeaseTTL", s.LeaseTTL)
	if s.QueueSize < 0 {
		errs = append(errs, fmt.Errorf("redisstore: QueueSize %d is negative", s.QueueSize))
	}
	if s.LeaseBatch < 0 {
		errs = append(errs, fmt.Errorf("redisstore: LeaseBatch %d is negative", s.LeaseBatch))
	}
	if s.Namespace == "" {
		s.Namespace = DefaultNamespace
	}
	if !namespaceRE.MatchString(s.Namespace) {
		errs = append(errs, fmt.Errorf("redisstore: Namespace %q: want 1 to 64 of A-Z a-z 0-9 . _ -", s.Namespace))
	}
	if s.FallbackShare == 0 {
		s.FallbackShare = DefaultFallbackShare
	}
	if !(s.FallbackShare > 0 && s.FallbackShare <= 1) {
		errs = append(errs, fmt.Errorf("redisstore: FallbackShare %v: want (0, 1]", s.FallbackShare))
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&s.Linger, DefaultLinger)
	def(&s.ClaimTimeout, DefaultClaimTimeout)
	def(&s.OpTimeout, DefaultOpTimeout)
	def(&s.HealthInterval, DefaultHealthInterval)
	def(&s.LeaseWait, DefaultLeaseWait)
	def(&s.LeaseTTL, DefaultLeaseTTL)
	if s.QueueSize == 0 {
		s.QueueSize = DefaultQueueSize
	}
	if s.Member == "" {
		host, _ := os.Hostname()
		var b [4]byte
		rand.Read(b[:])
		s.Member = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if s.Clock == nil {
		s.Clock = clock.System
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return errors.Join(errs...)
}

// Health is whether a store is in step with the fleet.
type Health struct {
	// Degraded: Redis cannot be reached (for some shard, on a Redis Cluster), the store has not
	// re-synced since it could again, or it has not yet pulled the fleet's state into its pool.
	// The pool runs on its own state meanwhile: transitions for the shards out of step are kept to
	// be pushed at their re-sync, their probe claims are this member's alone, and fleet rate
	// limits fall back to local buckets.
	Degraded bool
	// Since is when the store entered this mode (real time).
	Since time.Time
	// Err is what made it degraded; nil when healthy.
	Err error
}

// Stats are a store's counters.
type Stats struct {
	Published     uint64 // entries this member stored and published
	Applied       uint64 // other members' entries applied to the pool
	Dropped       uint64 // transitions a full queue turned away (the next re-sync covers them)
	Reconciles    uint64 // completed re-syncs of a shard group (the first ones included)
	Pulled        uint64 // entries read from Redis by pulls (cold start and re-syncs)
	Claims        uint64 // probe claims won (or made locally while degraded)
	ClaimsRefused uint64 // probe claims another member held
	Leases        uint64 // lease round trips (each may cover several exits)
	Leased        uint64 // tokens leased
	FallbackTakes uint64 // tokens taken from fallback buckets
	// ColdPull is how long the store took from Bind to its first turn to healthy: the pull of
	// the fleet's live entries into the pool, page by page. Zero until then.
	ColdPull time.Duration
	// LastPull is how long the latest pull of a shard group took (a re-sync's, or the first).
	LastPull time.Duration
}

// Store shares a pool's breaker state with a fleet through Redis. Make one with New, connect it to
// a pool with store.NewPool (or pool.WithProbeClaimer when building the pool, then
// pool.Pool.Observe, which binds it), and Close it once the pool carries no more traffic. It
// implements pool.Observer (StateChanged only enqueues), pool.Binder and pool.ProbeClaimer;
// ExitSource makes fleet-wide exit rate limits. Safe for concurrent use.
type Store struct {
	pool.NopObserver
	c      goredis.UniversalClient
	s      Settings
	k      keys
	member string
	clock  clock.Clock
	log    *slog.Logger

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	pool atomic.Pointer[pool.Pool]

	q        chan pool.StateChange
	groups   []*group
	groupOf  [Shards]*group
	sharded  bool        // SPUBLISH and SSUBSCRIBE (a Redis Cluster)
	syncMu   sync.Mutex  // orders Bind against a re-sync's look at the pool
	degraded atomic.Bool // some group out of step, or the bound pool not pulled yet
	healthMu sync.Mutex
	health   Health
	bindAt   time.Time     // under healthMu
	bound    chan struct{} // closed at the first turn to healthy after Bind; under healthMu

	announceMu    sync.Mutex // serialises report
	announced     bool       // the degraded state last announced
	announcedOnce bool

	runMu sync.Mutex
	runs  [Shards]string // each shard's run id when last read

	fullPush atomic.Bool // the queue dropped transitions: the next re-syncs push the whole state

	sentMu     sync.Mutex
	sent       map[store.Key]sentEntry // acknowledged within RepushWindow
	sentPruned int                     // len(sent) after the last prune

	pendMu  sync.Mutex
	pending map[store.Key]pendingEntry // published in vain: pushed again at the re-sync

	mirrorMu sync.Mutex
	mirror   map[store.Key]mirrorEntry

	holdMu sync.Mutex
	holds  map[string]*hold // by breaker id: another member's probe claim this member waits on

	claimMu      sync.Mutex
	claimsClosed bool
	claimWG      sync.WaitGroup // claims still waiting for Redis after ClaimTimeout

	leaseWake chan *fleetBucket
	leaseRTT  atomic.Int64 // moving average of a lease round trip, ns
	// leaseRound is closed when the lease loop's current round ends (and replaced by the next's):
	// requests waiting for tokens on their way wait on it (arrival.go).
	leaseRound atomic.Pointer[chan struct{}]
	bucketsMu  sync.Mutex
	buckets    []*fleetBucket

	published, applied, dropped, reconciles, pulledEntries atomic.Uint64
	claims, claimsRefused, leases, leased, fallbacks       atomic.Uint64
	coldPullNs, lastPull                                   atomic.Int64 // ns
}

var (
	_ store.Store       = (*Store)(nil)
	_ pool.Binder       = (*Store)(nil)
	_ pool.ProbeClaimer = (*Store)(nil)
)

// New returns a store that shares state through c, and starts its goroutines. It does not wait for
// Redis: a store that cannot reach it starts degraded and syncs once it can. c stays the caller's
// (Close does not close it). c may be a *redis.Client or a *redis.ClusterClient: on a cluster the
// namespace's keys and events are spread over its masters by shard (Shards; sharded pub/sub, Redis
// 7 or later), and the tests run the fleet on a cluster of three masters and three replicas.
func New(c goredis.UniversalClient, s Settings) (*Store, error) {
	if c == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if err := s.fill(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	st := &Store{
		c: c, s: s, k: newKeys(s.Namespace), member: s.Member, clock: s.Clock, log: s.Logger,
		ctx: ctx, cancel: cancel,
		q:         make(chan pool.StateChange, s.QueueSize),
		pending:   map[store.Key]pendingEntry{},
		mirror:    map[store.Key]mirrorEntry{},
		holds:     map[string]*hold{},
		sent:      map[store.Key]sentEntry{},
		leaseWake: make(chan *fleetBucket, 1024),
	}
	st.groups, st.sharded = newGroups(c, st.k)
	for _, g := range st.groups {
		for _, s := range g.shards {
			st.groupOf[s] = g
		}
	}
	round := make(chan struct{})
	st.leaseRound.Store(&round)
	st.degraded.Store(true)
	st.health = Health{Degraded: true, Since: time.Now(), Err: errNotSynced}
	st.wg.Add(2 + len(st.groups))
	for _, g := range st.groups {
		go st.syncLoop(g)
	}
	go st.publishLoop()
	go st.leaseLoop()
	return st, nil
}

// Member returns this member's name.
func (st *Store) Member() string { return st.member }

// Namespace returns the namespace the store's keys live in.
func (st *Store) Namespace() string { return st.s.Namespace }

// Bind implements pool.Binder: pool.Pool.Observe calls it when the store is added to p. It
// connects the store to p: the fleet's live entries are pulled into p, page by page, and from then
// on other members' transitions are applied to it. Bind waits for the pull at most OpTimeout; past
// that (a large fleet's state, or Redis out of reach) it returns and p carries traffic on its own
// state until the pull lands, when the store turns healthy (Health, OnHealth; Stats.ColdPull says
// how long it took). Entries for exits p does not have are skipped, so bind once p has its exits,
// and before p carries traffic. The store binds one pool at a time; unbind (which Observe's remove
// func calls) stops applying the fleet's news to p.
func (st *Store) Bind(p *pool.Pool) (unbind func(), err error) {
	if p == nil {
		return nil, errors.New("redisstore: Bind: nil pool")
	}
	if st.ctx.Err() != nil {
		return nil, errors.New("redisstore: Bind after Close")
	}
	bound := make(chan struct{})
	st.healthMu.Lock()
	st.bindAt, st.bound = time.Now(), bound
	st.healthMu.Unlock()
	st.syncMu.Lock()
	if !st.pool.CompareAndSwap(nil, p) {
		st.syncMu.Unlock()
		return nil, errors.New("redisstore: Bind: already bound to a pool")
	}
	var synced []*group // in step before p was bound: nobody pulled into p for them
	for _, g := range st.groups {
		if g.inStep.Load() {
			synced = append(synced, g)
		}
	}
	st.syncMu.Unlock()
	if len(synced) > 0 {
		st.wg.Add(1)
		go st.coldPull(p, synced)
	}
	timer := time.NewTimer(st.s.OpTimeout)
	defer timer.Stop()
	select {
	case <-bound:
	case <-timer.C:
		st.log.Warn("redisstore: not yet in step with the fleet; running on local state until the pull lands",
			"namespace", st.s.Namespace, "err", st.Health().Err)
	case <-st.ctx.Done():
	}
	return func() { st.pool.CompareAndSwap(p, nil) }, nil
}

// coldPull pulls the shards of groups that were in step before p was bound into p. A group that
// fails is left to its own loop, which re-syncs it with p.
func (st *Store) coldPull(p *pool.Pool, groups []*group) {
	defer st.wg.Done()
	for _, g := range groups {
		lost, err := st.pull(p, g.shards)
		if err == nil {
			err = st.push(p, g.shards, lost, true)
		}
		if err != nil {
			st.failGroup(g, err)
			continue
		}
		if g.inStep.Load() {
			g.pulled.Store(p)
		}
	}
	st.settle()
}

// Close stops the store's goroutines, publishing what is queued first if Redis answers within
// OpTimeout. It does not close the Redis client. A closed store ignores further transitions and
// grants every probe claim locally.
func (st *Store) Close() error {
	st.once.Do(func() {
		st.cancel()
		for _, g := range st.groups {
			if ps := g.ps.Load(); ps != nil {
				ps.Close() // wakes the sync loop from its read
			}
		}
		st.wg.Wait()
		st.claimMu.Lock()
		st.claimsClosed = true
		st.claimMu.Unlock()
		st.claimWG.Wait()
	})
	return nil
}

// Health returns whether the store is in step with the fleet. Degraded mode is visible three
// ways: here, through Settings.OnHealth, and in the logs.
func (st *Store) Health() Health {
	st.healthMu.Lock()
	defer st.healthMu.Unlock()
	return st.health
}

// Stats returns the store's counters.
func (st *Store) Stats() Stats {
	return Stats{
		Published: st.published.Load(), Applied: st.applied.Load(), Dropped: st.dropped.Load(),
		Reconciles: st.reconciles.Load(), Claims: st.claims.Load(), ClaimsRefused: st.claimsRefused.Load(),
		Leases: st.leases.Load(), Leased: st.leased.Load(), FallbackTakes: st.fallbacks.Load(),
		Pulled: st.pulledEntries.Load(), ColdPull: time.Duration(st.coldPullNs.Load()),
		LastPull: time.Duration(st.lastPull.Load()),
	}
}

// errNotSynced is the reason a new store is degraded until its first sync.
var errNotSynced = errors.New("redisstore: not yet synchronised with the fleet")

// fail records that Redis failed with err, on no shard in particular: every group falls out of
// step. It is safe on the request path: it only sets flags; the sync loops notice within
// HealthInterval, log, call OnHealth, reconnect and re-sync.
func (st *Store) fail(err error) {
	for _, g := range st.groups {
		g.inStep.Store(false)
	}
	st.degrade(err, false)
}

// failShard records that Redis failed with err on shard s: its group falls out of step.
func (st *Store) failShard(s int, err error) {
	st.groupOf[s].inStep.Store(false)
	st.degrade(err, false)
}

// failGroup records that g's sync loop failed with err; the store's health reports err even if it
// was degraded already.
func (st *Store) failGroup(g *group, err error) {
	g.inStep.Store(false)
	st.degrade(err, true)
}

// degrade turns the store degraded with err, or (update) sets err as the reason of a store that
// is degraded already.
func (st *Store) degrade(err error, update bool) {
	if st.degraded.Load() && !update {
		return
	}
	st.healthMu.Lock()
	defer st.healthMu.Unlock()
	switch {
	case !st.degraded.Load():
		st.degraded.Store(true)
		st.health = Health{Degraded: true, Since: time.Now(), Err: err}
	case update:
		st.health.Err = err
	}
}

// settle turns the store healthy once every group is in step and has pulled into the bound pool,
// then reports its health.
func (st *Store) settle() {
	st.healthMu.Lock()
	p := st.pool.Load()
	ok := p != nil && st.degraded.Load()
	for _, g := range st.groups {
		ok = ok && g.inStep.Load() && g.pulled.Load() == p
	}
	var bound chan struct{}
	if ok {
		st.health = Health{Since: time.Now()}
		st.degraded.Store(false)
		if st.bound != nil {
			st.coldPullNs.Store(int64(time.Since(st.bindAt)))
			bound, st.bound = st.bound, nil
		}
	}
	st.healthMu.Unlock()
	st.report()
	if bound != nil {
		// Bind returns only now: a pool that NewPool hands back is in step and OnHealth has heard
		// so (closed before report, the caller could look before the call).
		close(bound)
	}
}

// report logs the current health and calls OnHealth with it, if it is not what was last reported.
// A new store's wait for its first sync is not reported, only its end: healthy, or a failure.
func (st *Store) report() {
	st.announceMu.Lock()
	defer st.announceMu.Unlock()
	h := st.Health()
	if (st.announcedOnce && h.Degraded == st.announced) || (!st.announcedOnce && h.Err == errNotSynced) {
		return
	}
	st.announcedOnce, st.announced = true, h.Degraded
	if h.Degraded {
		st.log.Warn("redisstore: degraded: running on local state", "namespace", st.s.Namespace, "member", st.member, "err", h.Err)
	} else {
		st.log.Info("redisstore: in step with the fleet", "namespace", st.s.Namespace, "member", st.member)
	}
	if st.s.OnHealth != nil {
		st.s.OnHealth(h)
	}
}

// StateChanged queues the transition for the publisher. It never blocks: when the queue is full
// the transition is dropped and counted, and the store re-syncs (pushing the pool's whole state
// but what it learned from others).
func (st *Store) StateChanged(c pool.StateChange) {
	if st.ctx.Err() != nil {
		return // closed: nobody publishes any more
	}
	select {
	case st.q <- c:
	default:
		st.dropped.Add(1)
		st.fullPush.Store(true)
		st.fail(errQueueFull)
	}
}

var errQueueFull = errors.New("redisstore: transition queue full")
