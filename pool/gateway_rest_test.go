package pool_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// A site that bans every IP a gateway has (rotate=on): after GatewayRestAfter fresh sessions in
// a row are banned at once, the site rests on the gateway with a growing backoff and is sent one
// probe per backoff window — at most K + 1 fresh sessions in any window as long as the shortest
// rest — while the gateway serves another site at every step; once the site serves again, the
// probe ends the rest. All on a fake clock.
func TestGatewaySiteThatBansEverySessionRests(t *testing.T) {
	p, clk, rec := gatewayPool(t, gwBase+" sessions=4", pool.WithSeed(7))
	const bans, other = "bans.example", "other.example"
	step := time.Second
	var attempts []time.Time // instants the banning site was sent a session
	end := gwT0.Add(2 * time.Hour)
	for now := gwT0; now.Before(end); now = now.Add(step) {
		clk.Set(now)
		l, err := p.Pick(context.Background(), pool.Request{Origin: bans})
		switch {
		case err == nil:
			attempts = append(attempts, now)
			l.Report(gwBlocked)
		case !errors.Is(err, pool.ErrNoHealthyExit):
			t.Fatalf("Pick(%s) at %v = %v, want a lease or ErrNoHealthyExit", bans, now.Sub(gwT0), err)
		}
		o, err := p.Pick(context.Background(), pool.Request{Origin: other})
		if err != nil {
			t.Fatalf("Pick(%s) at %v = %v: the gateway keeps serving other sites", other, now.Sub(gwT0), err)
		}
		o.Report(gwOK)
	}
	if len(attempts) <= pool.GatewayRestAfter {
		t.Fatalf("%d attempts in 2 h, want the first %d and then probes", len(attempts), pool.GatewayRestAfter)
	}
	shortest := time.Duration(float64(pool.GatewayRestBase) * (1 - pool.GatewayRestJitter))
	for i := range attempts {
		n := 0
		for j := i; j < len(attempts) && attempts[j].Sub(attempts[i]) < shortest; j++ {
			n++
		}
		if n > pool.GatewayRestAfter+1 {
			t.Fatalf("%d sessions sent to %s within %v from %v, want at most K+1 = %d", n, bans, shortest, attempts[i].Sub(gwT0), pool.GatewayRestAfter+1)
		}
	}
	// The rests grow: each gap between probes at least the last one's backoff, before jitter.
	for i := pool.GatewayRestAfter; i < len(attempts); i++ {
		level := i - pool.GatewayRestAfter
		want := min(pool.GatewayRestBase<<min(level, 20), pool.GatewayRestMax)
		want = time.Duration(float64(want) * (1 - pool.GatewayRestJitter))
		if gap := attempts[i].Sub(attempts[i-1]); gap < want {
			t.Errorf("probe %d came %v after the attempt before, want at least %v", level+1, gap, want)
		}
	}
	// 2 h hold K, then probes at 30 s, 1 m, 2 m, ... 32 m, capped at 30 m: a handful, not 7,200.
	if len(attempts) > pool.GatewayRestAfter+12 {
		t.Errorf("%d attempts at the banning site in 2 h, want at most %d", len(attempts), pool.GatewayRestAfter+12)
	}
	t.Logf("%d attempts at %s in 2 h, %d rotations", len(attempts), bans, len(rec.list()))
	if got := len(rec.list()); got > len(attempts) {
		t.Errorf("%d rotations, want at most one per banned session (%d)", got, len(attempts))
	}
	s := p.Snapshot()
	if len(s.Gateways) != 1 || len(s.Gateways[0].Resting) != 1 || s.Gateways[0].Resting[0].Origin != bans {
		t.Fatalf("Snapshot.Gateways = %+v, want %s resting", s.Gateways, bans)
	}

	// The site serves again: the next probe is served and the rest ends.
	until := s.Gateways[0].Resting[0].Until
	clk.Set(until)
	l, err := p.Pick(context.Background(), pool.Request{Origin: bans})
	if err != nil {
		t.Fatalf("Pick(%s) when the rest ends = %v, want the probe", bans, err)
	}
	l.Report(gwOK)
	for i := range 5 {
		l, err := p.Pick(context.Background(), pool.Request{Origin: bans})
		if err != nil {
			t.Fatalf("Pick %d after the probe was served = %v, want the site served again", i, err)
		}
		l.Report(gwOK)
	}
	if r := p.Snapshot().Gateways[0].Resting; len(r) != 0 {
		t.Errorf("Resting = %+v after a served probe, want none", r)
	}
}

// The run counts fresh sessions banned at once and in a row: a served answer in between starts
// it again, and a ban of a session the site had served before counts nothing.
func TestGatewaySiteRestNeedsARunOfFreshBans(t *testing.T) {
	p, _, _ := gatewayPool(t, gwBase+" sessions=4", pool.WithSeed(7))
	const site = "shop.example"
	pickReport := func(v pool.Verdict) {
		t.Helper()
		l, err := p.Pick(context.Background(), pool.Request{Origin: site})
		if err != nil {
			t.Fatalf("Pick = %v, want a session: no rest", err)
		}
		l.Report(v)
	}
	for range 3 {
		for range pool.GatewayRestAfter - 1 {
			pickReport(gwBlocked) // a fresh session banned at once
		}
		pickReport(gwOK) // a session served: the run ends
		pickReport(gwOK) // the served session's next request
	}
	// Sessions the site has served, banned now: no run (each has answered before).
	for _, e := range p.Exits() {
		send(t, p, e.Label(), site, gwOK)
	}
	for _, e := range p.Exits() {
		send(t, p, e.Label(), site, gwBlocked)
	}
	if r := p.Snapshot().Gateways[0].Resting; len(r) != 0 {
		t.Errorf("Resting = %+v, want none: no %d fresh sessions were banned in a row", r, pool.GatewayRestAfter)
	}
	pickReport(gwOK)
}

// Many workers at once against a site that bans every session, and another that serves: under
// the race detector nothing deadlocks or races, the gateway serves the other site at every try,
// and the banning site gets a few sessions — the run of K (and those already in flight when it
// ended, one per worker at most) and a probe per rest — not one per try.
func TestGatewaySiteRestStress(t *testing.T) {
	p, clk, _ := gatewayPool(t, gwBase+" sessions=8", pool.WithSeed(3))
	const workers, tries = 8, 200
	var mu sync.Mutex
	banned := 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range tries {
				if w == 0 && i%10 == 0 {
					clk.Advance(time.Second)
				}
				if l, err := p.Pick(context.Background(), pool.Request{Origin: "bans.example"}); err == nil {
					mu.Lock()
					banned++
					mu.Unlock()
					l.Report(gwBlocked)
				}
				l, err := p.Pick(context.Background(), pool.Request{Origin: "other.example"})
				if err != nil {
					t.Errorf("Pick(other.example) = %v: the gateway keeps serving other sites", err)
					return
				}
				l.Report(gwOK)
			}
		})
	}
	wg.Wait()
	// 20 s of fake time: the run, then one rest of 30 s (±25 %) that has not ended.
	if max := pool.GatewayRestAfter + workers + 2; banned > max {
		t.Errorf("banning site got %d sessions of %d tries, want at most %d", banned, workers*tries, max)
	}
	t.Logf("banning site got %d sessions of %d tries", banned, workers*tries)
}
