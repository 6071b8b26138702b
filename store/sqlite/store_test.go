package sqlitestore_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	sqlitestore "github.com/proxybreaker/proxybreaker/store/sqlite"
	"github.com/proxybreaker/proxybreaker/transport"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(runChild(mode, os.Getenv(childPathEnv)))
	}
	goleak.VerifyTestMain(m)
}

const (
	urlA    = "http://a.example/"
	originA = "a.example"
)

// quiet is a logger that keeps the tests' output clean; logs go to buf when it is not nil.
func quiet(buf *bytes.Buffer) *slog.Logger {
	if buf == nil {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(buf, nil))
}

// env is a pool on a fake clock, connected to a store on path, and a transport on a scripted base.
type env struct {
	base  *storetest.Base
	clock *clock.Fake
	st    *sqlitestore.Store
	p     *pool.Pool
	tr    *transport.Transport
}

func newEnv(t *testing.T, path string, start time.Time, s sqlitestore.Settings) *env {
	t.Helper()
	e := &env{base: storetest.NewBase(), clock: clock.NewFake(start)}
	s.Clock = e.clock
	if s.Logger == nil {
		s.Logger = quiet(nil)
	}
	st, err := sqlitestore.Open(path, s)
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	p, err := store.NewPool(st,
		pool.WithExits(storetest.Exits("x", 4)...),
		pool.WithClock(e.clock),
		pool.WithIdleTTL(1000*time.Hour),
	)
	if err != nil {
		st.Close()
		t.Fatalf("NewPool: %v", err)
	}
	tr, err := transport.New(p, transport.WithBase(e.base))
	if err != nil {
		st.Close()
		t.Fatalf("transport.New: %v", err)
	}
	e.st, e.p, e.tr = st, p, tr
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	e.tr.Close()
	e.p.Close()
	e.st.Close()
}

func (e *env) pool() *pool.Pool { return e.p }

// tripAndPark parks x0 (a 407 for every origin) and opens (x1, a.example) with a 429.
func (e *env) tripAndPark(t *testing.T) {
	t.Helper()
	e.base.On("x0", "*", storetest.Reply{Status: 407})
	e.base.On("x1", originA, storetest.Reply{Status: 429, RetryAfter: 300})
	for i := 0; i < 100 && (!storetest.Exit(e.pool(), "x0").Parked || storetest.PairState(e.pool(), "x1", originA) != breaker.Open); i++ {
		storetest.Get(context.Background(), e.tr, urlA)
	}
	if !storetest.Exit(e.pool(), "x0").Parked || storetest.PairState(e.pool(), "x1", originA) != breaker.Open {
		t.Fatal("setup: x0 not parked or (x1, a.example) not open")
	}
	e.base.Reset()
}

// TestRestoreAfterRestart: a parked exit and an OPEN pair survive a restart: the new pool keeps
// the pair's remaining window and trip count, keeps the exit parked, and sends nothing through
// either until their windows end.
func TestRestoreAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	a := newEnv(t, path, storetest.T0, sqlitestore.Settings{})
	a.tripAndPark(t)
	pairBefore, _ := storetest.Pair(a.pool(), "x1", originA)
	exitBefore := storetest.Exit(a.pool(), "x0")
	a.close()

	b := newEnv(t, path, storetest.T0.Add(time.Minute), sqlitestore.Settings{})
	pairAfter, ok := storetest.Pair(b.pool(), "x1", originA)
	if !ok || pairAfter.State != breaker.Open || !pairAfter.NextProbe.Equal(pairBefore.NextProbe) || pairAfter.Trips != pairBefore.Trips {
		t.Errorf("restored pair = %+v, want OPEN until %v with %d trips", pairAfter, pairBefore.NextProbe, pairBefore.Trips)
	}
	if exitAfter := storetest.Exit(b.pool(), "x0"); !exitAfter.Parked || !exitAfter.NextProbe.Equal(exitBefore.NextProbe) {
		t.Errorf("restored x0 = %+v, want parked until %v", exitAfter, exitBefore.NextProbe)
	}
	for i := range 30 {
		if label := storetest.MustGet(t, b.tr, urlA); label == "x0" || label == "x1" {
			t.Fatalf("request %d after the restart went through %s", i, label)
		}
	}
	// Once the pair's window has passed, it probes and closes; the next restart remembers that.
	b.clock.Set(pairBefore.NextProbe)
	storetest.MustGet(t, b.tr, urlA) // may go elsewhere; pin the probe to x1
	if _, err := storetest.Get(transport.ContextWithExit(context.Background(), "x1"), b.tr, urlA); err != nil {
		t.Fatalf("probe through x1: %v", err)
	}
	if st := storetest.PairState(b.pool(), "x1", originA); st != breaker.Closed {
		t.Fatalf("after its probe the pair is %v, want closed", st)
	}
	b.close()
	c := newEnv(t, path, pairBefore.NextProbe.Add(time.Second), sqlitestore.Settings{})
	if st := storetest.PairState(c.pool(), "x1", originA); st != breaker.Closed {
		t.Errorf("after the second restart the closed pair is %v", st)
	}
	if !storetest.Exit(c.pool(), "x0").Parked {
		t.Error("after the second restart x0 is no longer parked")
	}
}

