package sim

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Kind is what an exit is, in the ground truth.
type Kind uint8

// The kinds of exits.
const (
	Healthy  Kind = iota // rate-capped per origin, sometimes banned per origin for a while
	Dead                 // its gateway refuses connections: every attempt is refused at once
	AuthFail             // it answers every request 407
	Flaky                // like Healthy, but each attempt times out with probability FlakyTimeout
)

var kindNames = [...]string{"healthy", "dead", "auth", "flaky"}

func (k Kind) String() string { return kindNames[k] }

// Origin is one site of the ground truth: what it tolerates from one exit (one IP), how it says
// so, and how it bans.
type Origin struct {
	// Cap is how many requests a minute the site takes from one exit before it answers 429; 0 means
	// no cap.
	Cap int
	// Sliding makes the cap count the requests it accepted in the last 60 s (a sliding log: a
	// request it refused does not count); otherwise it counts every request of the clock minute,
	// and the count starts again at each minute.
	Sliding bool
	// NoRetryAfter makes its 429s say nothing of when to come back; otherwise they carry
	// Retry-After in whole seconds, rounded up: until the clock minute ends, or until the oldest
	// request of the sliding window leaves it.
	NoRetryAfter bool
	// PlainBans makes its bans answer a plain 403 (nginx's "403 Forbidden" page, no challenge)
	// instead of Cloudflare's challenge page.
	PlainBans bool
	// SoftBans makes its bans answer 200 with a block page of its own size and title, no vendor
	// marker (softblock.go), instead of Cloudflare's challenge page.
	SoftBans bool
	// HTTPS makes its requests go through a CONNECT tunnel: the proxy's own refusals then come as
	// its answer to the CONNECT, not as a response.
	HTTPS bool
	// ForbiddenShare is the share of its requests for a path it answers 403 to every client (the
	// plain 403 of its bans): the site's answer, not a ban. It trips nothing in the ground truth and
	// counts apart, neither as goodput nor as waste.
	ForbiddenShare float64
	// Hardening makes its WAF lengthen each repeat ban of an IP: a pair's k-th ban lasts
	// Hardening^(k−1) times the length drawn for it, at most Scenario.HardenMax (fail2ban's
	// bantime.increment). 0 or 1: every ban lasts what was drawn.
	Hardening float64
	// Block, when its Requests is set, is a limiter whose block outlasts its period (blocklimit.go)
	// in place of Cap: Requests per Period from one exit, then every request refused for Block.
	Block BlockLimit
}

// String describes o in a few words: "12/min clock · Retry-After · challenge · http".
func (o Origin) String() string {
	s := "no cap"
	if o.Block.Requests > 0 {
		s = o.Block.String() + map[bool]string{false: " · Retry-After", true: " · no Retry-After"}[o.NoRetryAfter]
	} else if o.Cap > 0 {
		s = strconv.Itoa(o.Cap) + "/min " + map[bool]string{false: "clock", true: "sliding"}[o.Sliding]
		s += map[bool]string{false: " · Retry-After", true: " · no Retry-After"}[o.NoRetryAfter]
	}
	s += map[bool]string{false: " · challenge", true: " · plain 403"}[o.PlainBans && !o.SoftBans]
	if o.SoftBans {
		s = strings.TrimSuffix(s, " · challenge") + " · 200 block page"
	}
	s += map[bool]string{false: " · http", true: " · https"}[o.HTTPS]
	if o.ForbiddenShare > 0 {
		s += " · " + strconv.Itoa(int(o.ForbiddenShare*100+0.5)) + " % to a path it forbids"
	}
	if o.Hardening > 1 {
		s += " · bans ×" + strconv.FormatFloat(o.Hardening, 'g', 3, 64) + " each repeat"
	}
	return s
}

// BanBand is one kind of ban episode: Weight of the episodes last Min..Max (uniform).
type BanBand struct {
	Weight   float64
	Min, Max time.Duration
}

