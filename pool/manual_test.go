package pool_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// overrideLog records the overrides the pool's observers hear of.
type overrideLog struct {
	pool.NopObserver
	mu  sync.Mutex
	got []string
}

func (l *overrideLog) StateChanged(c pool.StateChange) {
	if c.Cause != breaker.CauseOverride {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got = append(l.got, c.Scope.String()+" "+c.Exit.Label()+" "+c.Origin+" → "+c.To.String())
}

func (l *overrideLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.got
	l.got = nil
	return out
}

// TestBanAndRelease: a pair banned by hand takes no request for its origin until released, while
// its exit serves other origins; an exit banned for every origin takes none at all; the
// observers hear of each override (CauseOverride); bad calls are errors naming what is wrong.
func TestBanAndRelease(t *testing.T) {
	p, clk := newLatencyPool(t, 2)
	log := &overrideLog{}
	p.Observe(log)
	if err := p.Ban("e0", "shop.test", time.Hour, "provider notice"); err != nil {
		t.Fatal(err)
	}
	if got := shares(t, p, "shop.test", 200); got["e0"] != 0 {
		t.Errorf("shop.test with e0 banned for it: %v, want none on e0", got)
	}
	if got := shares(t, p, "news.test", 200); got["e0"] == 0 {
		t.Errorf("news.test with e0 banned for shop.test only: %v, want some on e0", got)
	}
	if ps, _ := pairOf(t, p, "shop.test"); ps.Breaker.LastFailure != "provider notice" || !ps.Breaker.Parked {
		t.Errorf("the banned pair's snapshot: %+v, want parked with the ban's reason", ps.Breaker)
	}
	clk.Advance(time.Minute)
	if err := p.Release("e0", "shop.test"); err != nil {
		t.Fatal(err)
	}
	if got := shares(t, p, "shop.test", 200); got["e0"] == 0 {
		t.Errorf("shop.test after e0 was released: %v, want some on e0", got)
	}
	if err := p.Ban("e1", "", 10*time.Minute, ""); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"shop.test", "news.test"} {
		if got := shares(t, p, o, 100); got["e1"] != 0 {
			t.Errorf("%s with e1 banned for every origin: %v, want none on e1", o, got)
		}
	}
	want := []string{"pair e0 shop.test → open", "pair e0 shop.test → closed", "exit e1  → open"}
	if got := log.take(); strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("overrides observed: %q, want %q", got, want)
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{p.Ban("nope", "shop.test", time.Minute, ""), `no exit labelled "nope"`},
		{p.Ban("e0", "shop.test", 0, ""), "duration 0s must be positive"},
		{p.Ban("e0", "shop.test", time.Minute, "bad\nreason"), "want printable characters"},
		{p.Release("nope", ""), `no exit labelled "nope"`},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("error %v, want one containing %q", c.err, c.want)
		}
	}
}

// TestCapacity: usable exits follow the breakers (a ban takes one out), a slow exit is counted,
// and without a learned window the rate is unknown (0), never unlimited.
func TestCapacity(t *testing.T) {
	p, clk := newLatencyPool(t, 4)
	for i := range 4 {
		d := 10 * time.Millisecond
		if i == 3 {
			d = 2 * time.Second
		}
		for range 20 {
			answer(t, p, clk, "shop.test", fmt.Sprintf("e%d", i), d)
		}
	}
	if err := p.Ban("e0", "shop.test", time.Hour, ""); err != nil {
		t.Fatal(err)
	}
	c := p.Capacity("shop.test")
	if c.Exits != 4 || c.Usable != 3 || c.Slow != 1 || c.PerExit != 0 || c.Rate != 0 || c.ExitsFor(10) != 0 {
		t.Errorf("Capacity = %+v, want 4 exits, 3 usable, 1 slow, no learned rate", c)
	}
	if c.Latency < 5*time.Millisecond || c.Latency > 50*time.Millisecond {
		t.Errorf("Capacity.Latency = %v, want the typical 10 ms", c.Latency)
	}
	if n := (pool.Capacity{PerExit: 0.2}).ExitsFor(1); n != 5 {
		t.Errorf("ExitsFor(1/s) at 0.2/s per exit = %d, want 5", n)
	}
}