// TestCommittedWithinDurabilityBound: a transition is readable from the file, by another
// connection, within DurabilityBound of happening — without Flush or Close.
func TestCommittedWithinDurabilityBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	e := newEnv(t, path, storetest.T0, sqlitestore.Settings{FlushInterval: 200 * time.Millisecond})
	reader, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	e.base.On("x2", originA, storetest.Reply{Status: 429, RetryAfter: 60})
	start := time.Now()
	for i := 0; i < 100 && storetest.PairState(e.pool(), "x2", originA) != breaker.Open; i++ {
		storetest.Get(context.Background(), e.tr, urlA)
	}
	took, ok := storetest.Eventually(5*time.Second, func() bool {
		var n int
		reader.QueryRow(`SELECT count(*) FROM breakers WHERE exit_label = 'x2' AND state = 'open'`).Scan(&n)
		return n == 1
	})
	bound := e.st.DurabilityBound()
	if !ok || time.Since(start) > bound {
		t.Errorf("the trip was on disk after %v (found: %t), want within DurabilityBound %v", took, ok, bound)
	}
	t.Logf("trip committed %v after it happened (bound %v)", took, bound)
}

// TestQueueOverflowWritesSnapshot: when the writer cannot keep up (here: another connection holds
// the write lock) and the queue overflows, nothing is lost: the next flush writes a full snapshot,
// with a warning.
func TestQueueOverflowWritesSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	var logs bytes.Buffer
	e := newEnv(t, path, storetest.T0, sqlitestore.Settings{QueueSize: 4, FlushInterval: time.Millisecond, Logger: quiet(&logs)})
	holder := lockFile(t, path)
	// Fill the queue with transitions of an exit the pool does not have, until the writer, stuck
	// behind the lock, turns some away.
	ghost := pool.MustParseExit("http://127.0.0.1:1").WithLabel("ghost")
	for i := 0; i < 5000 && e.st.Stats().Dropped == 0; i++ {
		e.st.StateChanged(pool.StateChange{Scope: pool.ScopePair, Exit: ghost, Origin: fmt.Sprintf("o%d.example", i),
			Transition: breaker.Transition{From: breaker.Closed, To: breaker.Open, At: storetest.T0, NextProbe: storetest.T0.Add(time.Hour), Trips: 1, Level: 1}})
	}
	if e.st.Stats().Dropped == 0 {
		t.Fatal("the queue never overflowed")
	}
	// These trips happen while the queue is full: their transitions are turned away.
	for i, origin := range []string{"b.example", "c.example", "d.example"} {
		e.base.On(fmt.Sprintf("x%d", i+1), origin, storetest.Reply{Status: 429, RetryAfter: 300})
		for j := 0; j < 100 && storetest.PairState(e.pool(), fmt.Sprintf("x%d", i+1), origin) != breaker.Open; j++ {
			storetest.Get(context.Background(), e.tr, "http://"+origin+"/")
		}
	}
	holder.Rollback()
	if err := e.st.Flush(); err != nil {
		t.Fatalf("Flush = %v", err)
	}
	if err := e.st.Flush(); err != nil { // the one after the overflow writes the snapshot
		t.Fatalf("Flush = %v", err)
	}
	saved, err := e.st.Load()
	if err != nil {
		t.Fatal(err)
	}
	for i, origin := range []string{"b.example", "c.example", "d.example"} {
		if !hasOpen(saved, fmt.Sprintf("x%d", i+1), origin) {
			t.Errorf("(x%d, %s) is not in the file after the overflow", i+1, origin)
		}
	}
	if s := e.st.Stats(); s.Resyncs == 0 || !strings.Contains(logs.String(), "overflowed") {
		t.Errorf("Stats() = %+v, logs %q; want a resync and a warning", s, logs.String())
	}
}

