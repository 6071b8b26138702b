package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/store"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestRecord(t *testing.T) {
	x1 := pool.MustParseExit("http://127.0.0.1:9").WithLabel("x1")
	tests := []struct {
		c    pool.StateChange
		want pool.SavedBreaker
		keep bool
	}{
		{ // a trip: OPEN with its window, trips and level
			pool.StateChange{Scope: pool.ScopePair, Exit: x1, Origin: "a.example", Transition: breaker.Transition{
				From: breaker.Closed, To: breaker.Open, At: at(0), Cause: breaker.CauseRetryAfter, Reason: "rate_limited",
				NextProbe: at(60), Level: 1, Trips: 1}},
			pool.SavedBreaker{Scope: pool.ScopePair, Exit: "x1", Origin: "a.example", Saved: breaker.Saved{
				State: breaker.Open, Level: 1, Trips: 1, NextProbe: at(60), LastFailure: "rate_limited", Changed: at(0)}},
			true,
		},
		{ // a park of an exit
			pool.StateChange{Scope: pool.ScopeExit, Exit: x1, Transition: breaker.Transition{
				From: breaker.Closed, To: breaker.Open, At: at(1), Cause: breaker.CausePermanent, Reason: "proxy_auth",
				NextProbe: at(900), Trips: 1, Parked: true}},
			pool.SavedBreaker{Scope: pool.ScopeExit, Exit: "x1", Saved: breaker.Saved{
				State: breaker.Open, Parked: true, Trips: 1, NextProbe: at(900), LastFailure: "proxy_auth", Changed: at(1)}},
			true,
		},
		{ // a probe closed it: CLOSED, closed at that instant, the level kept for its decay
			pool.StateChange{Scope: pool.ScopeOrigin, Origin: "a.example", Transition: breaker.Transition{
				From: breaker.HalfOpen, To: breaker.Closed, At: at(70), Cause: breaker.CauseProbeOK, Level: 1, Trips: 1}},
			pool.SavedBreaker{Scope: pool.ScopeOrigin, Origin: "a.example", Saved: breaker.Saved{
				State: breaker.Closed, Level: 1, Trips: 1, ClosedAt: at(70), Changed: at(70)}},
			true,
		},
		{ // news from elsewhere is not recorded again
			pool.StateChange{Scope: pool.ScopePair, Exit: x1, Origin: "a.example", Transition: breaker.Transition{
				From: breaker.Closed, To: breaker.Open, At: at(5), Cause: breaker.CauseRestored, NextProbe: at(60)}},
			pool.SavedBreaker{}, false,
		},
		{ // nor the start of probing
			pool.StateChange{Scope: pool.ScopePair, Exit: x1, Origin: "a.example", Transition: breaker.Transition{
				From: breaker.Open, To: breaker.HalfOpen, At: at(60), Cause: breaker.CauseCooldown}},
			pool.SavedBreaker{}, false,
		},
	}
	for i, tt := range tests {
		got, keep := store.Record(tt.c)
		if keep != tt.keep || got != tt.want {
			t.Errorf("step %d: Record(%+v) = %+v, %t; want %+v, %t", i, tt.c, got, keep, tt.want, tt.keep)
		}
	}
}

// claimer is a Store that also claims probes, and remembers the pool it was bound to and how many
// exits that pool had by then.
type claimer struct {
	pool.NopObserver
	bound      *pool.Pool
	boundExits int
	bindErr    error
}

func (c *claimer) Bind(p *pool.Pool) (func(), error) {
	if c.bindErr != nil {
		return nil, c.bindErr
	}
	c.bound, c.boundExits = p, len(p.Exits())
	return func() {}, nil
}
func (c *claimer) Close() error { return nil }
func (c *claimer) ClaimProbe(time.Time, pool.ProbeTarget, time.Duration) bool {
	return true
}

// plainStore is a Store that claims nothing.
type plainStore struct{ pool.NopObserver }

func (plainStore) Bind(*pool.Pool) (func(), error) { return func() {}, nil }
func (plainStore) Close() error                    { return nil }

func TestNewPoolBinds(t *testing.T) {
	c := &claimer{}
	if n := len(store.Options(c)); n != 1 {
		t.Errorf("Options(a claimer) = %d options, want the claimer", n)
	}
	if n := len(store.Options(plainStore{})); n != 0 {
		t.Errorf("Options(a store that claims nothing) = %d options, want none", n)
	}
	p, err := store.NewPool(c, pool.WithExits(pool.MustParseExit("http://127.0.0.1:9")))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if c.bound != p || c.boundExits != 1 {
		t.Errorf("NewPool bound the store to %p with %d exits, want %p with 1: the store restores into the pool's exits",
			c.bound, c.boundExits, p)
	}
	if _, err := store.NewPool(nil); err == nil {
		t.Error("NewPool(nil) = nil error")
	}
	bad := &claimer{bindErr: errors.New("no file")}
	if _, err := store.NewPool(bad); err == nil || !strings.Contains(err.Error(), "no file") {
		t.Errorf("NewPool(a store that cannot bind) = %v, want its error", err)
	}
}
