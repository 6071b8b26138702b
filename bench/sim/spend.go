package sim

import (
	"math"
	"math/rand/v2"
)

// The spend world (issue 25): what a crawl costs when exits are priced per gigabyte. Its exits
// come in two tiers — cheap datacenter exits (tier 0) and premium residential ones (tier 1), each
// metered per GB of the bytes it carries — and its origins serve pages of their own sizes. Sites
// ban datacenter IPs far more than residential ones, and a few block datacenter ranges outright,
// so a crawl needs the residential tier somewhere; the question is how much of its traffic goes
// there. Every strategy's spend is counted by the simulation itself, from each attempt's answer,
// its origin's page size and its exit's tier (Spend), not by the pool.

// Prices of the spend world, US dollars per GB (10⁹ bytes) carried, both directions. Residential:
// Proxynade's "Premium Residential" at $5.00/GB, billed per transferred byte
// (https://proxynade.net/blogs/how-per-gb-proxy-pricing-works, 2026-06-12), within the $3–8/GB
// most providers ask. Datacenter: $1.00/GB, a fifth of it — the ratio of Scrapfly's bandwidth
// prices, 2 credits/MB through datacenter proxies against 10 through residential ones
// (https://scrapfly.io/docs/cloud-browser-api/billing). What counts is what crosses the gateway:
// headers, TLS, challenge pages and failed attempts included
// (https://proxydata.io/knowledge/per-gb-pricing).
const (
	DatacenterPerGB  = 1.00
	ResidentialPerGB = 5.00
)

// Tiers makes a world's exits two tiers priced per GB, and its origins' pages sizes of their own.
// A Scenario without Tiers has one tier and no prices: Spend counts nothing.
type Tiers struct {
	// Residential is how many exits are residential (tier 1), dealt by the seed; the rest are
	// datacenter exits (tier 0).
	Residential int
	// PerGB is each tier's price, dollars per GB.
	PerGB [2]float64
	// ResidentialBanShare thins the ban episodes of residential pairs: each is kept with this
	// probability (residential IPs are banned far less than datacenter ones).
	ResidentialBanShare float64
	// BlockedOrigins is how many origins block every datacenter exit for the whole run (a WAF rule
	// on datacenter address ranges, answered with its challenge or block page), dealt by the seed
	// among the origins that ban with a challenge page.
	BlockedOrigins int
	// PageKB is each origin's page size, KB (10³ bytes) of response body, by origin.
	PageKB []int
}

// spendPageKB are the page sizes dealt to the spend world's origins, KB: from a small API-like
// page to a heavy product page (HTML alone, compressed as sent: HTTP Archive's median page sends
// about 30 KB of HTML; listing and product pages run to hundreds).
var spendPageKB = []int{15, 25, 35, 50, 60, 80, 100, 120, 150, 200, 300, 400}

// SpendWorld is the spend world for seed: the round-2 world of the same seed (its origins' caps,
// windows, Retry-After, HTTPS and ban pages, its denials, slow bodies and bursts), whose 40 exits
// are 28 datacenter exits (tier 0, $1/GB) and 12 residential ones (tier 1, $5/GB), the kinds (dead,
// failing auth, flaky) dealt across both; residential pairs keep a quarter of the ban episodes a
// datacenter pair draws; 3 origins block every datacenter exit for the whole run; and each origin's
// page weighs 15–400 KB.
func SpendWorld(seed uint64) Scenario {
	sc := Round2World(seed)
	sc.Name = "spend world"
	r := rand.New(rand.NewPCG(seed, 0x7370656e64000000))
	pages := make([]int, len(sc.Origins))
	for o, i := range r.Perm(len(sc.Origins)) {
		pages[o] = spendPageKB[i%len(spendPageKB)]
	}
	sc.Tiers = &Tiers{
		Residential: 12, PerGB: [2]float64{DatacenterPerGB, ResidentialPerGB},
		ResidentialBanShare: 0.25, BlockedOrigins: 3, PageKB: pages,
	}
	return sc
}

// SpendSeeds are the seeds RESULTS.md reports the spend world for.
var SpendSeeds = []uint64{1, 2, 3, 4, 5}

// Tier returns exit e's tier: 1 for a residential exit, 0 otherwise (and in a world without
// Tiers). Tiers are dealt from the seed's own stream, so the exits' kinds stay those of the world
// the spend world is built on.
func (g *Truth) Tier(e int) int {
	if g.tier == nil {
		return 0
	}
	return g.tier[e]
}

// DatacenterBlocked reports whether origin o blocks every datacenter exit for the whole run.
func (g *Truth) DatacenterBlocked(o int) bool { return g.blocked != nil && g.blocked[o] }

// tiers deals the spend world's tiers into g: which exits are residential, which origins block
// the datacenter ones (a ban of every datacenter pair for the whole run), and which of the
// residential pairs' ban episodes stay. It runs after every other draw, from streams of its own.
func (g *Truth) tiers() {
	t := g.sc.Tiers
	if t == nil {
		return
	}
	r := rand.New(rand.NewPCG(g.sc.Seed, 0x7469657273000000))
	g.tier = make([]int, g.sc.Exits)
	for _, e := range r.Perm(g.sc.Exits)[:min(t.Residential, g.sc.Exits)] {
		g.tier[e] = 1
	}
	var challenging []int
	for o, org := range g.sc.Origins {
		if !org.PlainBans {
			challenging = append(challenging, o)
		}
	}
	r.Shuffle(len(challenging), func(i, j int) { challenging[i], challenging[j] = challenging[j], challenging[i] })
	g.blocked = make([]bool, g.no)
	for _, o := range challenging[:min(t.BlockedOrigins, len(challenging))] {
		g.blocked[o] = true
	}
	whole := []Window{{Epoch, Epoch.Add(g.sc.Duration)}}
	same := len(g.own) == len(g.bans) && (len(g.own) == 0 || &g.own[0] == &g.bans[0])
	for p := range g.bans {
		e, o := p/g.no, p%g.no
		switch {
		case g.tier[e] == 0 && g.blocked[o] && g.reaches(p):
			g.bans[p] = whole
		case g.tier[e] == 1:
			var kept []Window
			for _, w := range g.bans[p] {
				if r.Float64() < t.ResidentialBanShare {
					kept = append(kept, w)
				}
			}
			g.bans[p] = kept
		}
	}
	if same {
		g.own = g.bans
	}
}

