package pool_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

var churnT0 = time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)

// churnProbes counts, per (exit label, origin), the probe leases out right now — leases whose
// LeaseInfo.Probe is set — and remembers the first time two were out at once. A holder counts its
// lease out before it reports or releases it, so the count never runs ahead of the pool's own.
type churnProbes struct {
	out        sync.Map // "label\x00origin" → *atomic.Int32
	taken      atomic.Int64
	violations atomic.Int64
	mu         sync.Mutex
	first      string
	holders    map[string][]*pool.Exit // the *Exit of each probe lease out, per key, to tell cases apart
	sameExit   int64                   // violations where two leases share one *Exit (no churn involved)
}

func (c *churnProbes) key(info pool.LeaseInfo) string {
	return info.Exit.Label() + "\x00" + info.Origin
}

// in records that a probe lease for info's pair went out.
func (c *churnProbes) in(info pool.LeaseInfo, how string) {
	k := c.key(info)
	v, _ := c.out.LoadOrStore(k, new(atomic.Int32))
	c.taken.Add(1)
	n := v.(*atomic.Int32).Add(1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.holders == nil {
		c.holders = map[string][]*pool.Exit{}
	}
	others := c.holders[k]
	c.holders[k] = append(others, info.Exit)
	if n <= 1 {
		return
	}
	c.violations.Add(1)
	same := false
	for _, e := range others {
		same = same || e == info.Exit
	}
	if same {
		c.sameExit++
	}
	if c.first == "" {
		c.first = fmt.Sprintf("%d probe leases out at once for exit %q, origin %q (the last by %s, pair %v, exit %v; on the same *Exit as another: %v)",
			n, info.Exit.Label(), info.Origin, how, info.PairState, info.ExitState, same)
	}
}

// back records that a probe lease for info's pair is about to be reported or released.
func (c *churnProbes) back(info pool.LeaseInfo) {
	k := c.key(info)
	c.mu.Lock()
	hs := c.holders[k]
	for i, e := range hs {
		if e == info.Exit {
			c.holders[k] = append(hs[:i:i], hs[i+1:]...)
			break
		}
	}
	c.mu.Unlock()
	v, _ := c.out.Load(k)
	v.(*atomic.Int32).Add(-1)
}

// churnConfig is one run of TestChurnAtMostOneProbePerPair.
type churnConfig struct {
	exits, origins, workers, rounds int
	hold                            bool // some probe leases are held across exit removals
	// retune: instead of removing and re-adding exits, the churner Syncs the list with new
	// breaker settings for one exit at a time, which remakes its breakers (retune.go).
	retune bool
}

// churnRun drives a pool from cfg.workers goroutines — picks through Pick and through DueProbes
// with Request.Exit, failures that trip pair and exit breakers, successes that close them — while
// one goroutine moves the fake clock and removes exits and adds new *Exit values under the same
// labels. It returns what the probe tracker saw and the pool, closed.
func churnRun(t *testing.T, cfg churnConfig, seed uint64) (*churnProbes, *pool.Pool, int64) {
	t.Helper()
	clk := clock.NewFake(churnT0)
	// Probe leases far longer than the run's fake time: an expired probe lease counts as a failed
	// probe and frees the slot by design, which is not what is under test here.
	pairS := breaker.Settings{FailureThreshold: 2, Window: 10 * time.Second, BaseCooldown: time.Second,
		MaxCooldown: 4 * time.Second, ProbeLease: 24 * time.Hour}
	exitS := pool.DefaultExitSettings()
	exitS.FailureThreshold, exitS.BaseCooldown, exitS.MaxCooldown, exitS.ParkFor = 3, time.Second, 4*time.Second, 3*time.Second
	exitS.ProbeLease = 24 * time.Hour
	label := func(i int) string { return fmt.Sprintf("e%d", i) }
	// Every re-add is a new *Exit for the same proxy; gen only counts them.
	addr := func(i int, gen int64) *pool.Exit {
		_ = gen
		return pool.MustParseExit(fmt.Sprintf("10.0.%d.1:3128", i)).WithLabel(label(i))
	}
	// tuned is exit i with pair and exit cooldowns of 0.5 s or 1 s, as n is even or odd.
	tuned := func(i int, n int64) *pool.Exit {
		d := time.Duration(1+n%2) * 500 * time.Millisecond
		return addr(i, 0).WithPairSettings(breaker.Settings{BaseCooldown: d}).WithExitSettings(breaker.Settings{BaseCooldown: d})
	}
	var exits []*pool.Exit
	for i := range cfg.exits {
		if cfg.retune {
			exits = append(exits, tuned(i, 0))
		} else {
			exits = append(exits, addr(i, 0))
		}
	}
	p, err := pool.New(pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(seed),
		pool.WithPairSettings(pairS), pool.WithExitSettings(exitS),
		pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	probes := &churnProbes{}
	var (
		wg      sync.WaitGroup
		done    atomic.Int32 // workers finished
		cycles  atomic.Int64 // removals and re-adds so far
		stopped atomic.Bool  // the churner has ended
	)
	verdicts := []pool.Verdict{
		{Outcome: pool.Success, Class: pool.ClassOK},
		{Outcome: pool.Success, Class: pool.ClassOK},
		{Outcome: pool.Transient, Class: pool.ClassRateLimited},
		{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true},
		{Outcome: pool.Transient, Class: pool.ClassConnection},
		{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth},
		{Outcome: pool.Neutral, Class: pool.ClassCanceled},
	}
	ctx := context.Background()
	for w := range cfg.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done.Add(1)
			r := rand.New(rand.NewPCG(seed, uint64(w)))
			for range cfg.rounds {
				origin := fmt.Sprintf("o%d", r.IntN(cfg.origins))
				req := pool.Request{Origin: origin}
				how := "Pick"
				if r.IntN(8) == 0 {
					// A reheat loop's probe: pinned to a due breaker's exit.
					if due := p.DueProbes(clk.Now()); len(due) > 0 {
						d := due[r.IntN(len(due))]
						if d.Exit != nil {
							req.Exit = d.Exit.Label()
							how = "DueProbes + Request.Exit"
							if d.Origin != "" {
								req.Origin = d.Origin
							}
						}
					}
				}
				l, err := p.Pick(ctx, req)
				if err != nil {
					runtime.Gosched()
					continue
				}
				info := l.Info()
				if info.Probe {
					probes.in(info, how)
					if cfg.hold && r.IntN(4) == 0 {
						// Hold the probe across removals and re-adds, long enough (in fake time) for
						// the exit that takes the label to trip and cool down (or until the churner
						// ends).
						for c := cycles.Load(); cycles.Load() < c+8 && !stopped.Load(); {
							runtime.Gosched()
						}
					}
				}
				for range r.IntN(4) {
					runtime.Gosched()
				}
				if info.Probe {
					probes.back(info)
				}
				if r.IntN(16) == 0 {
					l.Release()
				} else {
					l.Report(verdicts[r.IntN(len(verdicts))])
				}
			}
		}()
	}

	// The churner: time passes in quarter seconds; now and then an exit leaves and a new *Exit
	// with its label comes back, at once or a step later.
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer stopped.Store(true)
		r := rand.New(rand.NewPCG(seed, 1<<40))
		var gen int64
		away := -1 // an exit removed and not yet back
		tunes := make([]int64, cfg.exits)
		for step := 0; done.Load() < int32(cfg.workers) && step < 200*cfg.rounds; step++ {
			clk.Advance(250 * time.Millisecond)
			if cfg.retune {
				if step%12 == 0 {
					// Every 3 s, one exit's pair and exit cooldowns flip between 0.5 s and 1 s. A
					// probe out across a retune holds its pair's next probe back by its (24 h) lease,
					// so retunes are rarer than removals: probes must go on.
					i := r.IntN(cfg.exits)
					tunes[i]++
					list := make([]*pool.Exit, cfg.exits)
					for j := range list {
						list[j] = tuned(j, tunes[j])
					}
					if res, err := p.Sync(list); err != nil || res.Updated != 1 {
						t.Errorf("Sync(retune %s) = %+v, %v; want 1 updated", label(i), res, err)
					}
					cycles.Add(1)
				}
				if step%30 == 0 {
					p.Sweep(clk.Now())
				}
				runtime.Gosched()
				continue
			}
			if away >= 0 {
				gen++
				if err := p.Add(addr(away, gen)); err != nil {
					t.Errorf("Add(%s) = %v", label(away), err)
				}
				away = -1
				cycles.Add(1)
			}
			if step%3 != 0 {
				runtime.Gosched()
				continue
			}
			i := r.IntN(cfg.exits)
			if err := p.Remove(label(i)); err != nil {
				t.Errorf("Remove(%s) = %v", label(i), err)
			}
			if r.IntN(2) == 0 {
				away = i
				continue
			}
			gen++
			if err := p.Add(addr(i, gen)); err != nil {
				t.Errorf("Add(%s) = %v", label(i), err)
			}
			cycles.Add(1)
			if step%30 == 0 {
				p.Sweep(clk.Now())
			}
		}
		if away >= 0 {
			gen++
			if err := p.Add(addr(away, gen)); err != nil {
				t.Errorf("Add(%s) = %v", label(away), err)
			}
		}
	}()
	wg.Wait()
	return probes, p, cycles.Load()
}

