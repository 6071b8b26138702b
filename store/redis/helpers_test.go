package redisstore_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
	"github.com/proxybreaker/proxybreaker/store/internal/storetest"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
	"github.com/proxybreaker/proxybreaker/transport"
)

func TestMain(m *testing.M) {
	// go-redis logs each failed dial and resubscription; the outage tests make many on purpose.
	goredis.SetLogger(silentLogger{})
	goleak.VerifyTestMain(m)
}

type silentLogger struct{}

func (silentLogger) Printf(context.Context, string, ...any) {}

const (
	urlA    = "http://a.example/"
	originA = "a.example"
)

// member is one process of a fleet: a pool connected to Redis at addr, and a transport on a
// scripted base.
type member struct {
	name   string
	base   *storetest.Base
	clock  clock.Clock
	fake   *clock.Fake // nil with the system clock
	client goredis.UniversalClient
	st     *redisstore.Store
	p      *pool.Pool
	tr     *transport.Transport

	mu     sync.Mutex
	health []redisstore.Health
}

type memberConfig struct {
	// client, when set, is the member's Redis client (a cluster's, say); addr is then unused.
	client   goredis.UniversalClient
	exits    int
	real     bool // the system clock instead of a fake one at storetest.T0
	settings redisstore.Settings
	opts     []pool.Option
	// limits, when set, builds ratelimit.Limits with this member's store as the exit source.
	limits func(st *redisstore.Store) pool.Option
}

func newClient(t testing.TB, addr string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{
		Addr: addr, MaxRetries: -1,
		DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, WriteTimeout: time.Second,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func newMember(t testing.TB, addr, name string, cfg memberConfig) *member {
	t.Helper()
	if cfg.exits == 0 {
		cfg.exits = 4
	}
	m := &member{name: name, base: storetest.NewBase(), client: cfg.client}
	if m.client == nil {
		m.client = newClient(t, addr)
	}
	if cfg.real {
		m.clock = clock.System
	} else {
		m.fake = clock.NewFake(storetest.T0)
		m.clock = m.fake
	}
	s := cfg.settings
	s.Member, s.Clock = name, m.clock
	if s.Namespace == "" {
		s.Namespace = "test"
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	s.OnHealth = func(h redisstore.Health) {
		m.mu.Lock()
		m.health = append(m.health, h)
		m.mu.Unlock()
	}
	st, err := redisstore.New(m.client, s)
	if err != nil {
		t.Fatalf("redisstore.New: %v", err)
	}
	opts := append([]pool.Option{
		pool.WithExits(storetest.Exits("x", cfg.exits)...),
		pool.WithClock(m.clock),
		pool.WithIdleTTL(1000 * time.Hour),
	}, cfg.opts...)
	if cfg.limits != nil {
		opts = append(opts, cfg.limits(st))
	}
	p, err := store.NewPool(st, opts...)
	if err != nil {
		st.Close()
		t.Fatalf("NewPool: %v", err)
	}
	tr, err := transport.New(p, transport.WithBase(m.base))
	if err != nil {
		st.Close()
		t.Fatalf("transport.New: %v", err)
	}
	m.st, m.p, m.tr = st, p, tr
	t.Cleanup(m.close)
	return m
}

func (m *member) close() {
	m.tr.Close()
	m.p.Close()
	m.st.Close()
}

func (m *member) pool() *pool.Pool { return m.p }

// healthLog returns the health changes OnHealth reported.
func (m *member) healthLog() []redisstore.Health {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]redisstore.Health(nil), m.health...)
}

// waitHealthy waits until the member's store has synced with the fleet.
func (m *member) waitHealthy(t testing.TB) {
	t.Helper()
	if _, ok := storetest.Eventually(10*time.Second, func() bool { return !m.st.Health().Degraded }); !ok {
		t.Fatalf("member %s never became healthy: %+v", m.name, m.st.Health())
	}
}

// drive sends requests to rawURL through m until cond holds (at most driveRequests).
func (m *member) drive(t testing.TB, rawURL string, cond func() bool) {
	t.Helper()
	for i := 0; i < driveRequests && !cond(); i++ {
		storetest.Get(context.Background(), m.tr, rawURL)
	}
	if !cond() {
		t.Fatalf("member %s: condition not reached after %d requests", m.name, driveRequests)
	}
}

// driveRequests bounds drive. A pick draws an exit at random, but on a loaded machine the pool
// may judge a pair slow (latency.go) and send it only a trickle while other exits are ready:
// 200 requests once missed the exit a failover test meant to trip, under a full `make test`.
const driveRequests = 1000

// discard reads and closes a body.
func discard(r io.ReadCloser) {
	io.Copy(io.Discard, r)
	r.Close()
}
