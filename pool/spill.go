package pool

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Gradual spillover between tiers. A pick used to take the lowest tier with a ready exit, all or
// nothing: a tier that lost most of its exits for a site kept all of that site's traffic on the
// few left (and got them banned in turn), and a tier back from empty took all of it at once.
// Envoy's priority levels do better (its "priority load", with an overprovisioning factor of
// 1.4): a tier whose healthy fraction for the origin is h takes min(1, 1.4 × h) of the traffic
// that reaches it, and the rest spills to the next tier — a tier at 72 % healthy or more keeps
// everything, one at half keeps 70 %. When the tiers' loads add up to less than 1 (every tier
// short of exits), they are scaled up to 1, as Envoy normalises them.
//
// A tier back from empty for an origin (its healthy fraction was 0 at the last count) ramps: its
// healthy fraction counts as h × age/spillRamp (at least spillRampFloor) for spillRamp, so it
// takes its share over half a minute, as a pair back from OPEN does (latency.go's slow start).
//
// A tier's healthy fraction for an origin is the share of its exits whose own breaker and whose
// pair with the origin are both CLOSED: the bit tables the pick reads, counted a word (64 exits)
// at a time, at most once per spillRefresh per origin, by the pick that finds the count stale.
// A pool without tiers has one group and reads nothing here; a pick chooses its first tier with
// one random draw among the cumulative loads, and falls back to the others in ascending order
// when that tier has no ready exit.
const (
	// spillFactor is Envoy's overprovisioning factor.
	spillFactor = 1.4
	// spillRefresh is how often an origin's tiers' healthy fractions are recounted.
	spillRefresh = time.Second
	// spillRamp is how long a tier back from empty ramps up to its share; spillRampFloor the
	// part of its healthy fraction it counts at first.
	spillRamp      = 30 * time.Second
	spillRampFloor = 0.1
)

// originSpill is an origin's tier loads: a count replaced whole on each refresh.
type originSpill struct {
	state    atomic.Pointer[spillState]
	counting atomic.Bool // a pick is recounting: others use the last count
}

// spillState is one count of an origin's tiers' health, for one exit set.
type spillState struct {
	set    *exitSet
	at     int64     // when it was counted (Unix ns)
	health []float64 // per group: the healthy fraction
	back   []int64   // per group: when it came back from empty (Unix ns; 0: not ramping)
	cum    []float64 // per group: cumulative load, the last 1
}

// spillFrom returns the group a pick for o at now tries first: the lowest, unless o's tiers are
// short of healthy exits, when a random one by the tiers' loads.
func (p *Pool) spillFrom(now time.Time, o *originState, set *exitSet) int {
	if len(set.groups) < 2 {
		return 0 // inlined into the pick: one tier
	}
	return p.spillFromTiers(now, o, set)
}

func (p *Pool) spillFromTiers(now time.Time, o *originState, set *exitSet) int {
	st := o.spill.state.Load()
	if st == nil || st.set != set || now.UnixNano()-st.at >= int64(spillRefresh) || now.UnixNano() < st.at {
		if o.spill.counting.CompareAndSwap(false, true) {
			st = p.countSpill(now, o, set, st)
			o.spill.state.Store(st)
			o.spill.counting.Store(false)
		} else if st == nil || st.set != set {
			return 0 // another pick is counting the first time: take the lowest tier meanwhile
		}
	}
	if st.cum[0] >= 1 {
		return 0 // the lowest tier keeps everything: no draw
	}
	x := float64(p.rand()>>11) / (1 << 53)
	for gi, c := range st.cum {
		if x < c {
			return gi
		}
	}
	return len(st.cum) - 1
}

// spillOrder returns the k-th group a pick tries when it starts at group start: start, then the
// others in ascending order.
func spillOrder(k, start int) int {
	switch {
	case k == 0:
		return start
	case k <= start:
		return k - 1
	}
	return k
}

// countSpill counts o's tiers' health in set at now and their loads; prev is the last count.
func (p *Pool) countSpill(now time.Time, o *originState, set *exitSet, prev *spillState) *spillState {
	n := len(set.groups)
	st := &spillState{set: set, at: now.UnixNano(), health: make([]float64, n), back: make([]int64, n), cum: make([]float64, n)}
	if prev != nil && len(prev.health) != n {
		prev = nil // the tiers changed: no history to ramp from
	}
	loads := st.cum
	left := 1.0
	for gi := range set.groups {
		g := &set.groups[gi]
		h := 1 - float64(countOut(&o.open, &p.exitOpen, g))/float64(len(g.ids))
		st.health[gi] = h
		if prev != nil {
			switch {
			case h > 0 && prev.health[gi] == 0:
				st.back[gi] = st.at
			case h > 0 && prev.back[gi] != 0 && st.at-prev.back[gi] < int64(spillRamp):
				st.back[gi] = prev.back[gi]
			}
		}
		if st.back[gi] != 0 {
			h *= max(float64(st.at-st.back[gi])/float64(spillRamp), spillRampFloor)
		}
		loads[gi] = min(left, spillFactor*h)
		left -= loads[gi]
	}
	total := 1 - left
	if total <= 0 {
		loads[0], total = 1, 1 // no tier has a healthy exit: breakers and probes decide, lowest first
	}
	sum := 0.0
	for gi := range loads {
		sum += loads[gi] / total
		loads[gi] = sum
	}
	loads[n-1] = 1
	return st
}

// countOut returns how many exits of g have their own breaker or their pair's (in pairs) out of
// CLOSED: a word of 64 exits at a time in a group of consecutive ids, else exit by exit.
func countOut(pairs, exits *bitTable, g *tierGroup) int {
	n := len(g.ids)
	if !g.consecutive {
		out := 0
		for _, id := range g.ids {
			if pairs.get(id) || exits.get(id) {
				out++
			}
		}
		return out
	}
	lo, hi := g.ids[0], g.ids[0]+uint32(n)
	out := 0
	for id := lo &^ 63; id < hi; id += 64 {
		w := pairs.word(id) | exits.word(id)
		if id < lo {
			w &^= 1<<(lo-id) - 1 // below the group
		}
		if hi-id < 64 {
			w &= 1<<(hi-id) - 1 // above it
		}
		out += bits.OnesCount64(w)
	}
	return out
}

// word returns the 64 bits of t from id (a multiple of 64) on.
func (t *bitTable) word(id uint32) uint64 {
	dir := t.chunks()
	if int(id>>chunkShift) >= len(dir) {
		return 0
	}
	c := dir[id>>chunkShift].Load()
	if c == nil {
		return 0
	}
	return c[(id&chunkMask)/64].Load()
}

// probeBelow returns a ready exit of a tier below start that the spillover passes by because none
// of its exits is healthy for o at the last count: only a probe can be ready there — an exit's
// own breaker or a pair due for one — and it must go for the tier to come back (the origin's due
// heap covers pairs, not exits' own breakers). It samples such a tier as a pick used to sample
// the lowest tier first; a spent tier sends nothing (budget.go).
func (p *Pool) probeBelow(now time.Time, o *originState, set *exitSet, view *wantView, start int, avoid *Retries, c *choice) (*exitState, uint32) {
	if start == 0 {
		return nil, 0
	}
	st := o.spill.state.Load()
	if st == nil || st.set != set {
		return nil, 0
	}
	for gi := range start {
		if st.health[gi] > 0 {
			continue
		}
		g := &set.groups[gi]
		sub := view.group(gi, g)
		if p.tierSpent(now, g, sub, c) {
			continue
		}
		if es, id := p.sample(g, sub, now, o, avoid); es != nil {
			return es, id
		}
	}
	return nil, 0
}
