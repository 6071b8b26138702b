// Command benchall runs every measurement of the bench module and rewrites bench/RESULTS.md and
// bench/chart.svg: loopback overhead beside the peers, cost and memory at scale, and the pool
// simulation. Run it from the bench directory: go run ./cmd/benchall (make bench does).
//
// -only sim runs the simulation alone and prints its section to stdout, leaving the files as they
// are (with -write, it replaces the simulation's section of -out and rewrites -chart instead);
// -seeds, -worlds, -strategies and -duration narrow it. The quick look at ours against the oracle
// in one world, as the policy's engineers iterate:
//
//	go run ./cmd/benchall -only sim -seeds 1 -strategies ours
//
// and the round-3 world alone, every seed and strategy: -only sim -worlds round-3. -only spend runs
// the spend world (issue 25: a datacenter and a residential tier priced per GB) and, with -write,
// replaces its own section: go run ./cmd/benchall -only spend -write. -only gateway does the same for
// the gateway world (issue 27: a provider's sticky sessions as static lines or as a gateway line).
// -only crawl plays every world as a finite crawl (issue 35: makespan against the oracle's,
// crawlreport.go); its -worlds are round-1, round-2, round-3, crawl-limits, gateway and spend, all
// of them unless the flag is given, and its -strategies ours and the peers (crawlreport.go).
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/bench/measure"
	"github.com/proxybreaker/proxybreaker/pool"
)

func main() {
	out := flag.String("out", "RESULTS.md", "where to write the results")
	chart := flag.String("chart", "chart.svg", "where to write the chart")
	rounds := flag.Int("rounds", 5, "rounds of the overhead benchmarks")
	only := flag.String("only", "", `"sim": run only the simulation, "crawl": only the finite crawls, "spend": only the spend world, "gateway": only the gateway world, "measures": only the measurements on real time, "pickreport": only pick + report beside gobreaker; print their sections to stdout (see -write)`)
	write := flag.Bool("write", false, "with -only: replace those sections of -out (and, for sim, rewrite -chart) instead of printing")
	var cfg simConfig
	flag.StringVar(&cfg.seeds, "seeds", "1,2,3,4,5", "round-2 and round-3 world seeds, comma-separated")
	flag.StringVar(&cfg.worlds, "worlds", "round-1,round-2,round-3", "worlds to run, comma-separated: round-1, round-2, round-3 (with -only crawl also crawl-limits, gateway, spend; all six when not given)")
	flag.StringVar(&cfg.strategies, "strategies", "all", "strategies, comma-separated ("+strings.Join(strategyNames(), ", ")+"), or all; the oracle always runs")
	flag.DurationVar(&cfg.duration, "duration", 0, "simulated time of each run (0: the world's, 3h)")
	flag.IntVar(&cfg.parallel, "j", runtime.NumCPU(), "simulation runs at a time")
	flag.BoolVar(&cfg.brief, "brief", false, "with -only sim: the targets and tables alone, without the worlds' descriptions")
	flag.Parse()
	crawlCfg := cfg // the crawl's worlds and strategies are its own unless the flags name some
	if !flagGiven("worlds") {
		crawlCfg.worlds = crawlWorldsDefault
	}
	if !flagGiven("strategies") {
		crawlCfg.strategies = crawlStrategiesDefault
	}
	switch *only {
	case "":
	case "crawl":
		if err := onlyCrawl(crawlCfg, *write, *out); err != nil { // crawlreport.go
			log.Fatal(err)
		}
		return
	case "sim":
		if err := onlySim(cfg, *write, *out, *chart); err != nil {
			log.Fatal(err)
		}
		return
	case "measures":
		if err := onlyMeasures(*rounds, *write, *out); err != nil {
			log.Fatal(err)
		}
		return
	case "spend":
		if err := onlySpend(cfg, *write, *out); err != nil { // spendreport.go
			log.Fatal(err)
		}
		return
	case "gateway":
		if err := onlyGateway(cfg, *write, *out); err != nil { // gatewayreport.go
			log.Fatal(err)
		}
		return
	case "pickreport":
		if err := onlyPickReport(*write, *out); err != nil { // pickreport.go
			log.Fatal(err)
		}
		return
	default:
		log.Fatalf("-only %q: want sim, crawl, spend, gateway, measures or pickreport", *only)
	}
	start := time.Now()
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Bench results\n\nWritten by `make bench` (`cd bench && go run ./cmd/benchall`) on %s, %d CPUs, %s. Do not edit by hand.\n\n",
		runtime.GOARCH, runtime.NumCPU(), runtime.Version())

	crawl, err := runCrawl(crawlCfg) // crawlreport.go: the makespans lead
	if err != nil {
		log.Fatal(err)
	}
	writeCrawl(p, crawl)
	log.Print("simulation")
	res, err := runSim(cfg)
	if err != nil {
		log.Fatal(err)
	}
	writeSim(p, res)
	if err := os.WriteFile(*chart, []byte(svg(res.chart())), 0o644); err != nil {
		log.Fatal(err)
	}
	spend, err := runSpend(cfg) // spendreport.go
	if err != nil {
		log.Fatal(err)
	}
	writeSpend(p, spend)
	gw, err := runGateway(cfg) // gatewayreport.go
	if err != nil {
		log.Fatal(err)
	}
	writeGateway(p, gw)
	writeMeasures(p, *rounds)
	p("\nTotal time of this run: %v.\n", time.Since(start).Round(time.Second))
	b.WriteString(keptSectionsOf(*out))
	if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
		log.Fatal(err)
	}
	log.Printf("wrote %s and %s in %v", *out, *chart, time.Since(start).Round(time.Second))
}

