package main

import (
	"fmt"
	"log"
	"strconv"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/bench/sim"
)

// The crawl section (issue 35): each world as a finite crawl (sim.Scenario.Crawl, crawl.go), every
// site N pages, and how long each strategy takes to finish it — the makespan, set by the slowest
// site — beside the informed oracle's, with each site's completion and pages an hour while it was
// unfinished. -only crawl runs it alone (-worlds, -seeds and -strategies narrow it; -j runs at a
// time); with -write it replaces (or adds, at the head of the file) its section of RESULTS.md.
// The quick look at a pool change, one world and one seed, ours against the oracles:
//
//	go run ./cmd/benchall -only crawl -worlds round-1 -seeds 1 -strategies ours

// crawlHeading starts the crawl section in RESULTS.md.
const crawlHeading = "## Finite crawls: makespan against the oracle (issue 35)\n"

// crawlWorldsDefault and crawlStrategiesDefault are -worlds and -strategies for the crawl when
// the flags are not given: every crawl world; ours and the peers, not ours' tuned variants
// (random, whose crawls follow round-robin's, left out too), to keep the section's 185 runs
// affordable.
const (
	crawlWorldsDefault     = "round-1,round-2,round-3,crawl-limits,gateway,spend"
	crawlStrategiesDefault = "ours,per-exit,per-pair,round-robin"
)

// crawlWorld is one crawl world -worlds can name: its crawl for a seed, and how its strategies
// differ from -strategies'.
type crawlWorld struct {
	name  string
	world func(seed uint64) sim.Scenario
	pages int
	// strategies are the world's strategies, ours first: cfg's (nil) or the world's own.
	strategies func() []sim.Strategy
}

var crawlWorlds = []crawlWorld{
	{"round-1", sim.Round1Crawl, sim.Round1CrawlPages, nil},
	{"round-2", sim.Round2Crawl, sim.Round2CrawlPages, nil},
	{"round-3", sim.Round3Crawl, sim.Round3CrawlPages, nil},
	{"crawl-limits", sim.CrawlLimitsCrawl, sim.CrawlLimitsPages, nil},
	// The gateway world's own strategies, the gateway line (ours) first, the static lines (the
	// users' baseline) second.
	{"gateway", sim.GatewayCrawl, sim.GatewayCrawlPages, func() []sim.Strategy {
		n := sim.GatewayLineCount
		return []sim.Strategy{sim.GatewaySessions(n), sim.GatewayLines(n), sim.GatewaySessionsKept(n), sim.GatewayRotating()}
	}},
	{"spend", sim.SpendCrawl, sim.SpendCrawlPages, nil},
}

// crawlRun is one world and seed's crawls, ms in its strategies' order, ours first, the informed
// then the clairvoyant oracle last.
type crawlRun struct {
	world string
	sc    sim.Scenario
	ms    []sim.Metrics
}

type crawlResults struct {
	runs    []crawlRun
	partial bool
	jobs    int
	par     int
	elapsed time.Duration
}

// runCrawl plays the crawl of every world and seed cfg names with cfg's strategies (the world's own
// for the gateway world; Crawlee's tiered proxies added in the spend world) and the two oracles,
// -j at a time.
func runCrawl(cfg simConfig) (*crawlResults, error) {
	sts, err := cfg.strategyList()
	if err != nil {
		return nil, err
	}
	res := &crawlResults{par: cfg.parallel, partial: cfg.seeds != "1,2,3,4,5" || cfg.worlds != crawlWorldsDefault || cfg.strategies != crawlStrategiesDefault || cfg.duration != 0}
	var jobs []sim.Job
	for _, name := range strings.Split(cfg.worlds, ",") {
		var cw *crawlWorld
		for i := range crawlWorlds {
			if crawlWorlds[i].name == strings.TrimSpace(name) {
				cw = &crawlWorlds[i]
			}
		}
		if cw == nil {
			return nil, fmt.Errorf("-worlds: unknown %q for -only crawl (want %s)", name, crawlWorldsDefault)
		}
		ws := sts
		switch {
		case cw.strategies != nil:
			ws = cw.strategies()
		case cw.name == "spend":
			ws = append(append([]sim.Strategy(nil), sts...), sim.CrawleeTiered())
		}
		ws = append(append([]sim.Strategy(nil), ws...), sim.InformedOracle(), sim.Oracle())
		for _, f := range strings.Split(cfg.seeds, ",") {
			seed, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("-seeds: %w", err)
			}
			sc := cw.world(seed)
			if cfg.duration > 0 {
				sc.Duration = cfg.duration
			}
			res.runs = append(res.runs, crawlRun{world: cw.name, sc: sc, ms: make([]sim.Metrics, len(ws))})
			for _, st := range ws {
				jobs = append(jobs, sim.Job{Scenario: sc, Strategy: st})
			}
		}
	}
	start := time.Now()
	log.Printf("crawl: %d runs, %d at a time", len(jobs), cfg.parallel)
	ms, err := sim.RunAll(jobs, cfg.parallel)
	if err != nil {
		return nil, err
	}
	res.jobs, res.elapsed = len(jobs), time.Since(start)
	log.Printf("crawl: %v", res.elapsed.Round(time.Second))
	i := 0
	for r := range res.runs {
		i += copy(res.runs[r].ms, ms[i:])
	}
	return res, nil
}

