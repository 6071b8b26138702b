package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
)

// park: a 407 through bad-auth parks the exit on member a; member b has it parked at once.
func (f *fleet) park(ctx context.Context) error {
	a, b := f.members[0], f.members[1]
	f.p.say("1. member a sends requests; %s answers 407 (wrong password)", badExit)
	if err := f.until(ctx, a, func() bool { return exitOf(a, badExit).Parked }); err != nil {
		return fmt.Errorf("parking %s on a: %w", badExit, err)
	}
	took, err := wait(func() bool { return exitOf(b, badExit).Parked })
	if err != nil {
		return fmt.Errorf("member b never parked %s: %w", badExit, err)
	}
	f.p.say("   a parked %s until %s; b parked it too, %v later, without sending it a request",
		badExit, exitOf(a, badExit).NextProbe.Format("15:04:05"), took.Round(time.Microsecond))
	return nil
}

// trip: the shop's 429 trips (res-2, shop) on member a; member b opens it with the same window,
// and sends nothing through it.
func (f *fleet) trip(ctx context.Context) error {
	a, b := f.members[0], f.members[1]
	shop := f.w.shopHost()
	f.p.say("2. the shop answers 429 Retry-After: %d to anything through %s", retryAfter, bannedExit)
	if err := f.until(ctx, a, func() bool { return pairOf(a, bannedExit, shop).State == breaker.Open }); err != nil {
		return fmt.Errorf("tripping (%s, shop) on a: %w", bannedExit, err)
	}
	want := pairOf(a, bannedExit, shop)
	took, err := wait(func() bool {
		got := pairOf(b, bannedExit, shop)
		return got.State == breaker.Open && got.NextProbe.Equal(want.NextProbe)
	})
	if err != nil {
		return fmt.Errorf("member b never opened (%s, shop): %w", bannedExit, err)
	}
	f.p.say("   a opened (%s, shop) until %s; b opened it with the same window %v later",
		bannedExit, want.NextProbe.Format("15:04:05.000"), took.Round(time.Microsecond))
	used := map[string]int{}
	for range 20 {
		label, err := f.get(ctx, b)
		if err != nil {
			return err
		}
		used[label]++
	}
	var through []string
	for _, name := range exitNames {
		if used[name] > 0 {
			through = append(through, fmt.Sprintf("%s ×%d", name, used[name]))
		}
	}
	f.p.say("   b's next 20 requests went through %s: none through %s or %s",
		strings.Join(through, ", "), bannedExit, badExit)
	return nil
}

// probe: the shop forgives res-2; when the window ends both members carry traffic, the fleet
// sends one probe, and its success closes the pair on both.
func (f *fleet) probe(ctx context.Context) error {
	a, b := f.members[0], f.members[1]
	shop := f.w.shopHost()
	f.w.banned.Store(false)
	f.w.slow.Store(true) // a probe stays out 300 ms: plenty of time for a second one, if the fleet sent it
	defer f.w.slow.Store(false)
	due := pairOf(a, bannedExit, shop).NextProbe
	f.p.say("3. the shop forgives %s; at %s the window ends on both members, which keep sending", bannedExit, due.Format("15:04:05.000"))
	time.Sleep(time.Until(due))
	claimsBefore := [2]redisstore.Stats{a.st.Stats(), b.st.Stats()}
	var wg sync.WaitGroup
	var failed atomic.Int64
	var firstErr atomic.Value
	stopAt := time.Now().Add(time.Second)
	for _, m := range f.members {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Paced well under the fleet's budget: this step is about the probe, not the rate.
				tick := time.NewTicker(40 * time.Millisecond)
				defer tick.Stop()
				for time.Now().Before(stopAt) && pairOf(m, bannedExit, shop).State != breaker.Closed {
					if _, err := f.get(ctx, m); err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
					<-tick.C
				}
			}()
		}
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("%d requests failed while the fleet probed, first: %w", failed.Load(), err)
	}
	ca, cb := a.closed.Load(), b.closed.Load()
	if ca == 0 || cb == 0 {
		return fmt.Errorf("(%s, shop) did not close on both members: a %v, b %v", bannedExit,
			pairOf(a, bannedExit, shop).State, pairOf(b, bannedExit, shop).State)
	}
	won := "a"
	if b.st.Stats().Claims > claimsBefore[1].Claims {
		won = "b"
	}
	gap := time.Duration(max(ca, cb) - min(ca, cb))
	refused := a.st.Stats().ClaimsRefused - claimsBefore[0].ClaimsRefused + b.st.Stats().ClaimsRefused - claimsBefore[1].ClaimsRefused
	probes := f.w.arrivedBefore(time.Unix(0, min(ca, cb)))
	f.p.say("   member %s won the probe's claim; the other was refused %d time(s) and sent those requests elsewhere", won, refused)
	f.p.say("   the shop saw %d probe(s) through %s; its success closed the pair on both members, %v apart; no request failed",
		probes, bannedExit, gap.Round(time.Microsecond))
	return nil
}