// writeMeasures runs the measurements on real time (overhead, pick, scale, churn) and writes their
// sections.
func writeMeasures(p func(string, ...any), rounds int) {
	log.Print("overhead")
	rows, err := measure.Overhead(rounds)
	if err != nil {
		log.Fatal(err)
	}
	p("## Overhead: loopback round trips through a local forward proxy\n\n")
	p("One origin and one plain-HTTP forward proxy on 127.0.0.1, the same for every variant; each variant in turn, %d rounds, medians of the times and the fewest allocations of the rounds (the process's background allocations only add to a request's); ratios to bare from the same run.\n\n", rounds)
	p("| variant | serial | ratio | `RunParallel` | ratio | allocs/op (serial) | B/op |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		p("| %s | %.1f µs | %.2f | %.1f µs | %.2f | %d | %d |\n", r.Name, r.Serial.NsPerOp/1e3, r.Serial.NsPerOp/rows[0].Serial.NsPerOp,
			r.Parallel.NsPerOp/1e3, r.Parallel.NsPerOp/rows[0].Parallel.NsPerOp, r.Serial.AllocsPerOp, r.Serial.BytesPerOp)
	}

	var bare, ours measure.Timing
	for _, r := range rows {
		switch r.Name {
		case "bare http.Transport":
			bare = r.Serial
		case "ours (transport.New)":
			ours = r.Serial
		}
	}
	p("\nIssue 16: ours − bare = %+d allocations a request (target ≤ +4): %s.\n", ours.AllocsPerOp-bare.AllocsPerOp, verdict(ours.AllocsPerOp-bare.AllocsPerOp <= 4))

	log.Print("pick")
	p("\n## Pick at scale, beside a peer\n\n")
	p("`measure.Pick`: a pool of N exits and M origins in which, for every origin, one exit in ten has its pair parked OPEN (a proxy denial reported through a pinned pick: ")
	p("the pairs a pool tracks); each op picks for a random origin and gives the lease back unused (`PickAt` + `ReleaseAt`, one instant of a fake clock). ")
	p("The peer keeps a gobreaker/v2 breaker per tracked (exit, origin) in a map under a read-write lock, as a user would, and picks a random exit whose pair breaker is not OPEN (8 draws, then a scan). ")
	p("B/pair is the heap growth per tracked pair (after GC).\n\n")
	p("| exits × origins | tracked pairs | ours serial | ours `RunParallel` | ours allocs/op | ours B/pair | peer serial | peer `RunParallel` | peer B/pair |\n|---|---|---|---|---|---|---|---|---|\n")
	var picks []measure.PickRow
	for _, sz := range [][2]int{{1000, 1000}, {100000, 1}, {100000, 1000}} {
		r, err := measure.Pick(sz[0], sz[1], 1)
		if err != nil {
			log.Fatal(err)
		}
		picks = append(picks, r)
		p("| %d × %d | %d | %.0f ns | %.0f ns | %d | %.0f | %.0f ns | %.0f ns | %.0f |\n", r.Exits, r.Origins, r.Pairs,
			r.Ours.Serial.NsPerOp, r.Ours.Parallel.NsPerOp, r.Ours.Serial.AllocsPerOp, r.Ours.BytesPerPair,
			r.Peer.Serial.NsPerOp, r.Peer.Parallel.NsPerOp, r.Peer.BytesPerPair)
	}
	parkedB, err := measure.PairBytes(1000, 100, pool.Verdict{Outcome: pool.Permanent, Class: pool.ClassProxyDenied})
	if err != nil {
		log.Fatal(err)
	}
	pacedB, err := measure.PairBytes(1000, 100, pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	p("\nMemory per tracked pair at 1,000 exits × 100 origins, every pair holding a breaker (`measure.PairBytes`): %.0f B for a pair parked OPEN; %.0f B for a pair OPEN after a 429 with Retry-After, which also holds the window it learned (its pace).\n\n", parkedB, pacedB)
	p("Issue 16's targets, this run:\n\n")
	p("- ≤ 200 B per tracked pair: %.0f B (1,000 × 100, parked), %.0f and %.0f B (100,000 × 1 and × 1,000) — %s\n", parkedB, picks[1].Ours.BytesPerPair, picks[2].Ours.BytesPerPair,
		verdict(parkedB <= 200 && picks[1].Ours.BytesPerPair <= 200 && picks[2].Ours.BytesPerPair <= 200))
	p("- pick ≤ 300 ns serial at 100,000 exits: %.0f ns — %s\n", picks[1].Ours.Serial.NsPerOp, verdict(picks[1].Ours.Serial.NsPerOp <= 300))
	p("- pick ≤ 500 ns serial at 100,000 exits × 1,000 origins: %.0f ns — %s\n", picks[2].Ours.Serial.NsPerOp, verdict(picks[2].Ours.Serial.NsPerOp <= 500))
	p("- 0 allocations a pick: %d, %d, %d — %s\n", picks[0].Ours.Serial.AllocsPerOp, picks[1].Ours.Serial.AllocsPerOp, picks[2].Ours.Serial.AllocsPerOp,
		verdict(picks[0].Ours.Serial.AllocsPerOp+picks[1].Ours.Serial.AllocsPerOp+picks[2].Ours.Serial.AllocsPerOp == 0))

	writePickReport(p) // pickreport.go

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
	p("\n")
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
}

