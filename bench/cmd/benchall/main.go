// Command benchall runs every measurement of the bench module and rewrites bench/RESULTS.md and
// bench/chart.svg: loopback overhead beside the peers, cost and memory at scale, and the pool
// simulation. Run it from the bench directory: go run ./cmd/benchall (make bench does).
package main

import (
	"flag"
	"fmt"
	"html"
	"log"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/bench/measure"
	"github.com/proxybreaker/proxybreaker/bench/sim"
)

func main() {
	out := flag.String("out", "RESULTS.md", "where to write the results")
	chart := flag.String("chart", "chart.svg", "where to write the chart")
	rounds := flag.Int("rounds", 5, "rounds of the overhead benchmarks")
	flag.Parse()
	start := time.Now()
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Bench results\n\nWritten by `make bench` (`cd bench && go run ./cmd/benchall`) on %s, %d CPUs, %s. Do not edit by hand.\n\n",
		runtime.GOARCH, runtime.NumCPU(), runtime.Version())

	log.Print("simulation")
	sc := sim.DefaultScenario()
	var ms []sim.Metrics
	for _, st := range sim.Strategies(sc) {
		m, err := sim.Run(sc, st)
		if err != nil {
			log.Fatal(err)
		}
		ms = append(ms, m)
	}
	sens := sc
	sens.MaxRefusalWait = 30 * time.Second
	msens, err := sim.Run(sens, sim.Ours())
	if err != nil {
		log.Fatal(err)
	}
	writeSim(p, sc, ms, msens)
	if err := os.WriteFile(*chart, []byte(svg(ms)), 0o644); err != nil {
		log.Fatal(err)
	}

	log.Print("overhead")
	rows, err := measure.Overhead(*rounds)
	if err != nil {
		log.Fatal(err)
	}
	p("## Overhead: loopback round trips through a local forward proxy\n\n")
	p("One origin and one plain-HTTP forward proxy on 127.0.0.1, the same for every variant; each variant in turn, %d rounds, medians; ratios to bare from the same run.\n\n", *rounds)
	p("| variant | serial | ratio | `RunParallel` | ratio | allocs/op (serial) | B/op |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		p("| %s | %.1f µs | %.2f | %.1f µs | %.2f | %d | %d |\n", r.Name, r.Serial.NsPerOp/1e3, r.Serial.NsPerOp/rows[0].Serial.NsPerOp,
			r.Parallel.NsPerOp/1e3, r.Parallel.NsPerOp/rows[0].Parallel.NsPerOp, r.Serial.AllocsPerOp, r.Serial.BytesPerOp)
	}

	log.Print("scale")
	srows, err := measure.Scale([]int{10, 1000, 100000}, []int{1, 100, 10000})
	if err != nil {
		log.Fatal(err)
	}
	p("\n## Scale: one request through ours over a canned base\n\n")
	p("`transport.New(pool, WithBase(canned))` over `pool.New(WithExits(…))`, a random origin per request, every pair healthy (healthy pairs hold no breaker). Whole RoundTrip: pick, attempt, classify, body.\n\n")
	p("| exits × origins | serial | `RunParallel` | allocs/op |\n|---|---|---|---|\n")
	for _, r := range srows {
		p("| %d × %d | %.0f ns | %.0f ns | %d |\n", r.Exits, r.Origins, r.Serial.NsPerOp, r.Parallel.NsPerOp, r.Serial.AllocsPerOp)
	}
	bpp, err := measure.BytesPerPair(1000, 100)
	if err != nil {
		log.Fatal(err)
	}
	p("\n**Memory per tracked pair**: %.0f B (1,000 exits × 100 origins, every pair tripped by a 429 so that it holds a breaker; heap growth after GC / pairs).\n\n", bpp)
	log.Print("churn")
	pts, err := measure.Churn(1_000_000, 200_000, 100)
	if err != nil {
		log.Fatal(err)
	}
	p("**Churn**: 1,000,000 distinct origins seen once each through 100 exits, one every millisecond of fake time, 1 in 100 answered 429 (its pair then holds a breaker); `WithIdleTTL(time.Minute)`, `Pool.Sweep` after every 200,000:\n\n")
	p("| origins seen | heap | origins tracked | pair breakers held |\n|---|---|---|---|\n")
	for _, c := range pts {
		p("| %d | %.1f MiB | %d | %d |\n", c.Seen, float64(c.HeapBytes)/(1<<20), c.Origins, c.Pairs)
	}
	p("\nTotal time of this run: %v.\n", time.Since(start).Round(time.Second))
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s and %s in %v", *out, *chart, time.Since(start).Round(time.Second))
}