// informed and clairvoyant are the oracles' crawls.
func (r *crawlRun) informed() sim.Metrics    { return r.ms[len(r.ms)-2] }
func (r *crawlRun) clairvoyant() sim.Metrics { return r.ms[len(r.ms)-1] }

// peers are the indices of the peers' crawls: neither ours (nor a variant of it) nor an oracle.
func (r *crawlRun) peers() []int {
	var is []int
	for i, m := range r.ms[1 : len(r.ms)-oracles] {
		if !strings.HasPrefix(m.Strategy, "ours") && !strings.HasPrefix(m.Strategy, "gateway line") {
			is = append(is, i+1)
		}
	}
	return is
}

// bestPeer is the index of the peer that finished first, or when none finished the one that left
// the fewest pages; −1 when no peer ran.
func (r *crawlRun) bestPeer() int {
	best := -1
	for _, i := range r.peers() {
		if best < 0 || faster(r.ms[i].Crawl, r.ms[best].Crawl) {
			best = i
		}
	}
	return best
}

// perPair is the index of the per-pair breaker's crawl, or −1.
func (r *crawlRun) perPair() int {
	for i, m := range r.ms {
		if m.Strategy == sim.PerPairBreaker().Name {
			return i
		}
	}
	return -1
}

// faster reports whether crawl a did better than b: finished sooner, or left fewer pages.
func faster(a, b sim.CrawlResult) bool {
	if a.Finished != b.Finished {
		return a.Finished
	}
	if a.Finished {
		return a.Makespan < b.Makespan
	}
	return a.Left() < b.Left()
}

// makespan writes a crawl's makespan: "2 h 04 min", or "not finished: 48,021 left".
func makespan(c sim.CrawlResult) string {
	if !c.Finished {
		return "not finished: " + thousands(c.Left()) + " left"
	}
	return hm(c.Makespan)
}

// hm writes d in hours and minutes: "2 h 04 min", "58 min".
func hm(d time.Duration) string {
	m := int(d.Round(time.Minute) / time.Minute)
	if m < 60 {
		return fmt.Sprintf("%d min", m)
	}
	return fmt.Sprintf("%d h %02d min", m/60, m%60)
}

// thousands writes n with a comma every three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// slower is a's makespan over b's: "1.45", or "> 5.8" when a did not finish (its cap over b's).
func slower(a, b sim.CrawlResult) string {
	if b.Makespan <= 0 {
		return "—"
	}
	x := a.Makespan.Seconds() / b.Makespan.Seconds()
	if !a.Finished {
		return fmt.Sprintf("> %.1f", x)
	}
	return fmt.Sprintf("%.2f", x)
}