func hasOpen(s pool.SavedState, exit, origin string) bool {
	for _, sb := range s.Breakers {
		if sb.Scope == pool.ScopePair && sb.Exit == exit && sb.Origin == origin && sb.State == breaker.Open {
			return true
		}
	}
	return false
}

// lockFile opens path from another connection and holds its write lock until the test ends or
// the returned transaction is rolled back.
func lockFile(t *testing.T, path string) *sql.Tx {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tx, err := db.Begin()
	if err != nil {
		t.Fatalf("taking the write lock: %v", err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx
}

func TestSettingsValidate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	for _, tc := range []struct {
		s    sqlitestore.Settings
		want string
	}{
		{sqlitestore.Settings{FlushInterval: -1}, "FlushInterval"},
		{sqlitestore.Settings{QueueSize: -1}, "QueueSize"},
		{sqlitestore.Settings{BusyTimeout: -1}, "BusyTimeout"},
		{sqlitestore.Settings{Retention: -1}, "Retention"},
	} {
		if st, err := sqlitestore.Open(path, tc.s); err == nil || !strings.Contains(err.Error(), tc.want) {
			if st != nil {
				st.Close()
			}
			t.Errorf("Open(%+v) = %v, want an error naming %s", tc.s, err, tc.want)
		}
	}
	if _, err := sqlitestore.Open(path+"?mode=ro", sqlitestore.Settings{}); err == nil {
		t.Error("Open of a path with '?' = nil error")
	}
}

// TestBindOnePoolAtATime: a store binds one pool at a time; the func Observe returns unbinds it,
// and the store can then be bound to another pool, which it restores as it did the first.
func TestBindOnePoolAtATime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	a := newEnv(t, path, storetest.T0, sqlitestore.Settings{})
	a.tripAndPark(t)
	a.close()

	fake := clock.NewFake(storetest.T0.Add(time.Minute))
	st, err := sqlitestore.Open(path, sqlitestore.Settings{Clock: fake, Logger: quiet(nil)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	newPool := func() *pool.Pool {
		p, err := pool.New(pool.WithExits(storetest.Exits("x", 4)...), pool.WithClock(fake))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	first, second := newPool(), newPool()
	remove, err := first.Observe(st)
	if err != nil {
		t.Fatalf("first Observe = %v", err)
	}
	if !storetest.Exit(first, "x0").Parked {
		t.Error("binding did not restore the parked exit into the first pool")
	}
	if _, err := second.Observe(st); err == nil || !strings.Contains(err.Error(), "already bound") {
		t.Errorf("Observe by a second pool while bound = %v, want an error saying it is already bound", err)
	}
	if storetest.Exit(second, "x0").Parked {
		t.Error("the refused bind restored into the second pool")
	}
	remove()
	if _, err := second.Observe(st); err != nil {
		t.Fatalf("Observe by the second pool after the first let go = %v", err)
	}
	if !storetest.Exit(second, "x0").Parked {
		t.Error("binding did not restore the parked exit into the second pool")
	}
}
