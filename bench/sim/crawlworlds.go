package sim

import "time"

// The crawl worlds: each world of the bench as a finite crawl (crawl.go) of the same number of
// pages on every site, as a crawl of N pages a site is written. The quotas are sized so that the
// informed oracle finishes in 1–4 h of simulated time (measured on seeds 1–5; docs/decisions.md,
// "Finite crawls (issue 35): the yardstick"), so that a crawl's makespan is set by its slowest
// site's capacity, and a run stops at CrawlCap.

// CrawlCap is the simulated time after which a crawl stops unfinished: 12 h.
const CrawlCap = 12 * time.Hour

// The pages a site of each crawl world.
const (
	// Round1CrawlPages: 8 sites capping each exit at 12 a minute.
	Round1CrawlPages = 40_000
	// Round2CrawlPages and Round3CrawlPages: the 4-a-minute site binds.
	Round2CrawlPages = 16_000
	Round3CrawlPages = 16_000
	// CrawlLimitsPages: the sites whose blocks outlast their period.
	CrawlLimitsPages = 30_000
	// GatewayCrawlPages: the gateway world's 200 IPs, reached through 20 lines.
	GatewayCrawlPages = 16_000
	// SpendCrawlPages: the round-2 world's sites, 3 of them blocking the datacenter tier.
	SpendCrawlPages = 16_000
)

// CrawlOf returns sc as a finite crawl of pages pages on every origin: its episodes drawn over
// CrawlCap, which ends the run unfinished, and its workload's bursts gone (a crawl's frontier
// decides which site a worker takes).
func CrawlOf(sc Scenario, pages int) Scenario {
	sc.Duration = CrawlCap
	sc.BurstsPerHour = 0
	quota := make([]int, len(sc.Origins))
	for o := range quota {
		quota[o] = pages
	}
	sc.Crawl = &Crawl{Pages: quota}
	return sc
}

// Round1Crawl is the round-1 world, with seed, as a crawl of Round1CrawlPages pages a site.
func Round1Crawl(seed uint64) Scenario {
	sc := Round1World()
	sc.Seed = seed
	return CrawlOf(sc, Round1CrawlPages)
}

// Round2Crawl is the round-2 world of seed as a crawl of Round2CrawlPages pages a site.
func Round2Crawl(seed uint64) Scenario { return CrawlOf(Round2World(seed), Round2CrawlPages) }

// Round3Crawl is the round-3 world of seed as a crawl of Round3CrawlPages pages a site.
func Round3Crawl(seed uint64) Scenario { return CrawlOf(Round3World(seed), Round3CrawlPages) }

// CrawlLimitsCrawl is the crawl-limits world of seed as a crawl of CrawlLimitsPages pages a site.
func CrawlLimitsCrawl(seed uint64) Scenario {
	return CrawlOf(CrawlLimitsWorld(seed), CrawlLimitsPages)
}

// GatewayCrawl is the gateway world of seed as a crawl of GatewayCrawlPages pages a site.
func GatewayCrawl(seed uint64) Scenario { return CrawlOf(GatewayWorld(seed), GatewayCrawlPages) }

// SpendCrawl is the spend world of seed as a crawl of SpendCrawlPages pages a site.
func SpendCrawl(seed uint64) Scenario { return CrawlOf(SpendWorld(seed), SpendCrawlPages) }