// siteFigures judges ours against the oracle and the peers site by site: the worst site's
// completion over the informed oracle's, and the worst site's pages an hour over the best peer's
// on that site (the most any peer got there).
func (r *crawlRun) siteFigures() (completion, perHour string) {
	ours, inf := r.ms[0].Crawl, r.informed().Crawl
	worstC, worstO := 0.0, -1
	worstP, worstPO := 0.0, -1
	for o := range ours.Quota {
		if b := inf.Bound(o); b > 0 {
			if x := ours.Bound(o).Seconds() / b.Seconds(); worstO < 0 || x > worstC {
				worstC, worstO = x, o
			}
		}
		best := 0.0
		for _, i := range r.peers() {
			best = max(best, r.ms[i].Crawl.PerHour(o))
		}
		if best > 0 {
			if x := ours.PerHour(o) / best; worstPO < 0 || x < worstP {
				worstP, worstPO = x, o
			}
		}
	}
	completion, perHour = "—", "—"
	if worstO >= 0 {
		completion = fmt.Sprintf("%.2f (%s)", worstC, sim.OriginKey(worstO))
		if !ours.Finished && ours.Pages[worstO] < ours.Quota[worstO] {
			completion = fmt.Sprintf("> %.1f (%s)", worstC, sim.OriginKey(worstO))
		}
	}
	if worstPO >= 0 {
		perHour = fmt.Sprintf("%.2f (%s)", worstP, sim.OriginKey(worstPO))
	}
	return completion, perHour
}

// writeCrawl is the crawl section.
func writeCrawl(p func(string, ...any), res *crawlResults) {
	p("%s\n", crawlHeading)
	if res.partial {
		p("**A partial run** (`-only crawl` narrowed by -worlds, -seeds, -strategies or -duration): not the report's full set.\n\n")
	}
	p("Issue 35. Every other table here is an *endless* workload, where a worker refused for one site takes work for another, which rewards giving up on hard sites. A real crawl has a finite frontier per site and ends when its last site is done. Here each world is a **finite crawl** (`sim.CrawlOf`): every site has N pages; a worker takes a page of a site drawn uniformly (from its own seeded stream) among the sites with pages left to take; a page counts when it is served, and a page not served (a 429, a ban page, a timeout) or a refused pick goes back to the frontier — a refused worker waits RetryIn, at most the world's limit (1 s), as in the endless run, then draws again among the unfinished sites. The crawl ends when every site is done, or at %s of simulated time, unfinished. The workload's bursts do not apply; the worlds' exits, caps, bans and dynamics are those of the endless runs, drawn over the %s.\n\n", hm(sim.CrawlCap), hm(sim.CrawlCap))
	p("**Makespan** is the time to the last page; a site's **completion** the time to its last page; its **pages/h** its pages over the time it was unfinished (while it bound). **Idle worker-h** is worker time spent waiting after refused picks, each for a site that still had pages left. Targets (issue 35): makespan ≤ 1.25× the informed oracle's on every seed, every site's completion ≤ 1.5× the oracle's, and on every site at least the pages an hour of the best peer.\n\n")
	p("Quotas (pages a site): round-1 %s, round-2 %s, round-3 %s, crawl-limits %s, gateway %s, spend %s — sized so that the informed oracle finishes in 1–4 h.\n\n",
		thousands(sim.Round1CrawlPages), thousands(sim.Round2CrawlPages), thousands(sim.Round3CrawlPages), thousands(sim.CrawlLimitsPages), thousands(sim.GatewayCrawlPages), thousands(sim.SpendCrawlPages))
	p("The **crawl-limits world** (`sim.CrawlLimitsWorld`) is the round-1 world (40 exits, 48 workers, bans of 10–40 min) whose 8 sites run limiters whose block outlasts their period, as Cloudflare's rate-limiting rules do (`sim.BlockLimit`: N requests per period from one exit, then every request refused for the block, Retry-After what is left of the block): ")
	var kinds []string
	for _, o := range sim.CrawlLimitsWorld(1).Origins {
		kinds = append(kinds, o.String())
	}
	p("%s. The informed oracle knows each exit's count and block there as it knows a cap's window. ", strings.Join(kinds, "; "))
	p("In the **gateway world** ours is the gateway line (`sessions=20`), the peers the static session lines and the rotating port; the oracles there send through the provider's 200 IPs directly, which no line strategy can: a bound, not a peer.\n\n")
	p("Simulation: %d runs, %d at a time, in %v.\n\n", res.jobs, res.par, res.elapsed.Round(time.Second))

	for i := 0; i < len(res.runs); {
		j := i
		for j < len(res.runs) && res.runs[j].world == res.runs[i].world {
			j++
		}
		writeCrawlWorld(p, res.runs[i:j])
		i = j
	}
}