// onlyMeasures runs writeMeasures alone: its sections go to stdout, or with write replace those of
// out (from the overhead's heading to the end), keeping the simulation's and the fleet's sections
// as they are.
func onlyMeasures(rounds int, write bool, out string) error {
	var b strings.Builder
	start := time.Now()
	writeMeasures(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }, rounds)
	fmt.Fprintf(&b, "\nTotal time of this run (the measurements alone, `-only measures`): %v.\n", time.Since(start).Round(time.Second))
	return printOrSplice(write, out, b.String(), func(old, text string) (string, error) {
		const heading = "## Overhead:"
		i := strings.Index(old, heading)
		if i < 0 {
			return "", fmt.Errorf("%s has no %q section to replace: run the whole of benchall", out, heading)
		}
		log.Printf("replacing the measurements of %s", out)
		return old[:i] + text + keptSections(old), nil
	})
}

// printOrSplice prints text to stdout, or with write rewrites out as splice makes it of its old
// content and text.
func printOrSplice(write bool, out, text string, splice func(old, text string) (string, error)) error {
	if !write {
		_, err := os.Stdout.WriteString(text)
		return err
	}
	old, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	s, err := splice(string(old), text)
	if err != nil {
		return err
	}
	return os.WriteFile(out, []byte(s), 0o644)
}

// flagGiven reports whether the command line set the flag name.
func flagGiven(name string) bool {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// verdict says whether a target was met, as the tables above do.
func verdict(met bool) string {
	if met {
		return "met"
	}
	return "**missed**"
}

// onlySim runs the simulation alone: its section goes to stdout, or with write replaces the
// simulation's section of out (up to the next second-level heading) and the chart.
func onlySim(cfg simConfig, write bool, out, chart string) error {
	res, err := runSim(cfg)
	if err != nil {
		return err
	}
	var b strings.Builder
	writeSim(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }, res)
	err = printOrSplice(write, out, b.String(), func(s, text string) (string, error) {
		const heading = "## Pool simulation\n"
		i := strings.Index(s, heading)
		if i < 0 {
			return "", fmt.Errorf("%s has no %q section to replace: run the whole of benchall", out, strings.TrimSpace(heading))
		}
		j := strings.Index(s[i+len(heading):], "\n## ")
		if j < 0 {
			return "", fmt.Errorf("%s: nothing follows the simulation's section: run the whole of benchall", out)
		}
		return s[:i] + text + s[i+len(heading)+j+1:], nil
	})
	if err != nil || !write {
		return err
	}
	if err := os.WriteFile(chart, []byte(svg(res.chart())), 0o644); err != nil {
		return err
	}
	log.Printf("replaced the simulation's section of %s, wrote %s", out, chart)
	return nil
}
