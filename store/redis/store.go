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
	// OpTimeout bounds each background operation (publish, reconcile, lease). Default 2 s;
	// negative is an error.
	OpTimeout time.Duration
	// HealthInterval is how often the store checks its subscription (a PING) and, while degraded,
	// tries to reconnect and re-sync. Default 500 ms; negative is an error.
	HealthInterval time.Duration
	// QueueSize is how many transitions may wait to be published; past it they are dropped from
	// the queue and the next re-sync pushes the pool's whole state instead. Default 4096; negative
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
	// OnHealth, if set, is called (from a store goroutine, never the request path) whenever the
	// store turns degraded or healthy again. It must not block for long.
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
	// Degraded: Redis cannot be reached, or the store has not re-synced since it could again. The
	// pool runs on its own state meanwhile: transitions are kept to be pushed at the re-sync,
	// probe claims are this member's alone, and fleet rate limits fall back to local buckets.
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
	Reconciles    uint64 // completed re-syncs (the first one included)
	Claims        uint64 // probe claims won (or made locally while degraded)
	ClaimsRefused uint64 // probe claims another member held
	Leases        uint64 // lease round trips (each may cover several exits)
	Leased        uint64 // tokens leased
	FallbackTakes uint64 // tokens taken from fallback buckets
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
	degraded atomic.Bool
	ps       atomic.Pointer[goredis.PubSub] // the live subscription, closed by Close
	healthMu sync.Mutex
	health   Health

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

	published, applied, dropped, reconciles          atomic.Uint64
	claims, claimsRefused, leases, leased, fallbacks atomic.Uint64
}

var (
	_ store.Store       = (*Store)(nil)
	_ pool.Binder       = (*Store)(nil)
	_ pool.ProbeClaimer = (*Store)(nil)
)

// New returns a store that shares state through c, and starts its goroutines. It does not wait for
// Redis: a store that cannot reach it starts degraded and syncs once it can. c stays the caller's
// (Close does not close it). c may be a *redis.Client or a *redis.ClusterClient: every key of a
// namespace is in one hash slot, and the tests run the fleet on a three-master cluster.
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
		leaseWake: make(chan *fleetBucket, 1024),
	}
	round := make(chan struct{})
	st.leaseRound.Store(&round)
	st.degraded.Store(true)
	st.health = Health{Degraded: true, Since: time.Now(), Err: errNotSynced}
	st.wg.Add(3)
	go st.syncLoop()
	go st.publishLoop()
	go st.leaseLoop()
	return st, nil
}

// Member returns this member's name.
func (st *Store) Member() string { return st.member }

// Namespace returns the namespace the store's keys live in.
func (st *Store) Namespace() string { return st.s.Namespace }

// Bind implements pool.Binder: pool.Pool.Observe calls it when the store is added to p. It
// connects the store to p: it pulls the fleet's state into p now (bounded by OpTimeout; if Redis
// cannot be reached it logs a warning and the pull happens at the first re-sync), and from then on
// applies other members' transitions to p. Entries for exits p does not have are skipped, so bind
// once p has its exits, and before p carries traffic. The store binds one pool at a time; unbind
// (which Observe's remove func calls) stops applying the fleet's news to p.
func (st *Store) Bind(p *pool.Pool) (unbind func(), err error) {
	if p == nil {
		return nil, errors.New("redisstore: Bind: nil pool")
	}
	if st.ctx.Err() != nil {
		return nil, errors.New("redisstore: Bind after Close")
	}
	if !st.pool.CompareAndSwap(nil, p) {
		return nil, errors.New("redisstore: Bind: already bound to a pool")
	}
	if err := st.reconcile(); err != nil {
		st.fail(err)
		st.log.Warn("redisstore: could not load the fleet's state; running on local state until Redis answers",
			"namespace", st.s.Namespace, "err", err)
	}
	return func() { st.pool.CompareAndSwap(p, nil) }, nil
}

// Close stops the store's goroutines, publishing what is queued first if Redis answers within
// OpTimeout. It does not close the Redis client. A closed store ignores further transitions and
// grants every probe claim locally.
func (st *Store) Close() error {
	st.once.Do(func() {
		st.cancel()
		if ps := st.ps.Load(); ps != nil {
			ps.Close() // wakes the sync loop from its read
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
	}
}

// errNotSynced is the reason a new store is degraded until its first sync.
var errNotSynced = errors.New("redisstore: not yet synchronised with the fleet")

// fail records that Redis failed with err, and reports whether that turned a healthy store
// degraded. It is safe on the request path: it only sets the health; the sync loop notices within
// HealthInterval, logs, calls OnHealth, reconnects and re-syncs.
func (st *Store) fail(err error) bool {
	if st.degraded.Load() {
		return false
	}
	st.healthMu.Lock()
	if st.degraded.Load() {
		st.healthMu.Unlock()
		return false
	}
	st.degraded.Store(true)
	st.health = Health{Degraded: true, Since: time.Now(), Err: err}
	st.healthMu.Unlock()
	return true
}

// announce logs the current health and calls OnHealth with it.
func (st *Store) announce() {
	h := st.Health()
	if h.Degraded {
		st.log.Warn("redisstore: degraded: running on local state", "namespace", st.s.Namespace, "member", st.member, "err", h.Err)
	} else {
		st.log.Info("redisstore: in step with the fleet", "namespace", st.s.Namespace, "member", st.member)
	}
	if st.s.OnHealth != nil {
		st.s.OnHealth(h)
	}
}

// markHealthy records a completed re-sync and reports whether the store was degraded.
func (st *Store) markHealthy() bool {
	if !st.degraded.Load() {
		return false
	}
	st.healthMu.Lock()
	st.health = Health{Since: time.Now()}
	st.degraded.Store(false)
	st.healthMu.Unlock()
	return true
}

// StateChanged queues the transition for the publisher. It never blocks: when the queue is full
// the transition is dropped and counted, and the store re-syncs (pushing the pool's whole state).
func (st *Store) StateChanged(c pool.StateChange) {
	if st.ctx.Err() != nil {
		return // closed: nobody publishes any more
	}
	select {
	case st.q <- c:
	default:
		st.dropped.Add(1)
		st.fail(errQueueFull)
	}
}

var errQueueFull = errors.New("redisstore: transition queue full")
