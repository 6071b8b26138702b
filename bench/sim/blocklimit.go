package sim

import (
	"fmt"
	"time"
)

// Limiters whose block outlasts their period (issue 35), as Cloudflare's rate-limiting rules work:
// they count an IP's requests over a period (10 s – 1 h there) and, once the count reaches the
// rule's rate, block the IP for a separate mitigation duration whatever it sends meanwhile; the
// Retry-After a client sees is what is left of the block, not the period. AWS WAF's rate-based
// rules count over windows of 1–10 min. A client that learns its pace as "so many per Retry-After"
// holds a 30-a-minute site blocking for 10 min to a tenth of its capacity.

// BlockLimit is such a limiter of one origin, per exit: Requests per Period, counted from a
// period's first request (a fixed window per exit, anchored where the exit's counting starts);
// the request past them is refused and starts a block of Block, during which every request is
// refused (429, with Retry-After what is left of the block unless the origin sends none) and
// none counts; after the block, counting starts afresh. The zero value (Requests 0) is no limiter.
type BlockLimit struct {
	Requests      int
	Period, Block time.Duration
}

// String describes b: "30/1 min, block 10 min".
func (b BlockLimit) String() string {
	unit := func(d time.Duration) string {
		if d%time.Minute == 0 {
			return fmt.Sprintf("%d min", d/time.Minute)
		}
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%d/%s, block %s", b.Requests, unit(b.Period), unit(b.Block))
}

// blockState is one pair's count under its origin's BlockLimit.
type blockState struct {
	from  time.Time // the period's first request; zero before any
	count int       // requests counted in the period
	until time.Time // the block's end; zero or past when not blocked
}

// overBlock is overCap for an origin with a BlockLimit: whether pair p's request at now is
// refused, and how long until it would not be — what is left of the block; for a request that
// would start one, the block itself, or without count (a look ahead: Peek, Foresee, ReadyAt) the
// end of the period, when a request would be taken again without starting a block.
func (g *Truth) overBlock(p int, b BlockLimit, now time.Time, count bool) (time.Duration, bool) {
	st := &g.blocks[p]
	if now.Before(st.until) {
		return st.until.Sub(now), true
	}
	c := st.count
	if st.from.IsZero() || !now.Before(st.from.Add(b.Period)) {
		c = 0
		if count {
			st.from = now
		}
	}
	if c >= b.Requests {
		if !count {
			return st.from.Add(b.Period).Sub(now), true
		}
		st.until, st.from, st.count = now.Add(b.Block), time.Time{}, 0
		return b.Block, true
	}
	if count {
		st.count = c + 1
	}
	return 0, false
}

// crawlLimitOrigins are the crawl-limits world's origins: six limiters whose block differs from
// their period (periods 10 s – 10 min, blocks 1 min – 30 min, two without Retry-After), the round-1
// world's 12-a-minute clock cap, and a site without a cap.
var crawlLimitOrigins = []Origin{
	{Block: BlockLimit{30, time.Minute, 10 * time.Minute}},
	{Block: BlockLimit{10, 10 * time.Second, time.Minute}},
	{Block: BlockLimit{20, time.Minute, 5 * time.Minute}, NoRetryAfter: true},
	{Block: BlockLimit{100, 10 * time.Minute, 30 * time.Minute}},
	{Block: BlockLimit{50, 5 * time.Minute, 20 * time.Minute}},
	{Block: BlockLimit{6, 10 * time.Second, 2 * time.Minute}, NoRetryAfter: true},
	{Cap: 12},
	{},
}

// CrawlLimitsWorld is the round-1 world (its exits, workers, latencies, bans of 10–40 min) for
// seed, with crawlLimitOrigins for its 8 origins: caps whose block outlasts their period. The
// informed oracle knows each pair's count and block (Truth.Foresee, Truth.ReadyAt) as it knows a
// cap's window, so it never starts a block.
func CrawlLimitsWorld(seed uint64) Scenario {
	sc := Round1World()
	sc.Name, sc.Seed = "crawl-limits world", seed
	sc.Origins = append([]Origin(nil), crawlLimitOrigins...)
	return sc
}