// TestChurnAtMostOneProbePerPair: while exits are removed and added again (new *Exit values for
// the same proxies) under the same labels,
// with breakers tripping on failures and reheating through probes (live picks and pinned reheat
// picks alike), no two probe leases are ever out at once for one (exit label, origin): a pair is
// probed by one request at a time, whichever *Exit carries its label. Leases are all given back,
// and no goroutine outlives the pool.
//
// "hold-across-readd" keeps some probe leases out while their exit is removed and added again,
// the case where an old probe (on the removed exit) and a new one (on the exit that took its
// label) could overlap.
func TestChurnAtMostOneProbePerPair(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  churnConfig
	}{
		{"traffic", churnConfig{exits: 6, origins: 3, workers: 16, rounds: 1500}},
		{"hold-across-readd", churnConfig{exits: 4, origins: 2, workers: 16, rounds: 1500, hold: true}},
		{"retune", churnConfig{exits: 4, origins: 2, workers: 16, rounds: 1500, retune: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			probes, p, cycles := churnRun(t, tc.cfg, 42)
			if n := probes.violations.Load(); n > 0 {
				t.Errorf("%d times two probe leases were out at once for one (exit label, origin), %d of them on one *Exit; first: %s",
					n, probes.sameExit, probes.first)
			}
			if probes.taken.Load() == 0 || cycles == 0 {
				t.Errorf("the run took %d probe leases over %d removals and re-adds, want some of each", probes.taken.Load(), cycles)
			}
			probes.out.Range(func(k, v any) bool {
				if n := v.(*atomic.Int32).Load(); n != 0 {
					t.Errorf("probe leases still out for %q: %d, want 0", k, n)
				}
				return true
			})
			snap := p.Snapshot()
			if len(snap.Exits) != tc.cfg.exits {
				t.Errorf("pool ends with %d exits, want %d (every label back)", len(snap.Exits), tc.cfg.exits)
			}
			for _, e := range snap.Exits {
				if e.InFlight != 0 {
					t.Errorf("exit %s ends with %d leases in flight, want 0", e.Exit, e.InFlight)
				}
			}
			t.Logf("%d probe leases, %d removals and re-adds", probes.taken.Load(), cycles)
		})
	}
}