func writeSim(p func(string, ...any), sc sim.Scenario, ms []sim.Metrics, sens sim.Metrics) {
	oracle := ms[len(ms)-1]
	p("## Pool simulation\n\n")
	p("![goodput and wasted attempts per strategy](chart.svg)\n\n")
	p("Seed %d, %v of simulated time, %d workers, %d exits (%d dead, %d failing proxy auth with 407, %d flaky: %.0f %% of attempts time out after %v, any origin), %d origins each capping an (exit, origin) pair at %d requests a clock minute (429 with Retry-After to the minute's end), ban episodes of %v–%v (challenge page, 403) at %.1f an hour per pair, latency %v–%v. A refused request (no exit ready) makes its worker wait RetryIn, at most %v. Ours drives `pool.Pool` through its public API, with no HTTP in between and every setting at its default (the idle TTL included): `PickAt` at the simulated instant (`clock.Fake`), the simulated world decides the outcome, and `Lease.ReportAt` gets the verdict `transport.DefaultClassifier` gives that outcome (`sim.Verdict`, checked against the classifier by a test). `pool.WithSeed` (drawn from the strategy's seeded source) and `pool.WithInlineSweep` keep a run deterministic. (Until the engine moved to package pool, the simulation sent fake round trips through `transport.Transport` and turned the idle sweep off.)\n\n",
		sc.Seed, sc.Duration, sc.Workers, sc.Exits, sc.Dead, sc.Auth, sc.Flaky, sc.FlakyTimeout*100, sc.Timeout, sc.Origins, sc.RatePerMinute,
		sc.BanMin, sc.BanMax, sc.BansPerHour, sc.LatencyMin, sc.LatencyMax, sc.MaxRefusalWait)
	p("| strategy | goodput | ÷ oracle | wasted attempts | 429s provoked | challenge pages | timeouts | worker time lost to timeouts | refused (not sent) | recovery after a ban (median) | bans never recovered |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range ms {
		p("| %s | %d | %.2f | %d | %d | %d | %d | %.1f %% | %d | %s | %d / %d |\n", m.Strategy, m.Successes,
			float64(m.Successes)/float64(oracle.Successes), m.Wasted(), m.RateLimited, m.Blocked, m.Timeouts,
			100*m.TimeoutTime.Seconds()/m.WorkerTime.Seconds(), m.Refusals, rec(m), m.Unrecovered, m.Unrecovered+len(m.Recovery))
	}
	p("\nSensitivity: with workers honouring RetryIn up to 30 s, ours (defaults) gets %d successes (%.2f of the oracle's).\n\n",
		sens.Successes, float64(sens.Successes)/float64(oracle.Successes))
	byName := map[string]sim.Metrics{}
	for _, m := range ms {
		byName[m.Strategy] = m
	}
	ours := ms[0]
	var bestPeer sim.Metrics
	for _, m := range ms {
		if !strings.HasPrefix(m.Strategy, "ours") && m.Strategy != "oracle" && m.Successes > bestPeer.Successes {
			bestPeer = m
		}
	}
	yes := func(ok bool) string {
		if ok {
			return "met"
		}
		return "**missed**"
	}
	pp, rr := byName["per-(exit, origin) breaker"], byName["round-robin"]
	p("Targets, for ours (defaults):\n\n")
	p("- goodput ≥ 0.90 of the oracle's: %.2f — %s\n", float64(ours.Successes)/float64(oracle.Successes), yes(ours.Successes*10 >= oracle.Successes*9))
	p("- ahead of every peer (best: %s, %d): %s\n", bestPeer.Strategy, bestPeer.Successes, yes(ours.Successes > bestPeer.Successes))
	p("- wasted attempts ≤ ⅓ of the per-(exit, origin) breaker's (%d): %d — %s\n", pp.Wasted(), ours.Wasted(), yes(ours.Wasted()*3 <= pp.Wasted()))
	p("- 429s provoked ≤ ⅓ of round-robin's (%d): %d — %s\n\n", rr.RateLimited, ours.RateLimited, yes(ours.RateLimited*3 <= rr.RateLimited))
}

func rec(m sim.Metrics) string {
	d := m.MedianRecovery()
	if d < 0 {
		return "never (most)"
	}
	return d.Round(100 * time.Millisecond).String()
}

// svg draws goodput (÷ oracle) and wasted attempts (÷ oracle's goodput) per strategy as paired bars.
func svg(ms []sim.Metrics) string {
	oracle := float64(ms[len(ms)-1].Successes)
	const w, rowH, left, barW = 760, 44, 250, 440
	h := 60 + rowH*len(ms) + 30
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="10" y="20" font-size="14" font-weight="bold">Pool simulation: goodput and wasted attempts, as fractions of the oracle's goodput</text>`+"\n")
	fmt.Fprintf(&b, `<rect x="%d" y="30" width="12" height="12" fill="#2b8a3e"/><text x="%d" y="40">goodput</text>`, left, left+16)
	fmt.Fprintf(&b, `<rect x="%d" y="30" width="12" height="12" fill="#c92a2a"/><text x="%d" y="40">wasted attempts</text>`+"\n", left+90, left+106)
	for i, m := range ms {
		y := 55 + i*rowH
		g := float64(m.Successes) / oracle
		x := float64(m.Wasted()) / oracle
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", left-8, y+18, html.EscapeString(m.Strategy))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="16" fill="#2b8a3e"/><text x="%.1f" y="%d">%.2f</text>`+"\n", left, y, barW*min(g, 1.2)/1.2, float64(left)+barW*min(g, 1.2)/1.2+4, y+12, g)
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="16" fill="#c92a2a"/><text x="%.1f" y="%d">%.2f</text>`+"\n", left, y+18, barW*min(x, 1.2)/1.2, float64(left)+barW*min(x, 1.2)/1.2+4, y+30, x)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="50" x2="%d" y2="%d" stroke="#888" stroke-dasharray="4"/><text x="%d" y="%d" fill="#666">oracle = 1.0</text>`+"\n",
		left+barW*10/12, left+barW*10/12, h-25, left+barW*10/12-30, h-10)
	b.WriteString("</svg>\n")
	return b.String()
}
