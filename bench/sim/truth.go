package sim

import (
	"math/rand/v2"
	"slices"
	"time"
)

// Answer is what the ground truth answers one attempt.
type Answer uint8

// The answers.
const (
	OK          Answer = iota // 200, the page
	Challenge                 // a ban: Cloudflare's challenge page (403)
	Banned403                 // a ban: a plain 403 for this exit, while the origin serves the others
	Site403                   // the origin's own 403 for a path it forbids to everyone: not a ban
	RateLimited               // 429, over the origin's cap for this exit
	ProxyAuth                 // 407 from the exit's proxy
	ProxyDenied               // the exit's proxy refuses this origin by ACL (squid's ERR_ACCESS_DENIED)
	Timeout                   // no response headers in time (a flaky exit)
	Refused                   // the exit's gateway refuses the connection (a dead exit)
	SlowBody                  // 200 whose body trickles until the body pace rule cuts it
	Unavailable               // 503 from an origin that is down for everyone (an outage)
	SoftBlock                 // a ban: a 200 block page of its own size and title, no marker (softblock.go)
	numAnswers
)

var answerNames = [...]string{"200", "challenge page", "plain 403 (ban)", "plain 403 (the site's)", "429",
	"407", "proxy ACL denial", "timeout", "refused", "slow body", "503 (outage)", "200 block page (ban)"}

func (a Answer) String() string { return answerNames[a] }

// Result is the ground truth's answer to one attempt.
type Result struct {
	Answer     Answer
	Latency    time.Duration // how long the worker is busy with the attempt
	RetryAfter time.Duration // with a 429 from an origin that sends Retry-After
	HTTPS      bool          // the attempt went through a CONNECT tunnel
}

// OK reports whether the attempt succeeded.
func (r Result) OK() bool { return r.Answer == OK }

// Served reports whether the attempt got the origin's own answer to the request: the page, or the
// 403 the origin gives everyone for a path it forbids.
func (r Result) Served() bool { return r.Answer == OK || r.Answer == Site403 }

// Truth is the seeded ground truth: which exits are what, when pairs are banned or slow, which
// pairs a proxy refuses, when the workload bursts, and how many requests each pair has sent in
// the origin's window; in a round-3 world also which pairs are slow, when origins are down and
// exits gone, and which exits share a subnet. It is not safe for concurrent use; the simulation
// runs one worker at a time.
type Truth struct {
	sc      Scenario
	no      int // origins
	kinds   []Kind
	bans    [][]Window    // by pair index e*no+o, sorted: its own and those spread from its subnet
	own     [][]Window    // by pair, sorted: the bans it drew itself
	spread  int           // bans that spread to a subnet
	slow    []bool        // by pair
	outage  [][]Window    // by origin, sorted
	churn   [][]Window    // by exit, sorted
	subnet  []int         // by exit, −1 for none
	stalls  [][]Window    // by pair, sorted
	denied  []bool        // by pair
	bursts  []Burst       // sorted
	minute  []int64       // by pair, clock-minute caps: the minute the count belongs to
	count   []int         // by pair: requests that reached the origin in that minute
	log     [][]time.Time // by pair, sliding caps: the last Cap accepted requests, a ring
	head    []int         // by pair: the oldest entry of a full ring
	blocks  []blockState  // by pair, with origins that block (blocklimit.go); nil without
	tier    []int         // by exit, with Scenario.Tiers (spend.go); nil without
	blocked []bool        // by origin: blocks every datacenter exit (spend.go)
}

// NewTruth draws the ground truth of sc from sc.Seed. Each kind of episode draws from its own
// stream, so that the round-1 world's exits and bans are those it always had.
func NewTruth(sc Scenario) *Truth {
	r := rand.New(rand.NewPCG(sc.Seed, 0x7275746800000000))
	no := len(sc.Origins)
	g := &Truth{sc: sc, no: no, kinds: make([]Kind, sc.Exits)}
	// Kinds are dealt to a shuffled order so that exit indices say nothing.
	order := r.Perm(sc.Exits)
	for i, e := range order {
		switch {
		case i < sc.Dead:
			g.kinds[e] = Dead
		case i < sc.Dead+sc.Auth:
			g.kinds[e] = AuthFail
		case i < sc.Dead+sc.Auth+sc.Flaky:
			g.kinds[e] = Flaky
		}
	}
	n := sc.Exits * no
	g.bans, g.stalls, g.denied = make([][]Window, n), make([][]Window, n), make([]bool, n)
	g.minute, g.count = make([]int64, n), make([]int, n)
	for _, o := range sc.Origins {
		if o.Block.Requests > 0 {
			g.blocks = make([]blockState, n)
			break
		}
	}
	g.log, g.head = make([][]time.Time, n), make([]int, n)

	// Proxy denials: Denials healthy exits, one origin each.
	rd := rand.New(rand.NewPCG(sc.Seed, 0x64656e79000000))
	var healthy []int
	for e, k := range g.kinds {
		if k == Healthy {
			healthy = append(healthy, e)
		}
	}
	rd.Shuffle(len(healthy), func(i, j int) { healthy[i], healthy[j] = healthy[j], healthy[i] })
	for _, e := range healthy[:min(sc.Denials, len(healthy))] {
		g.denied[e*no+rd.IntN(no)] = true
	}

	for p := range n {
		if g.reaches(p) {
			org := sc.Origins[p%no]
			g.bans[p] = hardenedEpisodes(r, sc.Duration, sc.BansPerHour, sc.BanBands, org.Hardening, sc.HardenMax)
		}
	}
	rs := rand.New(rand.NewPCG(sc.Seed, 0x736c6f77000000))
	stall := []BanBand{{1, sc.StallMin, sc.StallMax}}
	for p := range n {
		if g.reaches(p) {
			g.stalls[p] = episodes(rs, sc.Duration, sc.StallsPerHour, stall)
		}
	}
	rb := rand.New(rand.NewPCG(sc.Seed, 0x6275727374000000))
	for _, w := range episodes(rb, sc.Duration, sc.BurstsPerHour, []BanBand{{1, sc.BurstMin, sc.BurstMax}}) {
		g.bursts = append(g.bursts, Burst{Window: w, Origin: rb.IntN(no)})
	}
	g.dynamics()
	g.tiers() // spend.go
	return g
}