// TestReaddedExitProbesWhileOldProbeOut is the churn case on its own, step by step on one
// goroutine: the pair (x, o) is HALF_OPEN and a request holds its probe; x is removed and a new
// *Exit for the same proxy, labelled x, added; it comes back with its breakers, so no second probe
// lease for (x, o) is handed out until the first is given back, and the verdict of the first
// closes the pair the re-added exit uses. Another proxy under the label starts fresh.
func TestReaddedExitProbesWhileOldProbeOut(t *testing.T) {
	clk := clock.NewFake(churnT0)
	s := breaker.Settings{FailureThreshold: 1, BaseCooldown: 10 * time.Second, Jitter: -1, ProbeLease: time.Hour}
	x := pool.MustParseExit("10.0.0.1:3128").WithLabel("x")
	p, err := pool.New(pool.WithExits(x), pool.WithClock(clk), pool.WithSeed(7),
		pool.WithPairSettings(s), pool.WithExitSettings(s),
		pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx := context.Background()
	pick := func() (pool.Lease, error) { return p.Pick(ctx, pool.Request{Origin: "o"}) }
	fail := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited} // pair only

	// t0: (x, o) fails and trips; at t0+10s it is HALF_OPEN and the next pick is its probe.
	l, err := pick()
	if err != nil {
		t.Fatalf("t0: Pick = %v", err)
	}
	l.Report(fail)
	clk.Advance(10 * time.Second)
	old, err := pick()
	if err != nil || !old.Info().Probe {
		t.Fatalf("t0+10s: Pick = probe %v, %v; want the pair's probe", old.Info().Probe, err)
	}

	// The exit leaves and comes back; the probe taken before is still out.
	if err := p.Remove("x"); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(pool.MustParseExit("10.0.0.1:3128").WithLabel("x")); err != nil {
		t.Fatal(err)
	}
	if l, err := pick(); err == nil {
		t.Errorf("after re-add: Pick = a lease (probe %v) while the pair's only probe is out; want none", l.Info().Probe)
		l.Release()
	}
	clk.Advance(10 * time.Second)
	if l, err := pick(); err == nil {
		t.Errorf("t0+20s: Pick = a lease (probe %v) while the pair's only probe is still out; want none", l.Info().Probe)
		l.Release()
	}
	old.Report(pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK})
	l, err = pick()
	if err != nil || l.Info().Probe || l.Info().PairState != breaker.Closed {
		t.Fatalf("after the old probe's success: Pick = pair %v, probe %v, %v; want a CLOSED pair", l.Info().PairState, l.Info().Probe, err)
	}
	l.Report(fail) // trips again: threshold 1

	// Another proxy under the label is a different exit: fresh breakers.
	if err := p.Remove("x"); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(pool.MustParseExit("10.0.0.2:3128").WithLabel("x")); err != nil {
		t.Fatal(err)
	}
	l, err = pick()
	if err != nil || l.Info().PairState != breaker.Closed {
		t.Fatalf("another proxy under x: Pick = pair %v, %v; want a fresh CLOSED pair", l.Info().PairState, err)
	}
	l.Release()
}
