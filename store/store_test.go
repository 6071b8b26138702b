package store_test

import (
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/store"
	"github.com/proxybreaker/proxybreaker/transport"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestRecord(t *testing.T) {
	x1 := transport.MustParseExit("http://127.0.0.1:9").WithLabel("x1")
	tests := []struct {
		c    transport.StateChange
		want transport.SavedBreaker
		keep bool
	}{
		{ // a trip: OPEN with its window, trips and level
			transport.StateChange{Scope: transport.ScopePair, Exit: x1, Origin: "a.example", Transition: breaker.Transition{
				From: breaker.Closed, To: breaker.Open, At: at(0), Cause: breaker.CauseRetryAfter, Reason: "rate_limited",
				NextProbe: at(60), Level: 1, Trips: 1}},
			transport.SavedBreaker{Scope: transport.ScopePair, Exit: "x1", Origin: "a.example", Saved: breaker.Saved{
				State: breaker.Open, Level: 1, Trips: 1, NextProbe: at(60), LastFailure: "rate_limited", Changed: at(0)}},
			true,
		},
		{ // a park of an exit
			transport.StateChange{Scope: transport.ScopeExit, Exit: x1, Transition: breaker.Transition{
				From: breaker.Closed, To: breaker.Open, At: at(1), Cause: breaker.CausePermanent, Reason: "proxy_auth",
				NextProbe: at(900), Trips: 1, Parked: true}},
			transport.SavedBreaker{Scope: transport.ScopeExit, Exit: "x1", Saved: breaker.Saved{
				State: breaker.Open, Parked: true, Trips: 1, NextProbe: at(900), LastFailure: "proxy_auth", Changed: at(1)}},
			true,
		},
		{ // a probe closed it: CLOSED, closed at that instant, the level kept for its decay
			transport.StateChange{Scope: transport.ScopeOrigin, Origin: "a.example", Transition: breaker.Transition{
				From: breaker.HalfOpen, To: breaker.Closed, At: at(70), Cause: breaker.CauseProbeOK, Level: 1, Trips: 1}},
			transport.SavedBreaker{Scope: transport.ScopeOrigin, Origin: "a.example", Saved: breaker.Saved{
				State: breaker.Closed, Level: 1, Trips: 1, ClosedAt: at(70), Changed: at(70)}},
			true,
		},
		{ // news from elsewhere is not recorded again
			transport.StateChange{Scope: transport.ScopePair, Exit: x1, Origin: "a.example", Transition: breaker.Transition{
				From: breaker.Closed, To: breaker.Open, At: at(5), Cause: breaker.CauseRestored, NextProbe: at(60)}},
			transport.SavedBreaker{}, false,
		},
		{ // nor the start of probing
			transport.StateChange{Scope: transport.ScopePair, Exit: x1, Origin: "a.example", Transition: breaker.Transition{
				From: breaker.Open, To: breaker.HalfOpen, At: at(60), Cause: breaker.CauseCooldown}},
			transport.SavedBreaker{}, false,
		},
	}
	for i, tt := range tests {
		got, keep := store.Record(tt.c)
		if keep != tt.keep || got != tt.want {
			t.Errorf("step %d: Record(%+v) = %+v, %t; want %+v, %t", i, tt.c, got, keep, tt.want, tt.keep)
		}
	}
}

// claimer is a Store that also claims probes.
type claimer struct {
	transport.NopObserver
	attached *transport.Pool
}

func (c *claimer) Attach(p *transport.Pool) error { c.attached = p; return nil }
func (c *claimer) Close() error                   { return nil }
func (c *claimer) ClaimProbe(time.Time, transport.ProbeTarget, time.Duration) bool {
	return true
}

func TestNewTransportAttaches(t *testing.T) {
	c := &claimer{}
	if n := len(store.Options(c)); n != 2 {
		t.Errorf("Options(a claimer) = %d options, want the observer and the claimer", n)
	}
	tr, err := store.NewTransport(c, transport.WithExits(transport.MustParseExit("http://127.0.0.1:9")))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if c.attached != tr.Pool() {
		t.Error("NewTransport did not attach the store to the transport's pool")
	}
	if _, err := store.NewTransport(nil); err == nil {
		t.Error("NewTransport(nil) = nil error")
	}
}
