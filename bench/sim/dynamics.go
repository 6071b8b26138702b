package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// The round-3 dynamics of the ground truth: slow pairs, origin outages, exit churn, subnet-wide
// bans and hardening WAFs (the Scenario's fields after MaxRefusalWait, Origin.Hardening). Each is
// drawn from its own stream, after the round-2 world's, so a world without them draws what it
// always did.

// dynamics draws the round-3 dynamics of g's scenario into g; the bans are already drawn.
func (g *Truth) dynamics() {
	sc := g.sc
	no := g.no
	var healthy, working []int
	for e, k := range g.kinds {
		if k == Healthy {
			healthy = append(healthy, e)
		}
		if k == Healthy || k == Flaky {
			working = append(working, e)
		}
	}

	// Slow pairs: SlowAll healthy exits for every origin, the next SlowSome for a few origins each.
	g.slow = make([]bool, sc.Exits*no)
	rs := rand.New(rand.NewPCG(sc.Seed, 0x736c6f7770616972))
	rs.Shuffle(len(healthy), func(i, j int) { healthy[i], healthy[j] = healthy[j], healthy[i] })
	for i, e := range healthy[:min(sc.SlowAll+sc.SlowSome, len(healthy))] {
		origins := rs.Perm(no)
		if i < sc.SlowAll {
			origins = origins[:0]
			for o := range no {
				origins = append(origins, o)
			}
		} else {
			origins = origins[:min(sc.SlowSomeOrigins, no)]
		}
		for _, o := range origins {
			g.slow[e*no+o] = true
		}
	}

	// Outages per origin; churn per working exit.
	ro := rand.New(rand.NewPCG(sc.Seed, 0x6f75746167650000))
	g.outage = make([][]Window, no)
	for o := range no {
		g.outage[o] = episodes(ro, sc.Duration, sc.OutagesPerHour, []BanBand{{1, sc.OutageMin, sc.OutageMax}})
	}
	rc := rand.New(rand.NewPCG(sc.Seed, 0x636875726e000000))
	g.churn = make([][]Window, sc.Exits)
	for _, e := range working {
		g.churn[e] = episodes(rc, sc.Duration, sc.ChurnPerHour, []BanBand{{1, sc.ChurnMin, sc.ChurnMax}})
	}

	// Subnets, and the bans that spread to a subnet's other exits.
	g.own = g.bans
	g.subnet = make([]int, sc.Exits)
	for e := range g.subnet {
		g.subnet[e] = -1
	}
	if sc.Subnet < 2 {
		return
	}
	rn := rand.New(rand.NewPCG(sc.Seed, 0x7375626e65740000))
	var members [][]int
	for i, e := range rn.Perm(sc.Exits) {
		if i%sc.Subnet == 0 {
			members = append(members, nil)
		}
		g.subnet[e] = i / sc.Subnet
		members[i/sc.Subnet] = append(members[i/sc.Subnet], e)
	}
	spread := make([][]Window, len(g.bans)) // by pair: bans that came from a subnet-mate
	for p, ws := range g.own {
		e, o := p/no, p%no
		for _, w := range ws {
			if rn.Float64() >= sc.SubnetBanShare {
				continue
			}
			g.spread++
			for _, m := range members[g.subnet[e]] {
				if q := m*no + o; m != e && g.reaches(q) {
					spread[q] = append(spread[q], w)
				}
			}
		}
	}
	g.bans = make([][]Window, len(g.own))
	for p := range g.bans {
		g.bans[p] = union(g.own[p], spread[p])
	}
}

// union returns the windows of a and b (each sorted and disjoint; b may be in any order and
// overlap) as one sorted, disjoint list; windows that overlap or touch are one.
func union(a, b []Window) []Window {
	if len(b) == 0 {
		return a
	}
	all := append(slices.Clone(a), b...)
	slices.SortFunc(all, func(x, y Window) int { return x.From.Compare(y.From) })
	out := all[:1]
	for _, w := range all[1:] {
		last := &out[len(out)-1]
		if !w.From.After(last.To) {
			if w.To.After(last.To) {
				last.To = w.To
			}
			continue
		}
		out = append(out, w)
	}
	return out
}

// harden lengthens the k-th (from 0) ban l of a pair on an origin whose WAF multiplies each repeat
// ban by factor, at most limit (0: no limit).
func harden(l time.Duration, k int, factor float64, limit time.Duration) time.Duration {
	if factor <= 1 || k == 0 {
		return l
	}
	h := float64(l) * math.Pow(factor, float64(k))
	if limit > 0 && h > float64(limit) {
		return limit
	}
	return time.Duration(h)
}

// Slow reports whether pair (e, o) is slow: its answers take Scenario.SlowMin..SlowMax.
func (g *Truth) Slow(e, o int) bool { return g.slow[e*g.no+o] }

// Outages returns origin o's outages, sorted.
func (g *Truth) Outages(o int) []Window { return g.outage[o] }

// Churn returns the windows during which exit e is dead, sorted.
func (g *Truth) Churn(e int) []Window { return g.churn[e] }

// Subnet returns the subnet exit e shares with others, or −1 when it shares none.
func (g *Truth) Subnet(e int) int { return g.subnet[e] }

// OwnBans returns the bans pair (e, o) drew itself, sorted: Bans less those that spread to it from
// a subnet-mate.
func (g *Truth) OwnBans(e, o int) []Window { return g.own[e*g.no+o] }

// Down reports whether origin o is in an outage at now.
func (g *Truth) Down(o int, now time.Time) bool { return within(g.outage[o], now) }

// Gone reports whether exit e is in a churn window (dead for now) at now.
func (g *Truth) Gone(e int, now time.Time) bool { return within(g.churn[e], now) }
