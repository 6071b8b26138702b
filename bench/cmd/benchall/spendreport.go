package main

import (
	"fmt"
	"log"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/bench/sim"
)

// The spend section (issue 25): the spend world (sim.SpendWorld) with the strategies -strategies
// names, Crawlee's tiered proxies (the peer that knows tiers) and the oracles, and what each spends
// per thousand pages. -only spend runs it alone; with -write it replaces (or adds) its section of
// RESULTS.md and leaves the others as they are.

// spendHeading starts the spend section in RESULTS.md.
const spendHeading = "## Spend per page: a datacenter tier and a residential tier priced per GB\n"

// spendResults is the spend world's runs, by seed; each world's ms end with the informed then the
// clairvoyant oracle.
type spendResults struct {
	worlds  []worldResult
	partial bool
	runs    int
	elapsed time.Duration
}

// runSpend plays the spend world of each of cfg's seeds with cfg's strategies, Crawlee's tiered
// proxies and the two oracles.
func runSpend(cfg simConfig) (*spendResults, error) {
	sts, err := cfg.strategyList()
	if err != nil {
		return nil, err
	}
	sts = append(sts, sim.CrawleeTiered(), sim.InformedOracle(), sim.Oracle())
	return runWorlds(cfg, "spend", sim.SpendWorld, sts, cfg.seeds != "1,2,3,4,5" || cfg.duration != 0 || len(sts) < len(strategyTable)+1+oracles)
}

// runWorlds plays world(seed) for each of cfg's seeds with sts, -j at a time, named in the log
// by name; partial says the run is narrower than the report's full set.
func runWorlds(cfg simConfig, name string, world func(uint64) sim.Scenario, sts []sim.Strategy, partial bool) (*spendResults, error) {
	res := &spendResults{partial: partial}
	var jobs []sim.Job
	for _, f := range strings.Split(cfg.seeds, ",") {
		seed, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("-seeds: %w", err)
		}
		sc := world(seed)
		if cfg.duration > 0 {
			sc.Duration = cfg.duration
		}
		res.worlds = append(res.worlds, worldResult{sc: sc})
		for _, st := range sts {
			jobs = append(jobs, sim.Job{Scenario: sc, Strategy: st})
		}
	}
	start := time.Now()
	log.Printf("%s: %d runs, %d at a time", name, len(jobs), cfg.parallel)
	ms, err := sim.RunAll(jobs, cfg.parallel)
	if err != nil {
		return nil, err
	}
	res.runs, res.elapsed = len(jobs), time.Since(start)
	for i := range res.worlds {
		res.worlds[i].ms = ms[i*len(sts) : (i+1)*len(sts)]
	}
	return res, nil
}

// spendTarget judges issue 25's target in ms (one world's runs, or every seed's merged; n
// origins): ours (defaults), first, spends less per page than every peer at equal or better
// goodput — per page at the workload's mix (sim.Spend.PerThousandAtMix), so that a peer is not
// made cheaper by failing on the sites with heavy pages. It returns the verdict and the peer
// cheapest per page.
func spendTarget(ms []sim.Metrics, n int) (met bool, cheapest string) {
	ours := ms[0]
	if ours.Strategy != sim.Ours().Name {
		return false, "ours (defaults) did not run"
	}
	met = true
	best := -1
	for i, m := range ms[1 : len(ms)-oracles] {
		i++
		if strings.HasPrefix(m.Strategy, "ours") {
			continue
		}
		if m.Spend.PerThousandAtMix(n) <= ours.Spend.PerThousandAtMix(n) || m.Successes > ours.Successes {
			met = false
		}
		if best < 0 || m.Spend.PerThousandAtMix(n) < ms[best].Spend.PerThousandAtMix(n) {
			best = i
		}
	}
	if best < 0 {
		return false, "no peer ran"
	}
	b := ms[best]
	return met, fmt.Sprintf("%s: $%.3f (as fetched $%.3f), %d pages", b.Strategy, b.Spend.PerThousandAtMix(n), b.Spend.PerThousand(), b.Successes)
}

