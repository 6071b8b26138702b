package breaker

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStressProbeSlots shares one breaker among many goroutines that drive a shared clock forward
// by small random steps and give random verdicts, some only after holding the permit a while, some
// never. Run it with -race.
//
// What it checks, soundly under any interleaving:
//
//   - every Snapshot shows 0 <= ProbesInFlight <= HalfOpenProbes;
//   - no probe was handed out while HalfOpenProbes were live. Within one generation a probe slot is
//     freed only by Success, Neutral or Release (a failure, an expired lease or the closing success
//     all change the generation), so the breaker may issue at most HalfOpenProbes + freed probes in
//     a generation. A goroutine counts a probe only after Acquire returned it (never early) and
//     counts a freeing verdict before making the call (never late), so issued > HalfOpenProbes +
//     freed seen here means the breaker overbooked. A plain "probes out" counter would not do: an
//     abandoned probe's lease expires inside the breaker, unseen by the test;
//   - at the end, far past every lease and cooldown, no slot has leaked: ProbesInFlight is 0 and
//     Acquire admits probes until the breaker closes.
func TestStressProbeSlots(t *testing.T) {
	const (
		goroutines = 16
		iterations = 250
		probes     = 2
		maxStep    = 40 * time.Millisecond
	)
	s := Settings{
		FailureThreshold: 3,
		Window:           5 * time.Second,
		BaseCooldown:     500 * time.Millisecond,
		MaxCooldown:      4 * time.Second,
		ParkFor:          3 * time.Second,
		MaxRetryAfter:    2 * time.Second,
		StablePeriod:     3 * time.Second,
		HalfOpenProbes:   probes,
		SuccessesToClose: 2,
		ProbeLease:       time.Second,
	}
	var transitions atomic.Int64
	b, err := New(s, func(Transition) { transitions.Add(1) })
	if err != nil {
		t.Fatal(err)
	}

	var (
		clock   atomic.Int64 // nanoseconds after t0
		mu      sync.Mutex
		perGen  = map[uint64]*struct{ issued, freed int }{}
		issued  atomic.Int64
		full    atomic.Int64 // generations that had every probe slot taken at once
		failed  atomic.Bool
		seed    = uint64(time.Now().UnixNano())
		errorf  = func(format string, args ...any) { failed.Store(true); t.Errorf(format, args...) }
		counted = func(g uint64) *struct{ issued, freed int } {
			c := perGen[g]
			if c == nil {
				c = &struct{ issued, freed int }{}
				perGen[g] = c
			}
			return c
		}
	)
	t.Logf("seed %d", seed)

	var wg sync.WaitGroup
	start := make(chan struct{}) // released together, so the goroutines overlap
	for g := range goroutines {
		wg.Go(func() {
			<-start
			rng := rand.New(rand.NewPCG(seed, uint64(g)))
			tick := func() time.Time { return t0.Add(time.Duration(clock.Add(rng.Int64N(int64(maxStep))))) }
			var held []Permit
			// freeing is called before every verdict that frees a probe slot without changing the
			// generation: Success, Neutral, Release.
			freeing := func(pm Permit) {
				if pm.Probe() {
					mu.Lock()
					counted(pm.Generation()).freed++
					mu.Unlock()
				}
			}
			verdict := func(pm Permit, now time.Time) {
				n := rng.IntN(100)
				if n < 35 || (n >= 63 && n < 93) {
					freeing(pm)
				}
				switch {
				case n < 35:
					pm.Success(now)
				case n < 55:
					pm.Failure(now, Failure{Soft: rng.IntN(3) == 0, Reason: "timeout"})
				case n < 60:
					pm.Failure(now, Failure{RetryAfter: time.Duration(rng.Int64N(int64(3 * time.Second))), Reason: "rate_limited"})
				case n < 63:
					pm.Failure(now, Failure{Permanent: true, Reason: "auth"})
				case n < 78:
					pm.Neutral(now)
				case n < 93:
					pm.Release(now)
				default:
					// Abandoned: no verdict ever; a probe's lease must free its slot.
				}
			}
			for range iterations {
				if failed.Load() {
					return
				}
				now := tick()
				if sn := b.Snapshot(now); sn.ProbesInFlight < 0 || sn.ProbesInFlight > probes {
					errorf("Snapshot(t0+%v).ProbesInFlight = %d, want in [0, %d]", now.Sub(t0), sn.ProbesInFlight, probes)
				}
				b.Ready(now)
				if len(held) > 0 && (len(held) >= 3 || rng.IntN(2) == 0) {
					i := rng.IntN(len(held))
					pm := held[i]
					held = append(held[:i], held[i+1:]...)
					verdict(pm, now)
					continue
				}
				var lease time.Duration
				if rng.IntN(4) == 0 {
					lease = time.Duration(rng.Int64N(int64(2 * time.Second)))
				}
				pm, ok := b.AcquireLease(now, lease)
				if !ok {
					continue
				}
				if pm.Probe() {
					issued.Add(1)
					mu.Lock()
					c := counted(pm.Generation())
					c.issued++
					if c.issued > probes+c.freed {
						errorf("generation %d: %d probes issued with only %d slots freed; want at most %d+freed live", pm.Generation(), c.issued, c.freed, probes)
					}
					if c.issued == probes && c.freed == 0 {
						full.Add(1)
					}
					mu.Unlock()
				}
				held = append(held, pm)
			}
			for _, pm := range held {
				freeing(pm)
				pm.Release(tick())
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d transitions, %d probes issued, %d generations with every slot taken", transitions.Load(), issued.Load(), full.Load())
	if issued.Load() == 0 || transitions.Load() == 0 {
		t.Fatalf("%d transitions and %d probes: the stress never reached HALF_OPEN", transitions.Load(), issued.Load())
	}

	// Far past every lease and every OPEN window: nothing may still hold a slot.
	end := t0.Add(time.Duration(clock.Load()) + time.Hour)
	if sn := b.Snapshot(end); sn.ProbesInFlight != 0 || sn.State == Open {
		t.Fatalf("Snapshot(end) = %v with %d probes in flight, want not open and 0", sn.State, sn.ProbesInFlight)
	}
	for i := range s.SuccessesToClose + 1 {
		pm, ok := b.Acquire(end)
		if !ok {
			t.Fatalf("Acquire(end) = false, want true (attempt %d): a probe slot leaked", i)
		}
		if !pm.Probe() {
			break
		}
		pm.Success(end)
	}
	if sn := b.Snapshot(end); sn.State != Closed || sn.ProbesInFlight != 0 {
		t.Fatalf("Snapshot(end) = %v with %d probes in flight after %d successful probes, want closed and 0", sn.State, sn.ProbesInFlight, s.SuccessesToClose)
	}
}