// Scenario is the ground truth's shape. Durations are simulated time.
type Scenario struct {
	// Name names the world ("round-1 world", "round-2 world").
	Name     string
	Seed     uint64
	Duration time.Duration // simulated time of a run
	Workers  int           // concurrent requests
	Exits    int
	Dead     int // exits of each kind; the rest are Healthy
	Auth     int
	Flaky    int
	// FlakyTimeout is the probability that an attempt through a Flaky exit times out (any origin).
	FlakyTimeout float64
	// Origins are the sites, origin index o being Origins[o].
	Origins []Origin
	// BansPerHour is the mean number of ban episodes a Healthy or Flaky pair suffers an hour; an
	// episode's length is drawn from BanBands (by weight), and during it the origin answers the
	// pair a challenge page or, for an origin with PlainBans, a plain 403.
	BansPerHour float64
	BanBands    []BanBand
	// Denials is how many Healthy exits have a proxy whose ACL refuses one origin (squid's 403
	// ERR_ACCESS_DENIED, on every attempt of the run) while it serves the others.
	Denials int
	// StallsPerHour is the mean number of slow-body episodes a Healthy or Flaky pair suffers an
	// hour, each lasting StallMin..StallMax: the origin's answers come, but a 200's body trickles
	// through the exit below the body pace rule's minimum, so that every such attempt holds its
	// worker for StallTimeout more and ends in a body-read failure.
	StallsPerHour      float64
	StallMin, StallMax time.Duration
	StallTimeout       time.Duration
	// BurstsPerHour is the mean number of workload bursts an hour, over the whole run, each lasting
	// BurstMin..BurstMax, during which BurstShare of the requests are for the burst's origin.
	BurstsPerHour      float64
	BurstMin, BurstMax time.Duration
	BurstShare         float64
	// Timeout is what a timed-out attempt costs its worker (the client's header timeout).
	Timeout time.Duration
	// LatencyMin..LatencyMax is the latency of an attempt that reached the origin.
	LatencyMin, LatencyMax time.Duration
	// MaxRefusalWait caps how long a worker waits after its strategy refused to send (no exit
	// ready) before it takes its next request, whatever RetryIn said: a refusal costs no network
	// time, and a crawler with a queue of URLs over many origins moves on. At least 100 ms.
	MaxRefusalWait time.Duration

	// The round-3 dynamics (dynamics.go); their zero values leave a world without them.

	// SlowAll Healthy exits are slow for every origin, and SlowSome for SlowSomeOrigins origins
	// each (dealt per exit): an attempt through a slow pair that reaches its origin takes
	// SlowMin..SlowMax instead of LatencyMin..LatencyMax, and is served all the same.
	SlowAll, SlowSome int
	SlowSomeOrigins   int
	SlowMin, SlowMax  time.Duration
	// OutagesPerHour is the mean number of outages an origin suffers an hour, each lasting
	// OutageMin..OutageMax, during which it answers 503 to every exit.
	OutagesPerHour       float64
	OutageMin, OutageMax time.Duration
	// ChurnPerHour is the mean number of times an hour a Healthy or Flaky exit goes dead, each time
	// for ChurnMin..ChurnMax: its gateway refuses connections, then it comes back as it was.
	ChurnPerHour       float64
	ChurnMin, ChurnMax time.Duration
	// Subnet is how many exits share a subnet (dealt to a shuffled order; 0 or 1: none share);
	// SubnetBanShare is the probability that a pair's ban also bans, for the same origin and the
	// same window, every subnet-mate the origin hears from.
	Subnet         int
	SubnetBanShare float64
	// HardenMax caps a ban lengthened by an origin's Hardening.
	HardenMax time.Duration

	// Tiers, when set, makes the exits two tiers priced per GB and gives the origins page sizes
	// (spend.go, the spend world).
	Tiers *Tiers

	// Crawl, when set, makes the workload a finite crawl (crawl.go): each origin has a quota of
	// pages, and the run ends when every quota is served, or at Duration unfinished.
	Crawl *Crawl
}