// writeSpend is the spend section.
func writeSpend(p func(string, ...any), res *spendResults) {
	p("%s\n", spendHeading)
	if res.partial {
		p("**A partial run** (narrowed by -seeds, -strategies or -duration): not the report's full set.\n\n")
	}
	sc := res.worlds[0].sc
	t := sc.Tiers
	p("Issue 25: what a crawl costs when exits are priced per gigabyte. `sim.SpendWorld` is the round-2 world of the same seed (its origins' caps, windows, Retry-After, HTTPS and ban pages, denials, slow bodies and bursts; %s, %d workers, %d exits of which %d dead, %d failing auth, %d flaky) with its exits in two tiers: **%d datacenter exits in tier 0 at $%.2f/GB** and **%d residential exits in tier 1 at $%.2f/GB**, the kinds dealt across both. ",
		dur(sc.Duration), sc.Workers, sc.Exits, sc.Dead, sc.Auth, sc.Flaky, sc.Exits-t.Residential, t.PerGB[0], t.Residential, t.PerGB[1])
	p("Residential pairs keep %.0f %% of the ban episodes a datacenter pair draws, and %d origins (dealt among those that ban with a challenge page) block every datacenter exit for the whole run, so some traffic needs the residential tier. Each origin serves pages of its own size, %d–%d KB (table below).\n\n",
		t.ResidentialBanShare*100, t.BlockedOrigins, slices.Min(t.PageKB), slices.Max(t.PageKB))
	p("Prices: residential at Proxynade's Premium Residential rate, $5.00/GB billed per transferred byte ([proxynade.net](https://proxynade.net/blogs/how-per-gb-proxy-pricing-works)), within the $3–8/GB most providers ask; datacenter at a fifth of it, the ratio of Scrapfly's bandwidth prices (2 credits/MB through datacenter proxies, 10 through residential: [scrapfly.io](https://scrapfly.io/docs/cloud-browser-api/billing)). ")
	p("The meter counts what crosses the gateway, both ways, failures included ([proxydata.io](https://proxydata.io/knowledge/per-gb-pricing)): each attempt costs its request (800 B), a TLS share on HTTPS origins (1.5 KB) and its answer — the page, a 7.9 KB challenge page, a 600 B 403/429/503, squid's 3.5 KB error page, a slow body's first 30 KB; a refused connection or a 407 costs nothing (`sim.Tiers.Bytes`). The simulation counts the spend itself, from each attempt's answer and its exit's tier, not from the pool.\n\n")
	p("Ours (defaults) is the pool with the exits' tiers (`pool.Exit.WithTier`): per origin it picks in the lowest tier with a ready exit. The peers that do not know tiers rotate over all 40 exits; **Crawlee's tiered proxies** (`sim.CrawleeTiered`, `tieredProxyUrls`) keep a tier per domain from its error history and round-robin within it. **Target: ours spends less per page than every peer, at equal or better goodput.**\n\n")
	p("| origin |")
	for _, w := range res.worlds {
		p(" seed %d |", w.sc.Seed)
	}
	p("\n|---|%s\n", strings.Repeat("---|", len(res.worlds)))
	for o := range sc.Origins {
		p("| %s |", sim.OriginKey(o))
		for _, w := range res.worlds {
			g := sim.NewTruth(w.sc)
			blocked := ""
			if g.DatacenterBlocked(o) {
				blocked = " · **blocks datacenter**"
			}
			p(" %d KB%s · %s |", w.sc.Tiers.PageKB[o], blocked, w.sc.Origins[o])
		}
		p("\n")
	}
	p("\nSimulation: %d runs in %v.\n\n", res.runs, res.elapsed.Round(time.Second))

	n := len(sc.Origins)
	p("Spend per page is given two ways. **At the workload's mix** (judged): each origin's own dollars per page, averaged over the %d origins with equal weights, as the workload draws them (`sim.Spend.PerThousandAtMix`) — the price of the same basket of pages for every strategy. **As fetched**: dollars over the pages a strategy got, which rewards failing on the sites whose pages are heavy (a strategy that rarely gets a 400 KB page of an uncapped site looks cheap per page).\n\n", n)
	p("| seed | target: ours spends less per page (at the mix) than every peer, at equal or better goodput | ours: $ per 1,000 pages at the mix (as fetched), pages | the cheapest peer per page at the mix |\n|---|---|---|---|\n")
	row := func(name string, ms []sim.Metrics) {
		met, cheapest := spendTarget(ms, n)
		p("| %s | %s | $%.3f ($%.3f), %d | %s |\n", name, verdict(met), ms[0].Spend.PerThousandAtMix(n), ms[0].Spend.PerThousand(), ms[0].Successes, cheapest)
	}
	for _, w := range res.worlds {
		row(strconv.FormatUint(w.sc.Seed, 10), w.ms)
	}
	if len(res.worlds) > 1 {
		row("all (pooled)", merged(res.worlds))
	}
	p("\n")
	if len(res.worlds) > 1 {
		p("#### All seeds, pooled\n\n")
		writeSpendTable(p, merged(res.worlds), n)
	}
	for _, w := range res.worlds {
		p("#### Seed %d\n\n", w.sc.Seed)
		writeSpendTable(p, w.ms, n)
	}
}

