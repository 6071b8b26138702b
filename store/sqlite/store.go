package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
)

// Defaults for Settings.
const (
	DefaultFlushInterval = 500 * time.Millisecond
	DefaultQueueSize     = 4096
	DefaultBusyTimeout   = 5 * time.Second
	DefaultRetention     = 7 * 24 * time.Hour
	// CommitAllowance is what DurabilityBound adds to the flush interval for the commit itself
	// (a WAL append: milliseconds, more on a loaded machine).
	CommitAllowance = 250 * time.Millisecond
)

// Settings tune a Store. The zero value means every default.
type Settings struct {
	// FlushInterval is how long the first transition of a batch may wait before the batch is
	// committed; a kill -9 loses at most about this much (see DurabilityBound). Default 500 ms;
	// negative is an error.
	FlushInterval time.Duration
	// QueueSize is how many transitions may wait for the writer; past it, the next flush writes a
	// full snapshot instead (nothing is lost). Default 4096; negative is an error.
	QueueSize int
	// BusyTimeout is how long Open, and each flush, wait for a write lock another connection holds
	// before reporting ErrLocked. Default 5 s; negative is an error.
	BusyTimeout time.Duration
	// Retention: at Bind, rows whose OPEN window ended, or that were last changed, longer ago than
	// this are dropped (an exit gone from the pool for a week is not coming back with its state).
	// Default 7 days; negative is an error.
	Retention time.Duration
	// StartFresh: when the file is corrupt or of another schema (ErrCorrupt, ErrSchema), rename it
	// aside to PATH.bad-TIMESTAMP (with its -wal and -shm files), log a warning and start an empty
	// file, instead of failing. A locked or unwritable file (ErrLocked, ErrReadOnly) is an error
	// all the same.
	StartFresh bool
	// Sync commits with synchronous=FULL (an fsync per commit), so that commits also survive a power
	// cut or kernel crash. Default synchronous=NORMAL, which survives a killed process.
	Sync bool
	// Clock must be the pool's clock: restored windows are compared with its now. Default
	// clock.System. Flushes run on real time whatever the clock.
	Clock clock.Clock
	// Logger receives warnings (a file started fresh, a queue overflow, a failed flush). Default
	// slog.Default().
	Logger *slog.Logger
}

func (s *Settings) fill() error {
	var errs []error
	if s.FlushInterval < 0 {
		errs = append(errs, fmt.Errorf("sqlitestore: FlushInterval %v is negative", s.FlushInterval))
	}
	if s.QueueSize < 0 {
		errs = append(errs, fmt.Errorf("sqlitestore: QueueSize %d is negative", s.QueueSize))
	}
	if s.BusyTimeout < 0 {
		errs = append(errs, fmt.Errorf("sqlitestore: BusyTimeout %v is negative", s.BusyTimeout))
	}
	if s.Retention < 0 {
		errs = append(errs, fmt.Errorf("sqlitestore: Retention %v is negative", s.Retention))
	}
	if s.FlushInterval == 0 {
		s.FlushInterval = DefaultFlushInterval
	}
	if s.QueueSize == 0 {
		s.QueueSize = DefaultQueueSize
	}
	if s.BusyTimeout == 0 {
		s.BusyTimeout = DefaultBusyTimeout
	}
	if s.Retention == 0 {
		s.Retention = DefaultRetention
	}
	if s.Clock == nil {
		s.Clock = clock.System
	}
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	return errors.Join(errs...)
}

// Store keeps a pool's breaker state in an SQLite file. Open it, connect it to a pool with
// store.NewPool (or pool.Pool.Observe, which binds it), and Close it once the pool carries no
// more traffic. It implements pool.Observer (StateChanged only enqueues) and pool.Binder. It is
// safe for concurrent use.
type Store struct {
	pool.NopObserver
	path string
	s    Settings
	db   *sql.DB
	lock *fileLock // held from Open to Close: the single-writer guard
	log  *slog.Logger

	q        chan pool.SavedBreaker
	overflow atomic.Bool
	flushReq chan chan error
	stop     chan struct{}
	done     chan struct{}

	pool   atomic.Pointer[pool.Pool]
	bindMu sync.Mutex
	closed atomic.Bool

	written  atomic.Uint64
	resyncs  atomic.Uint64
	dropped  atomic.Uint64
	errMu    sync.Mutex
	lastErr  error
	closeErr error
	once     sync.Once
}

