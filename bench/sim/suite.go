package sim

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// Job is one run: a strategy in a world.
type Job struct {
	Scenario Scenario
	Strategy Strategy
}

// RunAll runs jobs, up to parallel at a time, and returns their metrics in the jobs' order. Each
// run has its own clock, ground truth, pool and random sources, so its figures are those Run gives
// it alone, whatever runs beside it.
func RunAll(jobs []Job, parallel int) ([]Metrics, error) {
	ms := make([]Metrics, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(parallel, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				ms[i], errs[i] = Run(jobs[i].Scenario, jobs[i].Strategy)
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s seed %d: %w", jobs[i].Scenario.Name, jobs[i].Scenario.Seed, err)
		}
	}
	return ms, nil
}

// The round-1 figures of ours (defaults), in the round-1 world, that issue 13's targets are set
// against.
const (
	Round1Ours429    = 36127
	Round1OursWasted = 42254
	Round1Hours      = 3
)

// The issue-13 targets for ours (defaults).
const (
	TargetGoodput     = 0.90            // of the informed oracle's goodput (InformedOracle)
	TargetRecovery    = 2 * time.Minute // median recovery after a ban, at most
	Target429Share    = 1.0 / 3         // of round 1's 429s provoked, per simulated hour
	TargetWastedShare = 1.0 / 2         // of round 1's wasted attempts, per simulated hour
)

// Target is one of issue 13's targets, judged for one run of ours against the informed oracle's.
type Target struct {
	Name  string // what is measured and the bound: "goodput ≥ 0.90 of the informed oracle's"
	Short string // the same for a table's heading: "goodput ÷ informed oracle (≥ 0.90)"
	Got   string // the figure
	Met   bool
}

// Targets judges ours (defaults) in sc against issue 13's targets, oracle being the informed
// oracle's run in the same world (InformedOracle: the clairvoyant one is out of any strategy's
// reach). 429s and wasted attempts compare per simulated hour with round 1's (ours
// (defaults) in the round-1 world, 3 h): the round-2 world keeps the round-1 world's workers,
// exits and duration, so per hour is per run, and a shorter run is held to the same rate.
func Targets(sc Scenario, ours, oracle Metrics) []Target {
	h := sc.Duration.Hours()
	per := func(n int) float64 { return float64(n) / h }
	want429 := Target429Share * Round1Ours429 / Round1Hours
	wantWasted := TargetWastedShare * Round1OursWasted / Round1Hours
	g := 0.0
	if oracle.Successes > 0 {
		g = float64(ours.Successes) / float64(oracle.Successes)
	}
	med := ours.MedianRecovery()
	medGot := MedianRecoveryString(ours)
	return []Target{
		{fmt.Sprintf("goodput ≥ %.2f of the informed oracle's", TargetGoodput), fmt.Sprintf("goodput ÷ informed oracle (≥ %.2f)", TargetGoodput),
			fmt.Sprintf("%.2f", g), g >= TargetGoodput},
		{fmt.Sprintf("429s provoked ≤ ⅓ of round 1's (%d in 3 h): ≤ %.0f an hour", Round1Ours429, want429),
			fmt.Sprintf("429s an hour (≤ %.0f)", want429), fmt.Sprintf("%.0f/h", per(ours.RateLimited)), per(ours.RateLimited) <= want429},
		{fmt.Sprintf("wasted attempts ≤ ½ of round 1's (%d in 3 h): ≤ %.0f an hour", Round1OursWasted, wantWasted),
			fmt.Sprintf("wasted an hour (≤ %.0f)", wantWasted), fmt.Sprintf("%.0f/h", per(ours.Wasted())), per(ours.Wasted()) <= wantWasted},
		{fmt.Sprintf("median recovery after a ban ≤ %d min", TargetRecovery/time.Minute), fmt.Sprintf("median recovery (≤ %d min)", TargetRecovery/time.Minute),
			medGot, med >= 0 && med <= TargetRecovery},
		{"bans never recovered: 0", "never recovered (0)", UnrecoveredString(ours), ours.Unrecovered == 0},
	}
}

// MedianRecoveryString writes m's median recovery: "never (most)" when more than half of the
// episodes met never recovered, "—" when it met none.
func MedianRecoveryString(m Metrics) string {
	switch d := m.MedianRecovery(); {
	case d < 0:
		return "never (most)"
	case len(m.Recovery)+m.Unrecovered == 0:
		return "—"
	default:
		return d.Round(100 * time.Millisecond).String()
	}
}

// UnrecoveredString writes m's ban episodes never recovered from, of those it met, and how many
// it never met: "2 / 1784 (247 not met)".
func UnrecoveredString(m Metrics) string {
	return fmt.Sprintf("%d / %d (%d not met)", m.Unrecovered, m.Unrecovered+len(m.Recovery), m.Unmet)
}

// Mark is "met" or "**missed**".
func (t Target) Mark() string {
	if t.Met {
		return "met"
	}
	return "**missed**"
}

// FormatTargets is targets as lines "- name: got — met".
func FormatTargets(ts []Target) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "- %s: %s — %s\n", t.Name, t.Got, t.Mark())
	}
	return b.String()
}

// TruthStats counts what a world's ground truth holds.
type TruthStats struct {
	Bans       []int // ban episodes each pair drew, by band of Scenario.BanBands, repeat bans lengthened apart
	PlainBans  int   // of the episodes drawn, on origins that ban with a plain 403
	Hardened   int   // of the episodes drawn, repeat bans a hardening origin lengthened
	SubnetBans int   // of the episodes drawn, those that also banned the pair's subnet-mates
	Stalls     int   // slow-body episodes
	Denied     int   // pairs whose proxy refuses the origin
	Bursts     int
	Forbidding int // origins with a path they forbid to everyone
	SlowExits  int // exits slow for at least one origin
	SlowPairs  int
	Outages    int // origin outages
	Churn      int // times an exit went dead for a while
}

// Stats counts what g holds.
func (g *Truth) Stats() TruthStats {
	st := TruthStats{Bans: make([]int, len(g.sc.BanBands)), Bursts: len(g.bursts), SubnetBans: g.spread}
	slowExit := make([]bool, g.sc.Exits)
	for o, org := range g.sc.Origins {
		if org.ForbiddenShare > 0 {
			st.Forbidding++
		}
		st.Outages += len(g.Outages(o))
		for e := range g.sc.Exits {
			for k, w := range g.OwnBans(e, o) {
				if org.PlainBans {
					st.PlainBans++
				}
				if k > 0 && org.Hardening > 1 {
					st.Hardened++
					continue
				}
				d := w.To.Sub(w.From)
				for i, b := range g.sc.BanBands {
					if d >= b.Min && d <= b.Max {
						st.Bans[i]++
						break
					}
				}
			}
			st.Stalls += len(g.Stalls(e, o))
			if g.Denied(e, o) {
				st.Denied++
			}
			if g.Slow(e, o) {
				st.SlowPairs++
				slowExit[e] = true
			}
		}
	}
	for e, slow := range slowExit {
		st.Churn += len(g.Churn(e))
		if slow {
			st.SlowExits++
		}
	}
	return st
}