// writeCrawlWorld is one world's tables: makespan per seed, then each seed's sites and strategies.
func writeCrawlWorld(p func(string, ...any), runs []crawlRun) {
	sc := runs[0].sc
	p("### %s, %s pages a site, %d sites\n\n", strings.TrimSuffix(sc.Name, " world")+" world (crawl)", thousands(sc.Crawl.Pages[0]), len(sc.Origins))
	p("| seed | ours | per-pair breaker | best peer | informed oracle | clairvoyant oracle | ours ÷ informed (≤ 1.25) | worst site's completion ÷ informed (≤ 1.5) | worst site's pages/h ÷ best peer's (≥ 1) |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		ours := r.ms[0].Crawl
		pp := "—"
		if i := r.perPair(); i >= 0 {
			pp = makespan(r.ms[i].Crawl)
		}
		bp := "—"
		if i := r.bestPeer(); i >= 0 {
			bp = makespan(r.ms[i].Crawl) + " (" + r.ms[i].Strategy + ")"
		}
		completion, perHour := r.siteFigures()
		p("| %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.sc.Seed, makespan(ours), pp, bp, makespan(r.informed().Crawl), makespan(r.clairvoyant().Crawl),
			slower(ours, r.informed().Crawl), completion, perHour)
	}
	p("\n")
	for _, r := range runs {
		writeCrawlSeed(p, r)
	}
}

// writeCrawlSeed is one seed's per-site table (ours, the informed oracle, the best peer) and every
// strategy's crawl, folded.
func writeCrawlSeed(p func(string, ...any), r crawlRun) {
	ours, inf := r.ms[0].Crawl, r.informed().Crawl
	best := r.bestPeer()
	p("<details><summary>Seed %d: per site, and every strategy</summary>\n\n", r.sc.Seed)
	bestName := "best peer"
	if best >= 0 {
		bestName = "best peer (" + r.ms[best].Strategy + ")"
	}
	p("| site | limit | ours: completion, pages/h | informed oracle: completion, pages/h | %s: completion, pages/h | ours ÷ informed (completion) |\n|---|---|---|---|---|---|\n", bestName)
	cell := func(c sim.CrawlResult, o int) string {
		done := hm(c.Done[o])
		if c.Pages[o] < c.Quota[o] {
			done = thousands(c.Quota[o]-c.Pages[o]) + " left"
		}
		return fmt.Sprintf("%s, %s", done, thousands(int(c.PerHour(o)+0.5)))
	}
	for o := range ours.Quota {
		bp := "—"
		if best >= 0 {
			bp = cell(r.ms[best].Crawl, o)
		}
		x := "—"
		if b := inf.Bound(o); b > 0 {
			x = fmt.Sprintf("%.2f", ours.Bound(o).Seconds()/b.Seconds())
		}
		p("| %s | %s | %s | %s | %s | %s |\n", sim.OriginKey(o), r.sc.Origins[o], cell(ours, o), cell(inf, o), bp, x)
	}
	p("\n| strategy | makespan | pages left | idle worker-h | 429s | wasted attempts |\n|---|---|---|---|---|---|\n")
	for _, m := range r.ms {
		p("| %s | %s | %s | %.1f | %s | %s |\n", m.Strategy, makespan(m.Crawl), thousands(m.Crawl.Left()), m.Crawl.Idle.Hours(), thousands(m.RateLimited), thousands(m.Wasted()))
	}
	p("\n</details>\n\n")
}

// onlyCrawl runs the crawl section alone: it goes to stdout, or with write replaces the crawl
// section of out, or is added at its head (before the simulation's section) when out has none.
func onlyCrawl(cfg simConfig, write bool, out string) error {
	res, err := runCrawl(cfg)
	if err != nil {
		return err
	}
	var b strings.Builder
	writeCrawl(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }, res)
	return printOrSplice(write, out, b.String(), spliceSectionBefore(out, crawlHeading, "crawl", "## Pool simulation\n"))
}