// writeSpendTable is the spend table of ms (n origins), the informed oracle then the clairvoyant
// one last.
func writeSpendTable(p func(string, ...any), ms []sim.Metrics, n int) {
	informed := ms[len(ms)-2]
	p("| strategy | goodput (pages) | ÷ informed oracle | $ per 1,000 pages at the mix | $ per 1,000 pages as fetched | spend | GB datacenter | GB residential | residential share of bytes | attempts through residential | wasted attempts |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, m := range ms {
		s := m.Spend
		p("| %s | %d | %.2f | $%.3f | $%.3f | $%.2f | %.2f | %.2f | %.0f %% | %d | %d |\n", m.Strategy, m.Successes, ratio(m, informed),
			s.PerThousandAtMix(n), s.PerThousand(), s.Total(), float64(s.Bytes[0])/1e9, float64(s.Bytes[1])/1e9, 100*s.PremiumShare(), s.Attempts[1], m.Wasted())
	}
	p("\n")
}

// onlySpend runs the spend world alone: its section goes to stdout, or with write replaces the
// spend section of out (up to the next second-level heading), or is added before the
// measurements when out has none.
func onlySpend(cfg simConfig, write bool, out string) error {
	res, err := runSpend(cfg)
	if err != nil {
		return err
	}
	var b strings.Builder
	writeSpend(func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }, res)
	return printOrSplice(write, out, b.String(), spliceSection(out, spendHeading, "spend"))
}

// spliceSection returns the splice that replaces the section under heading in out's text (up to
// the next second-level heading), or adds it before the measurements when there is none.
func spliceSection(out, heading, name string) func(s, text string) (string, error) {
	return spliceSectionBefore(out, heading, name, "## Overhead:")
}

// spliceSectionBefore is spliceSection adding the section before the heading before instead.
func spliceSectionBefore(out, heading, name, before string) func(s, text string) (string, error) {
	return func(s, text string) (string, error) {
		if i := strings.Index(s, heading); i >= 0 {
			rest := s[i+len(heading):]
			if j := strings.Index(rest, "\n## "); j >= 0 {
				return s[:i] + text + rest[j+1:], nil
			}
			return s[:i] + text, nil
		}
		i := strings.Index(s, before)
		if i < 0 {
			return "", fmt.Errorf("%s has neither a %s section nor %q to put one before: run the whole of benchall", out, name, strings.TrimSpace(before))
		}
		log.Printf("adding the %s section to %s", name, out)
		return s[:i] + text + s[i:], nil
	}
}