// reaches reports whether the origin of pair p hears from its exit (its proxy works and lets it
// through): only such a pair can be banned or slow.
func (g *Truth) reaches(p int) bool {
	k := g.kinds[p/g.no]
	return (k == Healthy || k == Flaky) && !g.denied[p]
}

// episodes draws Poisson arrivals at perHour over d, each lasting a length drawn from bands (by
// weight; a single band draws no band); an episode starting inside another extends nothing.
func episodes(r *rand.Rand, d time.Duration, perHour float64, bands []BanBand) []Window {
	return hardenedEpisodes(r, d, perHour, bands, 0, 0)
}

// hardenedEpisodes is episodes with the k-th episode (from 0) lengthened by factor^k, at most
// limit (harden); the next arrival is drawn from the lengthened episode's end. A factor of 1 or
// less draws exactly what episodes draws.
func hardenedEpisodes(r *rand.Rand, d time.Duration, perHour float64, bands []BanBand, factor float64, limit time.Duration) []Window {
	if perHour <= 0 || d <= 0 || len(bands) == 0 {
		return nil
	}
	var total float64
	for _, b := range bands {
		total += b.Weight
	}
	var ws []Window
	at := time.Duration(0)
	for {
		at += time.Duration(r.ExpFloat64() / perHour * float64(time.Hour))
		if at >= d {
			return ws
		}
		b := bands[0]
		if len(bands) > 1 {
			x := r.Float64() * total
			for _, b = range bands {
				if x -= b.Weight; x < 0 {
					break
				}
			}
		}
		l := harden(b.Min+time.Duration(r.Int64N(int64(b.Max-b.Min)+1)), len(ws), factor, limit)
		ws = append(ws, Window{Epoch.Add(at), Epoch.Add(at + l)})
		at += l
	}
}

// Kind returns exit e's kind.
func (g *Truth) Kind(e int) Kind { return g.kinds[e] }

// Origin returns origin o's traits.
func (g *Truth) Origin(o int) Origin { return g.sc.Origins[o] }

// Bans returns the ban episodes of pair (e, o), sorted.
func (g *Truth) Bans(e, o int) []Window { return g.bans[e*g.no+o] }

// Stalls returns the slow-body episodes of pair (e, o), sorted.
func (g *Truth) Stalls(e, o int) []Window { return g.stalls[e*g.no+o] }

// Denied reports whether exit e's proxy refuses origin o.
func (g *Truth) Denied(e, o int) bool { return g.denied[e*g.no+o] }

// Banned reports whether pair (e, o) is banned at now.
func (g *Truth) Banned(e, o int, now time.Time) bool { return within(g.Bans(e, o), now) }

// Stalled reports whether pair (e, o) is in a slow-body episode at now.
func (g *Truth) Stalled(e, o int, now time.Time) bool { return within(g.Stalls(e, o), now) }

func within(ws []Window, now time.Time) bool {
	_, ok := episodeAt(ws, now)
	return ok
}

// episodeAt returns the episode of ws (sorted, disjoint) that holds now, if any.
func episodeAt(ws []Window, now time.Time) (Window, bool) {
	i, _ := slices.BinarySearchFunc(ws, now, func(w Window, t time.Time) int {
		if !w.To.After(t) {
			return -1
		}
		return 1
	})
	if i < len(ws) && ws[i].Contains(now) {
		return ws[i], true
	}
	return Window{}, false
}

// Peek returns what an attempt through exit e for q at now would get, without counting it.
// Send at the same instant gets the same answer.
func (g *Truth) Peek(e int, q Request, now time.Time) Result { return g.answer(e, q, now, false, true) }

// Send plays an attempt through exit e for q at now, counting it against the pair's cap.
func (g *Truth) Send(e int, q Request, now time.Time) Result { return g.answer(e, q, now, true, true) }