var (
	_ store.Store = (*Store)(nil)
	_ pool.Binder = (*Store)(nil)
)

// Open opens (or creates) the state file at path, takes its single-writer lock, checks it (see the
// package documentation on bad files and on one writer) and starts the writer. While the Store is
// open, another Open of the same file — from this process or another — fails at once with
// ErrLocked; after Close it succeeds. Errors about the file are *FileError.
func Open(path string, s Settings) (*Store, error) {
	if err := s.fill(); err != nil {
		return nil, err
	}
	if err := checkPath(path); err != nil {
		return nil, err
	}
	// The single-writer lock comes first: nothing, not even a StartFresh rename, touches a file
	// another Store has open.
	lock, err := lockFor(path)
	if err != nil {
		return nil, err
	}
	db, err := openDB(path, &s)
	if err != nil {
		if !s.StartFresh || !(errors.Is(err, ErrCorrupt) || errors.Is(err, ErrSchema)) {
			lock.release()
			return nil, err
		}
		lock.unlockFile()
		aside, merr := moveAside(path, s.Clock.Now())
		if merr != nil {
			lock.release()
			return nil, fmt.Errorf("%w; and moving it aside failed: %v", err, merr)
		}
		s.Logger.Warn("sqlitestore: state file unusable, starting fresh; the old file is kept",
			"path", path, "kept_as", aside, "err", err)
		if err := lock.lockFile(path); err != nil {
			lock.release()
			return nil, err
		}
		if db, err = openDB(path, &s); err != nil {
			lock.release()
			return nil, err
		}
	}
	st := &Store{
		path: path, s: s, db: db, lock: lock, log: s.Logger,
		q:        make(chan pool.SavedBreaker, s.QueueSize),
		flushReq: make(chan chan error),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go st.run()
	return st, nil
}

// moveAside renames path and its -wal and -shm files to PATH.bad-TIMESTAMP*, and returns the new
// name of the main file.
func moveAside(path string, now time.Time) (string, error) {
	aside := path + ".bad-" + now.UTC().Format("20060102T150405.000000000")
	if err := os.Rename(path, aside); err != nil {
		return "", err
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Rename(path+suffix, aside+suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return aside, err
		}
	}
	return aside, nil
}

// Path returns the state file's path.
func (st *Store) Path() string { return st.path }

// DurabilityBound is how old a transition must be to be sure to survive a kill -9:
// FlushInterval plus CommitAllowance.
func (st *Store) DurabilityBound() time.Duration { return st.s.FlushInterval + CommitAllowance }

// StateChanged queues the transition for the writer, if it is worth keeping (store.Record). It
// never blocks: when the queue is full it notes the overflow, and the next flush writes a full
// snapshot of the pool instead.
func (st *Store) StateChanged(c pool.StateChange) {
	sb, ok := store.Record(c)
	if !ok || st.closed.Load() {
		return
	}
	select {
	case st.q <- sb:
	default:
		st.dropped.Add(1)
		st.overflow.Store(true)
	}
}

// Bind implements pool.Binder: pool.Pool.Observe calls it when the store is added to p. It
// restores the saved state into p — OPEN pairs keep their remaining window and trip count, parked
// exits stay parked, entries for exits p does not have are skipped, so bind once p has its exits —
// and from then on answers queue overflows, and Close, with snapshots of p. The store binds one
// pool at a time; unbind (which Observe's remove func calls) lets it go, after which the store
// may be bound again. Bind before p carries traffic.
func (st *Store) Bind(p *pool.Pool) (unbind func(), err error) {
	if p == nil {
		return nil, errors.New("sqlitestore: Bind: nil pool")
	}
	st.bindMu.Lock()
	defer st.bindMu.Unlock()
	if st.closed.Load() {
		return nil, errors.New("sqlitestore: Bind after Close")
	}
	if st.pool.Load() != nil {
		return nil, errors.New("sqlitestore: Bind: already bound to a pool")
	}
	now := st.s.Clock.Now()
	saved, err := st.load(now)
	if err != nil {
		return nil, err
	}
	applied, skipped, err := p.Restore(now, saved)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: %w", st.path, err)
	}
	st.pool.Store(p)
	st.log.Info("sqlitestore: restored breaker state", "path", st.path, "rows", len(saved.Breakers),
		"applied", applied, "skipped", skipped)
	return func() { st.pool.CompareAndSwap(p, nil) }, nil
}

