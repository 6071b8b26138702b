package sim

import (
	"reflect"
	"testing"
	"time"
)

// smallCrawl is smallRound1, smallRound2 or smallRound3 as a crawl of pages pages a site, capped
// at limit.
func smallCrawl(sc Scenario, pages int, limit time.Duration) Scenario {
	sc = CrawlOf(sc, pages)
	sc.Duration = limit
	return sc
}

// crawlStrategies are the strategies the crawl tests run: ours, two peers and both oracles.
func crawlStrategies() []Strategy {
	return []Strategy{Ours(), PerPairBreaker(), RoundRobin(), InformedOracle(), Oracle()}
}

// checkQuotas checks a crawl's counts: no origin served past its quota, a finished origin served
// exactly its quota and has a completion time, and every attempt served is one page counted.
func checkQuotas(t *testing.T, name string, m Metrics) {
	t.Helper()
	c := m.Crawl
	pages := 0
	for o := range c.Quota {
		pages += c.Pages[o]
		if c.Pages[o] > c.Quota[o] {
			t.Errorf("%s: origin %d served %d pages, quota %d", name, o, c.Pages[o], c.Quota[o])
		}
		if done := c.Pages[o] == c.Quota[o]; done != (c.Done[o] > 0) {
			t.Errorf("%s: origin %d served %d of %d pages, Done = %v", name, o, c.Pages[o], c.Quota[o], c.Done[o])
		}
		if c.Done[o] > c.Makespan {
			t.Errorf("%s: origin %d done at %v, after the makespan %v", name, o, c.Done[o], c.Makespan)
		}
	}
	if served := m.Successes + m.Site403; served != pages {
		t.Errorf("%s: %d attempts served, %d pages counted", name, served, pages)
	}
	if c.Finished != (c.Left() == 0) {
		t.Errorf("%s: Finished = %v with %d pages left", name, c.Finished, c.Left())
	}
}

// TestCrawlOraclesFinish checks that both oracles finish every site of a small crawl in each
// round's world, with quotas honoured exactly, and that every strategy honours them too.
func TestCrawlOraclesFinish(t *testing.T) {
	for _, sc := range []Scenario{smallCrawl(smallRound1(), 300, 2*time.Hour), smallCrawl(smallRound2(1), 150, 2*time.Hour), smallCrawl(smallRound3(2), 150, 2*time.Hour)} {
		for _, st := range crawlStrategies() {
			m, err := Run(sc, st)
			if err != nil {
				t.Fatal(err)
			}
			name := sc.Name + ", " + st.Name
			checkQuotas(t, name, m)
			if st.Name == InformedOracleName || st.Name == OracleName {
				if !m.Crawl.Finished {
					t.Errorf("%s: not finished, %d pages left at %v", name, m.Crawl.Left(), m.Crawl.Makespan)
				}
				if m.RateLimited+m.Blocked+m.Banned403+m.SoftBlocked != 0 {
					t.Errorf("%s: %d 429s and %d ban answers, want none", name, m.RateLimited, m.Blocked+m.Banned403+m.SoftBlocked)
				}
			}
			if want := time.Duration(sc.Workers) * m.Crawl.Makespan; m.WorkerTime != want {
				t.Errorf("%s: WorkerTime = %v, want workers × makespan %v", name, m.WorkerTime, want)
			}
		}
	}
}

// TestCrawlDeterministic checks that a crawl gives the same figures twice for its seed, and other
// figures for another seed.
func TestCrawlDeterministic(t *testing.T) {
	for _, st := range []Strategy{Ours(), PerPairBreaker(), InformedOracle()} {
		a, err := Run(smallCrawl(smallRound3(1), 100, time.Hour), st)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Run(smallCrawl(smallRound3(1), 100, time.Hour), st)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs differ:\n%+v\n%+v", st.Name, a, b)
		}
		c, err := Run(smallCrawl(smallRound3(2), 100, time.Hour), st)
		if err != nil {
			t.Fatal(err)
		}
		if reflect.DeepEqual(a.Crawl, c.Crawl) {
			t.Errorf("%s: seeds 1 and 2 give the same crawl %+v", st.Name, a.Crawl)
		}
	}
}

// TestCrawlStopsAtCap checks that a crawl too large for its cap stops there unfinished, with its
// pages left counted.
func TestCrawlStopsAtCap(t *testing.T) {
	sc := smallCrawl(smallRound1(), 100_000, 10*time.Minute)
	m, err := Run(sc, InformedOracle())
	if err != nil {
		t.Fatal(err)
	}
	checkQuotas(t, "informed oracle", m)
	c := m.Crawl
	if c.Finished || c.Makespan != 10*time.Minute || c.Left() == 0 {
		t.Errorf("Crawl = finished %v, makespan %v, %d left; want unfinished at the 10 min cap with pages left", c.Finished, c.Makespan, c.Left())
	}
	for o := range c.Quota {
		if c.Done[o] != 0 || c.Bound(o) != c.Makespan {
			t.Errorf("origin %d: Done %v, Bound %v; want 0 and the makespan", o, c.Done[o], c.Bound(o))
		}
	}
}

// TestCrawlRefusalsIdle checks that a strategy's refused picks count as idle worker time in a
// crawl, and that the oracles' idle time stays below the workers' time.
func TestCrawlRefusalsIdle(t *testing.T) {
	sc := smallCrawl(smallRound1(), 300, 2*time.Hour)
	m, err := Run(sc, PerPairBreaker())
	if err != nil {
		t.Fatal(err)
	}
	if m.Refusals > 0 && m.Crawl.Idle < time.Duration(m.Refusals)*100*time.Millisecond {
		t.Errorf("%d refusals, idle %v: want at least 100 ms each", m.Refusals, m.Crawl.Idle)
	}
	if m.Crawl.Idle+m.Crawl.Drain > m.WorkerTime+time.Duration(sc.Workers)*sc.MaxRefusalWait {
		t.Errorf("idle %v + drain %v exceed the workers' time %v", m.Crawl.Idle, m.Crawl.Drain, m.WorkerTime)
	}
}

// TestCrawlLimitsInformedNeverBlocked checks that the informed oracle knows the blocks that outlast
// their period: in the crawl-limits world it never starts one, and finishes.
func TestCrawlLimitsInformedNeverBlocked(t *testing.T) {
	sc := CrawlOf(CrawlLimitsWorld(1), 400)
	sc.Workers, sc.Exits, sc.Dead, sc.Auth, sc.Flaky, sc.Duration = 8, 12, 1, 1, 2, 2*time.Hour
	m, err := Run(sc, InformedOracle())
	if err != nil {
		t.Fatal(err)
	}
	checkQuotas(t, "informed oracle", m)
	if !m.Crawl.Finished || m.RateLimited != 0 {
		t.Errorf("informed oracle: finished %v, %d 429s; want finished with none", m.Crawl.Finished, m.RateLimited)
	}
	sc.Exits, sc.Dead, sc.Auth, sc.Flaky = 4, 0, 0, 0 // fewer exits, so that round-robin goes past the rates
	r, err := Run(sc, RoundRobin())
	if err != nil {
		t.Fatal(err)
	}
	checkQuotas(t, "round-robin", r)
	if r.RateLimited == 0 {
		t.Errorf("round-robin: no 429s from the blocking sites")
	}
}