// rate: both members send as fast as they can; each exit's budget holds for the fleet.
func (f *fleet) rate(ctx context.Context) error {
	const run = 2 * time.Second
	f.p.say("4. both members send as fast as they can for %v; every exit's budget is %d/s (burst %d) for the whole fleet",
		run, exitBudget, exitBurst)
	before := map[string]int{}
	for _, name := range exitNames {
		before[name] = f.w.served(name)
	}
	leases := f.members[0].st.Stats().Leases + f.members[1].st.Stats().Leases
	var wg sync.WaitGroup
	var ok [2]atomic.Int64
	start := time.Now()
	stopAt := start.Add(run)
	for i, m := range f.members {
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stopAt) {
					rctx, cancel := context.WithDeadline(ctx, stopAt)
					if _, err := f.get(rctx, m); err == nil {
						ok[i].Add(1)
					}
					cancel()
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	// Over a span T an exit carries at most rate × T + burst, plus what members leased just
	// before the span: at most one lease batch each (a tenth of a second's budget).
	batch := (exitBudget + 9) / 10
	bound := int(exitBudget*elapsed.Seconds()) + exitBurst + len(f.members)*batch
	f.p.say("   each exit may carry at most %d/s × %.2fs + burst %d + 2 members × a lease batch of %d = %d requests",
		exitBudget, elapsed.Seconds(), exitBurst, batch, bound)
	for _, name := range exitNames {
		if name == badExit {
			continue // parked since step 1
		}
		n := f.w.served(name) - before[name]
		f.p.say("   %-8s %4d requests (%.0f/s)", name, n, float64(n)/elapsed.Seconds())
	}
	leases = f.members[0].st.Stats().Leases + f.members[1].st.Stats().Leases - leases
	total := ok[0].Load() + ok[1].Load()
	f.p.say("   a sent %d requests and b %d; the two leased their tokens from Redis in %d round trips (%.0f per 1,000 requests)",
		ok[0].Load(), ok[1].Load(), leases, float64(leases)*1000/float64(max(total, 1)))
	return nil
}

// outage: Redis is killed while both members carry traffic; nothing fails; once it is back the
// members re-sync.
func (f *fleet) outage(ctx context.Context, srv *redisServer) error {
	a, b := f.members[0], f.members[1]
	f.p.say("5. redis-server is killed while both members send requests")
	var sent, failed atomic.Int64
	var slowest atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, m := range f.members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				start := time.Now()
				_, err := f.get(ctx, m)
				if d := int64(time.Since(start)); d > slowest.Load() {
					slowest.Store(d)
				}
				sent.Add(1)
				if err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	srv.Kill()
	if _, err := wait(func() bool { return a.st.Health().Degraded && b.st.Health().Degraded }); err != nil {
		close(stop)
		wg.Wait()
		return fmt.Errorf("the members did not notice the outage: %w", err)
	}
	time.Sleep(time.Second) // traffic during the outage
	if err := srv.Restart(); err != nil {
		close(stop)
		wg.Wait()
		return err
	}
	f.p.say("   redis-server restarted, empty, on %s", srv.Addr())
	took, err := wait(func() bool { return !a.st.Health().Degraded && !b.st.Health().Degraded })
	close(stop)
	wg.Wait()
	if err != nil {
		return fmt.Errorf("the members did not re-sync: %w", err)
	}
	f.p.say("   both re-synced %v after the restart; %d requests during the outage test, %d failed, the slowest took %v",
		took.Round(time.Millisecond), sent.Load(), failed.Load(), time.Duration(slowest.Load()).Round(time.Millisecond))
	return nil
}