// Round1World is the world of the first round's RESULTS.md, kept so that its figures stay
// reproducible: seed 1, 3 simulated hours, 48 workers, 40 exits (4 dead, 2 failing auth, 8 flaky),
// 8 origins each capping an exit at 12 requests a clock minute, bans of 10–40 min behind a
// challenge page, plain HTTP, no bursts, no proxy denials, no slow bodies.
func Round1World() Scenario {
	origins := make([]Origin, 8)
	for o := range origins {
		origins[o] = Origin{Cap: 12}
	}
	return Scenario{
		Name: "round-1 world", Seed: 1, Duration: 3 * time.Hour, Workers: 48, Exits: 40,
		Dead: 4, Auth: 2, Flaky: 8, FlakyTimeout: 0.3, Origins: origins,
		BansPerHour: 0.5, BanBands: []BanBand{{1, 10 * time.Minute, 40 * time.Minute}},
		Timeout: 15 * time.Second, LatencyMin: 200 * time.Millisecond, LatencyMax: time.Second,
		MaxRefusalWait: time.Second,
	}
}

// round2Caps are the per-exit caps dealt to the round-2 world's origins, requests a minute (0: no
// cap).
var round2Caps = []int{4, 6, 8, 10, 12, 15, 20, 30, 45, 60, 0, 0}

// Round2World is issue 13's world for seed: the round-1 world's size and exits, with 12 origins
// that differ — caps from 4 to 60 requests a minute per exit and two without, half of the capped
// ones counting over a sliding 60 s window and the others over the clock minute, three that send
// no Retry-After, half behind HTTPS, half banning with a plain 403 instead of a challenge page,
// one of those with a path it forbids to everyone (10 % of its requests) — and bans of 1–5 min,
// 10–40 min or 1–2 h; three exits whose proxy refuses one origin by ACL; slow-body episodes of
// 5–20 min on some pairs; and workload bursts, 3–10 min during which half the requests go to one
// origin. The seed deals the origins' traits as well as the episodes.
func Round2World(seed uint64) Scenario {
	sc := Round1World()
	sc.Name, sc.Seed = "round-2 world", seed
	sc.BanBands = []BanBand{
		{0.45, time.Minute, 5 * time.Minute},
		{0.40, 10 * time.Minute, 40 * time.Minute},
		{0.15, time.Hour, 2 * time.Hour},
	}
	sc.Denials = 3
	sc.StallsPerHour, sc.StallMin, sc.StallMax = 0.1, 5*time.Minute, 20*time.Minute
	// The body pace rule cuts a body that trickles below its minimum rate after its grace and one
	// window (5 s + 10 s), one that stalls after 15 s (transport's body pace defaults).
	sc.StallTimeout = 15 * time.Second
	sc.BurstsPerHour, sc.BurstMin, sc.BurstMax, sc.BurstShare = 2, 3*time.Minute, 10*time.Minute, 0.5

	// The traits are dealt from their own stream, so that the episodes' draws stay those of the
	// seed whatever the origins turn out to be.
	r := rand.New(rand.NewPCG(seed, 0x6f726967696e7300))
	n := len(round2Caps)
	sc.Origins = make([]Origin, n)
	caps := r.Perm(n)
	var capped []int
	for o := range sc.Origins {
		sc.Origins[o].Cap = round2Caps[caps[o]]
		if sc.Origins[o].Cap > 0 {
			capped = append(capped, o)
		}
	}
	r.Shuffle(len(capped), func(i, j int) { capped[i], capped[j] = capped[j], capped[i] })
	for i, o := range capped {
		sc.Origins[o].Sliding = i%2 == 0
	}
	r.Shuffle(len(capped), func(i, j int) { capped[i], capped[j] = capped[j], capped[i] })
	for _, o := range capped[:3] {
		sc.Origins[o].NoRetryAfter = true
	}
	perm := r.Perm(n)
	for i, o := range perm {
		sc.Origins[o].HTTPS = i%2 == 0
	}
	perm = r.Perm(n)
	for _, o := range perm[:n/2] {
		sc.Origins[o].PlainBans = true
	}
	sc.Origins[perm[0]].ForbiddenShare = 0.1
	return sc
}

// Round2Seeds are the seeds RESULTS.md reports the round-2 world for.
var Round2Seeds = []uint64{1, 2, 3, 4, 5}

// Epoch is the simulated instant a run starts at.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Window is a half-open interval [From, To) of simulated time.
type Window struct{ From, To time.Time }

// Contains reports whether t is in w.
func (w Window) Contains(t time.Time) bool { return !t.Before(w.From) && t.Before(w.To) }