// Load returns the state saved in the file at now: every row, after dropping the ones past
// Settings.Retention and CLOSED rows with nothing to remember.
func (st *Store) Load() (pool.SavedState, error) { return st.load(st.s.Clock.Now()) }

// Flush commits everything queued so far and returns when it is on disk, or the error — ErrGone or
// ErrReadOnly (a *FileError) when the file was removed, replaced or made read-only since Open, even
// with nothing queued.
func (st *Store) Flush() error {
	if st.closed.Load() {
		return errors.New("sqlitestore: Flush after Close")
	}
	reply := make(chan error, 1)
	select {
	case st.flushReq <- reply:
		return <-reply
	case <-st.done:
		return errors.New("sqlitestore: Flush after Close")
	}
}

// Close stops taking transitions, commits what is queued together with a final snapshot of the
// bound pool, and closes the file. Call it once the pool carries no more traffic (after closing
// the transports built on it). It returns the error
// of that last commit, if any.
func (st *Store) Close() error {
	st.once.Do(func() {
		st.closed.Store(true)
		close(st.stop)
		<-st.done
		if err := st.db.Close(); err != nil && st.closeErr == nil {
			st.closeErr = classify(st.path, err)
		}
		// Only once the file is closed (its last checkpoint done) may another Store have it.
		if err := st.lock.release(); err != nil && st.closeErr == nil {
			st.closeErr = &FileError{Path: st.path, Err: fmt.Errorf("lock file %s: %v", st.lock.path, err)}
		}
	})
	return st.closeErr
}

// Stats are a store's counters.
type Stats struct {
	Written uint64 // rows committed
	Dropped uint64 // transitions the full queue turned away (each answered by a snapshot)
	Resyncs uint64 // full snapshots written because of that
	LastErr error  // the last failed flush's error, nil once one succeeds
}

// Stats returns the store's counters.
func (st *Store) Stats() Stats {
	st.errMu.Lock()
	defer st.errMu.Unlock()
	return Stats{Written: st.written.Load(), Dropped: st.dropped.Load(), Resyncs: st.resyncs.Load(), LastErr: st.lastErr}
}

// setErr notes err (nil after a flush that succeeded) and returns the one it replaces.
func (st *Store) setErr(err error) (prev error) {
	st.errMu.Lock()
	defer st.errMu.Unlock()
	prev, st.lastErr = st.lastErr, err
	return prev
}

// load reads every row, after pruning.
func (st *Store) load(now time.Time) (pool.SavedState, error) {
	ctx := context.Background()
	cutoff := now.Add(-st.s.Retention).UnixNano()
	if _, err := st.db.ExecContext(ctx,
		`DELETE FROM breakers WHERE (state = 'closed' AND level = 0) OR (changed < ?1 AND next_probe < ?1)`, cutoff); err != nil {
		return pool.SavedState{}, classify(st.path, err)
	}
	breakers, err := readBreakers(ctx, st.db)
	if err != nil {
		return pool.SavedState{}, classify(st.path, err)
	}
	return pool.SavedState{Version: pool.SavedStateVersion, Saved: now, Breakers: breakers}, nil
}
