package breaker_test

import (
	"fmt"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// A breaker trips after three failures, admits one probe when its cooldown ends, and closes when the
// probe succeeds. Time is passed in, so the example runs on fixed instants.
func Example() {
	t0 := time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)
	since := func(t time.Time) time.Duration { return t.Sub(t0) }

	b, err := breaker.New(breaker.Settings{Jitter: -1}, func(tr breaker.Transition) {
		fmt.Printf("event: %s → %s (%s) at +%v", tr.From, tr.To, tr.Cause, since(tr.At))
		if tr.To == breaker.Open {
			fmt.Printf(", probing from +%v", since(tr.NextProbe))
		}
		fmt.Println()
	})
	if err != nil {
		panic(err)
	}

	for i := range 3 {
		now := t0.Add(time.Duration(i) * time.Second)
		p, _ := b.Acquire(now)
		p.Failure(now, breaker.Failure{Reason: "timeout"})
	}

	ok, retryAt := b.Ready(t0.Add(10 * time.Second))
	fmt.Printf("ready at +10s: %v, retry at +%v\n", ok, since(retryAt))

	probe, ok := b.Acquire(t0.Add(22 * time.Second))
	fmt.Printf("acquire at +22s: %v, probe: %v\n", ok, probe.Probe())
	if _, ok := b.Acquire(t0.Add(22 * time.Second)); !ok {
		fmt.Println("a second request waits: the probe slot is taken")
	}
	probe.Success(t0.Add(23 * time.Second))

	s := b.Snapshot(t0.Add(23 * time.Second))
	fmt.Printf("state %s, level %d, trips %d\n", s.State, s.Level, s.Trips)

	// Output:
	// event: closed → open (failures) at +2s, probing from +22s
	// ready at +10s: false, retry at +22s
	// event: open → half_open (cooldown) at +22s
	// acquire at +22s: true, probe: true
	// a second request waits: the probe slot is taken
	// event: half_open → closed (probe_ok) at +23s
	// state closed, level 1, trips 1
}

// Consecutive trips wait longer and longer, up to MaxCooldown.
func ExamplePolicy_Cooldown() {
	p, err := breaker.NewPolicy(breaker.Settings{})
	if err != nil {
		panic(err)
	}
	for level := 1; level <= p.MaxLevel()+1; level++ {
		fmt.Print(p.Cooldown(level), " ")
	}
	fmt.Println()
	// Output:
	// 20s 40s 1m20s 2m40s 5m20s 10m40s 15m0s 15m0s
}