// The bytes an attempt carries besides its page, in the spend world's model: the request (a GET
// with a crawler's headers, through the proxy), a TLS connection's share of an HTTPS attempt
// (handshakes amortised over kept-alive connections, and record framing), and the answers other
// than a page: Cloudflare's challenge page (the 7.9 KB of transport's fixture), a plain 403, 429
// or 503 page, squid's error page, and a slow body cut by the body pace rule (what trickled in
// before it, at most the page).
const (
	requestBytes   = 800
	tlsBytes       = 1500
	challengeBytes = 7900
	smallPageBytes = 600
	proxyPageBytes = 3500
	slowBodyBytes  = 30_000
)

// Bytes is what attempt r through a proxy for origin o carries, both directions, as the provider
// meters it. A refused connection and a 407 carry nothing the provider bills.
func (t *Tiers) Bytes(o int, r Result) int64 {
	var got int64
	switch r.Answer {
	case Refused, ProxyAuth:
		return 0
	case OK:
		got = int64(t.PageKB[o]) * 1000
	case Challenge:
		got = challengeBytes
	case Banned403, Site403, RateLimited, Unavailable:
		got = smallPageBytes
	case ProxyDenied:
		got = proxyPageBytes
	case SlowBody:
		got = min(int64(t.PageKB[o])*1000, slowBodyBytes)
	case Timeout:
	}
	n := requestBytes + got
	if r.HTTPS {
		n += tlsBytes
	}
	return n
}

// Spend is what a strategy's attempts cost in a world with Tiers, by tier, and by origin.
type Spend struct {
	Bytes    [2]int64   // carried through each tier's exits
	Dollars  [2]float64 // what that cost
	Attempts [2]int     // attempts through each tier
	Pages    [2]int     // of them, pages served (goodput)
	// ByOrigin is the dollars spent on each origin and the pages it served, by origin index.
	ByOrigin []OriginSpend
}

// OriginSpend is what one origin's attempts cost and the pages they got.
type OriginSpend struct {
	Dollars float64
	Pages   int
}

// count adds attempt r through an exit of tier for origin o.
func (s *Spend) count(t *Tiers, tier, o int, r Result) {
	if t == nil {
		return
	}
	b := t.Bytes(o, r)
	d := float64(b) / 1e9 * t.PerGB[tier]
	s.Bytes[tier] += b
	s.Dollars[tier] += d
	s.Attempts[tier]++
	for len(s.ByOrigin) <= o {
		s.ByOrigin = append(s.ByOrigin, OriginSpend{})
	}
	s.ByOrigin[o].Dollars += d
	if r.OK() {
		s.Pages[tier]++
		s.ByOrigin[o].Pages++
	}
}

// Add adds n to s.
func (s *Spend) Add(n Spend) {
	for i := range s.Bytes {
		s.Bytes[i] += n.Bytes[i]
		s.Dollars[i] += n.Dollars[i]
		s.Attempts[i] += n.Attempts[i]
		s.Pages[i] += n.Pages[i]
	}
	for o, x := range n.ByOrigin {
		for len(s.ByOrigin) <= o {
			s.ByOrigin = append(s.ByOrigin, OriginSpend{})
		}
		s.ByOrigin[o].Dollars += x.Dollars
		s.ByOrigin[o].Pages += x.Pages
	}
}

// PerThousandAtMix is the dollars per thousand pages at the workload's mix: each of the n origins'
// own dollars per page, averaged with equal weights (the workload draws origins uniformly but for
// its bursts), times 1,000. PerThousand divides by the pages a strategy happened to get, so a
// strategy that fails more on the sites with heavy pages looks cheaper per page; this one prices
// the same basket for everyone. +Inf when an origin that cost something served no page; 0 with
// no spend.
func (s Spend) PerThousandAtMix(n int) float64 {
	if n == 0 || s.Total() == 0 {
		return 0
	}
	var sum float64
	for o := range n {
		var x OriginSpend
		if o < len(s.ByOrigin) {
			x = s.ByOrigin[o]
		}
		if x.Pages == 0 {
			if x.Dollars > 0 {
				return math.Inf(1)
			}
			continue
		}
		sum += x.Dollars / float64(x.Pages)
	}
	return sum / float64(n) * 1000
}

// Total is the dollars spent over both tiers.
func (s Spend) Total() float64 { return s.Dollars[0] + s.Dollars[1] }

// PerThousand is the dollars spent per thousand pages served: 0 when none was.
func (s Spend) PerThousand() float64 {
	pages := s.Pages[0] + s.Pages[1]
	if pages == 0 {
		return 0
	}
	return s.Total() / float64(pages) * 1000
}

// PremiumShare is the share of the bytes that went through residential exits.
func (s Spend) PremiumShare() float64 {
	all := s.Bytes[0] + s.Bytes[1]
	if all == 0 {
		return 0
	}
	return float64(s.Bytes[1]) / float64(all)
}
