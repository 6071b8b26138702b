package sim

import (
	"math/rand/v2"
	"time"
)

// The finite crawl (issue 35). The endless workload gives a worker whose pick is refused another
// request, for any origin: a strategy that gives up on a hard site and pours its workers into the
// easy ones loses nothing there. A real crawl has a finite frontier per site and ends when the last
// site is done, so it is as fast as its slowest site. With Scenario.Crawl set:
//
//   - each origin o has Crawl.Pages[o] pages to fetch (its frontier);
//   - a worker takes a page of an origin drawn uniformly among those with pages left to take (not
//     served, not held by another worker), from its own seeded stream, then, for an origin with a
//     forbidden path, that path with probability ForbiddenShare (a URL the site answers 403 to
//     everyone: served, so it counts); the workload's bursts do not apply;
//   - a page counts when it is served (Result.Served); an attempt that is not served (a 429, a ban
//     page, a timeout…) or a pick the strategy refused gives the page back to the frontier, and a
//     refused worker waits RetryIn (at most Scenario.MaxRefusalWait) as in the endless run, then
//     draws again among the origins with pages left — not necessarily the one it drew before;
//   - a worker that finds no page to take (every page left is held by another worker) waits
//     MaxRefusalWait and looks again;
//   - the run ends when every origin's pages are served, or at Scenario.Duration (the cap)
//     unfinished.
//
// Quotas are honoured exactly: a page is held by one worker at a time, so no origin is served more
// pages than its quota. A run is deterministic for its seed, as an endless one is.

// Crawl is a finite crawl's frontier: Pages[o] pages of origin o to fetch.
type Crawl struct {
	Pages []int
}

// CrawlResult is what a finite crawl got done (Metrics.Crawl).
type CrawlResult struct {
	// Finished says every origin's pages were served before the cap.
	Finished bool
	// Makespan is the time from the start to the last page served, or the cap when unfinished.
	Makespan time.Duration
	// Quota and Pages are, by origin, the pages to fetch and those served.
	Quota, Pages []int
	// Done is, by origin, when its last page was served (from the start); 0 while unfinished.
	Done []time.Duration
	// Idle is worker time spent waiting after refused picks — every refusal is for a page of a site
	// that still had pages left. Drain is worker time spent waiting with no page to take.
	Idle, Drain time.Duration
}

// Left returns the pages not served, over every origin.
func (c CrawlResult) Left() int {
	n := 0
	for o := range c.Quota {
		n += c.Quota[o] - c.Pages[o]
	}
	return n
}

// Bound returns how long origin o was unfinished: until its last page, or the whole makespan.
func (c CrawlResult) Bound(o int) time.Duration {
	if c.Pages[o] == c.Quota[o] {
		return c.Done[o]
	}
	return c.Makespan
}

// PerHour returns origin o's pages an hour while it was unfinished.
func (c CrawlResult) PerHour(o int) float64 {
	if b := c.Bound(o); b > 0 {
		return float64(c.Pages[o]) / b.Hours()
	}
	return 0
}

// crawlState is a finite crawl's frontier during a run. The scheduler runs one worker at a time,
// so it needs no lock; its methods do nothing on a nil state (an endless run).
type crawlState struct {
	origins  []Origin
	quota    []int
	served   []int
	held     []int       // by origin: pages held by workers
	done     []time.Time // by origin, zero while unfinished
	holds    []int       // by worker: the origin of the page it holds, −1 for none
	left     int         // origins not finished
	last     time.Time   // when the last page so far was served
	open     []int       // scratch: origins with pages to take
	wait     time.Duration
	idleTime time.Duration
	drained  time.Duration
}

func newCrawlState(sc Scenario) *crawlState {
	n := len(sc.Origins)
	c := &crawlState{
		origins: sc.Origins, quota: make([]int, n), served: make([]int, n), held: make([]int, n),
		done: make([]time.Time, n), holds: make([]int, sc.Workers), open: make([]int, 0, n),
		wait: max(sc.MaxRefusalWait, 100*time.Millisecond), last: Epoch,
	}
	copy(c.quota, sc.Crawl.Pages)
	for o, q := range c.quota {
		if q > 0 {
			c.left++
		} else {
			c.done[o] = Epoch
		}
	}
	for w := range c.holds {
		c.holds[w] = -1
	}
	return c
}

// finished reports whether every origin's pages are served.
func (c *crawlState) finished() bool { return c != nil && c.left == 0 }

// take gives worker w a page of an origin drawn from r among those with pages to take, as a
// request; its Origin is −1 when there is none.
func (c *crawlState) take(w int, r *rand.Rand) Request {
	c.open = c.open[:0]
	for o, q := range c.quota {
		if q-c.served[o]-c.held[o] > 0 {
			c.open = append(c.open, o)
		}
	}
	if len(c.open) == 0 {
		return Request{Origin: -1}
	}
	o := c.open[r.IntN(len(c.open))]
	c.held[o]++
	c.holds[w] = o
	q := Request{Origin: o}
	if f := c.origins[o].ForbiddenShare; f > 0 && r.Float64() < f {
		q.Forbidden = true
	}
	return q
}

// serve counts worker w's page of origin o when r served it, at now.
func (c *crawlState) serve(w, o int, r Result, now time.Time) {
	if c == nil || c.holds[w] != o || !r.Served() {
		return
	}
	c.holds[w] = -1
	c.held[o]--
	c.served[o]++
	if c.served[o] == c.quota[o] {
		c.done[o], c.last = now, now
		c.left--
	}
}

// giveBack returns the page worker w holds, if any, to the frontier.
func (c *crawlState) giveBack(w int) {
	if c == nil {
		return
	}
	if o := c.holds[w]; o >= 0 {
		c.held[o]--
		c.holds[w] = -1
	}
}

// idle counts d of worker time waiting after a refused pick.
func (c *crawlState) idle(d time.Duration) {
	if c != nil {
		c.idleTime += d
	}
}

// drain counts and returns the wait of a worker that found no page to take.
func (c *crawlState) drain() time.Duration {
	c.drained += c.wait
	return c.wait
}

// result is the crawl's result, end being the cap.
func (c *crawlState) result(end time.Time) CrawlResult {
	res := CrawlResult{
		Finished: c.left == 0, Makespan: end.Sub(Epoch),
		Quota: c.quota, Pages: c.served, Done: make([]time.Duration, len(c.quota)),
		Idle: c.idleTime, Drain: c.drained,
	}
	if res.Finished {
		res.Makespan = c.last.Sub(Epoch)
	}
	for o, t := range c.done {
		if !t.IsZero() {
			res.Done[o] = t.Sub(Epoch)
		}
	}
	return res
}
