package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"github.com/proxybreaker/proxybreaker/store"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Scaled down so that windows end within the example; the library's base cooldown is 20 s.
const (
	baseCooldown = time.Second
	exitBudget   = 100 // requests a second per exit, for the whole fleet
	exitBurst    = 20
)

// printer writes lines with the time since the start; safe for concurrent use.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (p *printer) say(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.start.IsZero() {
		p.start = time.Now()
	}
	fmt.Fprintf(p.w, "%6.2fs  %s\n", time.Since(p.start).Seconds(), fmt.Sprintf(format, args...))
}

// member is one process of the fleet.
type member struct {
	name   string
	client *goredis.Client
	st     *redisstore.Store
	pool   *pool.Pool
	tr     *transport.Transport
	http   *http.Client
	closed atomic.Int64 // when the shop pair through res-2 last closed (Unix ns)
}

type fleet struct {
	w       *shop
	p       *printer
	members []*member
}

func newFleet(addr string, w *shop, p *printer) (*fleet, error) {
	var suffix [4]byte
	rand.Read(suffix[:])
	ns := "fleet-example-" + hex.EncodeToString(suffix[:]) // its own keys, even on a shared Redis
	f := &fleet{w: w, p: p}
	for _, name := range []string{"a", "b"} {
		m, err := f.newMember(name, addr, ns)
		if err != nil {
			f.close()
			return nil, err
		}
		f.members = append(f.members, m)
	}
	for _, m := range f.members {
		deadline := time.Now().Add(5 * time.Second)
		for m.st.Health().Degraded {
			if time.Now().After(deadline) {
				f.close()
				return nil, fmt.Errorf("member %s: Redis at %s: %v", m.name, addr, m.st.Health().Err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	p.say("members a and b share namespace %q; each has exits %v", ns, exitNames)
	return f, nil
}

func (f *fleet) newMember(name, addr, ns string) (*member, error) {
	m := &member{name: name}
	m.client = goredis.NewClient(&goredis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	synced := false // OnHealth's calls never overlap
	st, err := redisstore.New(m.client, redisstore.Settings{
		Namespace: ns, Member: name,
		HealthInterval: 100 * time.Millisecond,
		Logger:         slog.New(slog.DiscardHandler),
		OnHealth: func(h redisstore.Health) {
			switch {
			case h.Degraded:
				f.p.say("member %s: degraded, serving on local state (%v)", name, h.Err)
			case synced: // not the first sync, which every start reports
				f.p.say("member %s: in step with the fleet again", name)
			}
			synced = synced || !h.Degraded
		},
	})
	if err != nil {
		m.client.Close()
		return nil, err
	}
	m.st = st
	// The store claims probes (an option of the pool) and observes the pool once it has its exits
	// (store.NewPool binds it, restoring the fleet's state before the first request).
	m.pool, err = store.NewPool(st,
		pool.WithExits(f.w.Exits...),
		pool.WithPairSettings(breaker.Settings{BaseCooldown: baseCooldown}),
		pool.WithRateLimits(ratelimit.Limits{
			PerExit:    ratelimit.PerSecond(exitBudget, exitBurst),
			ExitSource: st.ExitSource, // the per-exit budget is the fleet's, leased from Redis
		}),
		pool.WithObserver(closeWatch{m: m, origin: f.w.shopHost()}),
	)
	if err == nil {
		m.tr, err = transport.New(m.pool)
	}
	if err != nil {
		if m.pool != nil {
			m.pool.Close()
		}
		st.Close()
		m.client.Close()
		return nil, err
	}
	m.http = &http.Client{Transport: m.tr, Timeout: 10 * time.Second}
	return m, nil
}

// closeWatch records when the shop's pair through res-2 closes on a member.
type closeWatch struct {
	pool.NopObserver
	m      *member
	origin string
}

func (c closeWatch) StateChanged(sc pool.StateChange) {
	if sc.Scope == pool.ScopePair && sc.Origin == c.origin && sc.Exit.Label() == bannedExit && sc.To == breaker.Closed {
		c.m.closed.Store(sc.At.UnixNano())
	}
}

func (f *fleet) close() {
	for _, m := range f.members {
		m.tr.Close()
		m.pool.Close()
		m.st.Close()
		m.client.Close()
	}
}

// get sends one request to the shop through m and reports the exit that carried it.
func (f *fleet) get(ctx context.Context, m *member) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.w.shopURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := m.http.Do(req)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return transport.ExitFromResponse(resp).Label(), nil
}

// until sends requests through m until cond holds, at most 200.
func (f *fleet) until(ctx context.Context, m *member, cond func() bool) error {
	for i := 0; i < 200 && !cond(); i++ {
		if _, err := f.get(ctx, m); err != nil && ctx.Err() != nil {
			return err
		}
	}
	if !cond() {
		return errors.New("the expected breaker state never came")
	}
	return nil
}

// wait polls cond for up to 5 s and returns how long it took.
func wait(cond func() bool) (time.Duration, error) {
	start := time.Now()
	for !cond() {
		if time.Since(start) > 5*time.Second {
			return 0, errors.New("timed out")
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start), nil
}

func pairOf(m *member, exit, origin string) breaker.Snapshot {
	for _, ps := range m.pool.Snapshot().Pairs {
		if ps.Exit == exit && ps.Origin == origin {
			return ps.Breaker
		}
	}
	return breaker.Snapshot{}
}

func exitOf(m *member, exit string) breaker.Snapshot {
	for _, es := range m.pool.Snapshot().Exits {
		if es.Exit == exit {
			return es.Breaker
		}
	}
	return breaker.Snapshot{}
}