// Foresee is Peek without the attempt's own coin flip: what an attempt through exit e for q at now
// would get from the hidden state alone — the exit's kind and churn, the origin's outages, the
// pair's bans, slow bodies and proxy denial, its count in the origin's window — as if a flaky exit
// never timed out. Its latency is meaningless (Slow says which pairs are slow). It counts nothing.
func (g *Truth) Foresee(e int, q Request, now time.Time) Result {
	return g.answer(e, q, now, false, false)
}

// ReadyAt returns the soonest instant from now at which the hidden state would let an attempt
// through exit e for q be served (Foresee), or the zero time when it never will: a dead or 407
// exit, or one whose proxy refuses the origin. It looks at one obstacle at a time (the exit's
// churn, then an outage, a ban, the cap, a slow body), so the instant it returns may meet the
// next one.
func (g *Truth) ReadyAt(e int, q Request, now time.Time) time.Time {
	o := q.Origin
	p := e*g.no + o
	if k := g.kinds[e]; k == Dead || k == AuthFail || g.denied[p] {
		return time.Time{}
	}
	if w, ok := episodeAt(g.churn[e], now); ok {
		return w.To
	}
	if w, ok := episodeAt(g.outage[o], now); ok {
		return w.To
	}
	if w, ok := episodeAt(g.bans[p], now); ok {
		return w.To
	}
	if ra, over := g.overCap(p, g.sc.Origins[o], now, false); over {
		return now.Add(ra)
	}
	if w, ok := episodeAt(g.stalls[p], now); ok && !q.Forbidden {
		return w.To
	}
	return now
}

func (g *Truth) answer(e int, q Request, now time.Time, count, flips bool) Result {
	o := q.Origin
	org := g.sc.Origins[o]
	p := e*g.no + o
	h := mix(g.sc.Seed ^ mix(uint64(e)<<32|uint64(o)) ^ mix(uint64(now.UnixNano())))
	lat, hi := g.sc.LatencyMin, g.sc.LatencyMax
	if g.slow[p] {
		lat, hi = g.sc.SlowMin, g.sc.SlowMax
	}
	if span := int64(hi - lat); span > 0 {
		lat += time.Duration(h % uint64(span+1))
	}
	res := func(a Answer, l time.Duration) Result { return Result{Answer: a, Latency: l, HTTPS: org.HTTPS} }
	switch g.kinds[e] {
	case Dead:
		return res(Refused, 2*time.Millisecond)
	case AuthFail:
		return res(ProxyAuth, 50*time.Millisecond)
	}
	if g.Gone(e, now) {
		return res(Refused, 2*time.Millisecond)
	}
	if g.kinds[e] == Flaky && flips && float64(mix(h)>>11)/(1<<53) < g.sc.FlakyTimeout {
		return res(Timeout, g.sc.Timeout)
	}
	if g.denied[p] {
		return res(ProxyDenied, 50*time.Millisecond)
	}
	if g.Down(o, now) {
		return res(Unavailable, lat/4)
	}
	if g.Banned(e, o, now) {
		if org.PlainBans {
			return res(Banned403, lat)
		}
		if org.SoftBans {
			return res(SoftBlock, lat)
		}
		return res(Challenge, lat)
	}
	if ra, over := g.overCap(p, org, now, count); over {
		r := res(RateLimited, lat/4)
		if !org.NoRetryAfter {
			r.RetryAfter = (ra + time.Second - 1).Truncate(time.Second) // whole seconds, rounded up
		}
		return r
	}
	if q.Forbidden {
		return res(Site403, lat)
	}
	if g.Stalled(e, o, now) {
		return res(SlowBody, lat+g.sc.StallTimeout)
	}
	return res(OK, lat)
}

// overCap reports whether pair p's request at now is over its origin's cap, and how long until it
// would not be; count records the request (a clock-minute cap counts every request that reaches
// the origin, a sliding one those it accepted).
func (g *Truth) overCap(p int, org Origin, now time.Time, count bool) (time.Duration, bool) {
	if org.Block.Requests > 0 {
		return g.overBlock(p, org.Block, now, count) // blocklimit.go
	}
	if org.Cap <= 0 {
		return 0, false
	}
	if !org.Sliding {
		m := now.Sub(Epoch).Milliseconds() / 60000
		c := g.count[p]
		if g.minute[p] != m {
			c = 0
		}
		if count {
			g.minute[p], g.count[p] = m, c+1
		}
		if c >= org.Cap {
			return Epoch.Add(time.Duration(m+1) * time.Minute).Sub(now), true
		}
		return 0, false
	}
	ring := g.log[p]
	if len(ring) == org.Cap {
		oldest := ring[g.head[p]]
		if left := oldest.Add(time.Minute).Sub(now); left > 0 {
			return left, true
		}
		if count {
			ring[g.head[p]] = now
			g.head[p] = (g.head[p] + 1) % org.Cap
		}
		return 0, false
	}
	if count {
		if ring == nil {
			ring = make([]time.Time, 0, org.Cap)
		}
		g.log[p] = append(ring, now)
	}
	return 0, false
}

// mix is splitmix64's finaliser: a fixed, well-spread hash of x.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
