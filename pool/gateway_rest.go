package pool

import (
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// Site rests. A gateway with rotate=on replaces a banned session by a fresh one (a new IP) at
// once (gateway_rotate.go). Against a site that bans every IP the provider has — a country, an
// ASN, a whole residential pool — that is churn without end: every request reaches the site
// through a new session, each bought and burned, as fast as the caller sends. So a gateway keeps,
// per site (origin), a run of its fresh sessions banned at once: sessions whose first answer from
// the site was a ban. After GatewayRestAfter (K) such sessions in a row, with no session served by
// the site between them, the site rests on that gateway: every session of the gateway — those
// minted during the rest too — is passed over for that site for a backoff of GatewayRestBase,
// doubled on each rest in a row up to GatewayRestMax, jittered by ±GatewayRestJitter on the pool's
// random source and measured on the pool's clock. Then one attempt at a time is let through (the
// probe, half-open): a ban starts the next, longer rest; an answer served by the site through any
// session of the gateway ends the rest and clears the run. The gateway keeps serving every other
// site meanwhile, and the site is served by the pool's other exits.
//
// So a site that bans every IP costs at most K fresh sessions before its first rest, and one per
// backoff window after it: at most K + 1 per window. The rest uses the origin's hold table
// (grouphold.go): the held sessions pass through one probe slot, which stays shut until the rest's
// backoff ends. A pool with no such site reads nothing more on a pick; a served answer through a
// gateway with no run reads one atomic.

// Site-rest settings.
const (
	// GatewayRestAfter (K) is how many fresh sessions of a gateway one site must ban in a row, each
	// at its first answer from the site, before the site rests on the gateway.
	GatewayRestAfter = 3
	// GatewayRestBase is the first rest's length; each rest in a row without a served answer
	// doubles it, up to GatewayRestMax.
	GatewayRestBase = 30 * time.Second
	GatewayRestMax  = 30 * time.Minute
	// GatewayRestJitter spreads each rest by up to this share either way.
	GatewayRestJitter = 0.25
)

// siteRests is one gateway's runs and rests, per origin. Safe for concurrent use.
type siteRests struct {
	mu sync.Mutex
	m  map[string]*siteRest // by origin key: origins with a run or a rest
	// n is len(m), read without the lock by a served answer.
	n atomic.Int32
}

// siteRest is one origin's run of fresh sessions banned at once, and its rest while one is in force.
type siteRest struct {
	run   int          // fresh sessions banned at once, in a row
	level int          // rests in a row: the next one is GatewayRestBase << level
	hold  *groupHold   // the gateway's sessions held for the origin; nil: not resting
	o     *originState // the origin state whose hold table holds them
	until time.Time
}

// restBackoff returns the length of the rest at level, jittered by draw (in [0, 1)).
func restBackoff(level int, draw float64) time.Duration {
	d := GatewayRestBase
	for range min(level, 16) {
		if d >= GatewayRestMax {
			break
		}
		d *= 2
	}
	d = min(d, GatewayRestMax)
	return time.Duration(float64(d) * (1 + GatewayRestJitter*(2*draw-1)))
}

// restServed hears that origin o served a session of g: the run is over, and so is a rest.
func (p *Pool) restServed(now time.Time, g *gateway, o *originState) {
	if g.rests.n.Load() == 0 {
		return // inlined: mostly no run anywhere
	}
	g.rests.mu.Lock()
	r := g.rests.m[o.key]
	if r == nil {
		g.rests.mu.Unlock()
		return
	}
	delete(g.rests.m, o.key)
	g.rests.n.Store(int32(len(g.rests.m)))
	g.rests.mu.Unlock()
	if r.hold != nil {
		unhold(r.o, r.hold)
	}
}

// restBanned hears that origin o banned session s of g; fresh: it was the session's first answer
// from o. A fresh ban extends the run and, at GatewayRestAfter, starts a rest; a ban during a rest
// (its probe's) starts the next, longer one.
func (p *Pool) restBanned(now time.Time, s *gwSession, o *originState, fresh bool) {
	g := s.g
	g.rests.mu.Lock()
	defer g.rests.mu.Unlock()
	r := g.rests.m[o.key]
	if r == nil {
		if !fresh {
			return
		}
		if g.rests.m == nil {
			g.rests.m = make(map[string]*siteRest)
		}
		r = &siteRest{}
		g.rests.m[o.key] = r
		g.rests.n.Store(int32(len(g.rests.m)))
	}
	if r.hold == nil {
		if !fresh {
			return
		}
		if r.run++; r.run < GatewayRestAfter {
			return
		}
	} else if r.o != o {
		unhold(r.o, r.hold) // the idle sweep forgot the origin, holds and all: hold the new state
		r.hold = nil
	}
	draw := float64(p.rand()>>11) / (1 << 53)
	r.until = now.Add(restBackoff(r.level, draw))
	r.level++
	if r.hold == nil {
		r.hold = &groupHold{key: "gateway " + g.exit.label, since: now}
		r.o = o
		r.hold.until.Store(r.until.UnixNano())
		hold(o, r.hold, g.liveIDs())
		return
	}
	r.hold.until.Store(r.until.UnixNano()) // before the probe's slot is freed (Lease.report)
}

// liveIDs returns the exit ids of g's live sessions.
func (g *gateway) liveIDs() []uint32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	ids := make([]uint32, 0, len(g.slots))
	for _, s := range g.slots {
		if s != nil && !s.done.Load() {
			ids = append(ids, s.id)
		}
	}
	return ids
}

// restMoved hears that g replaced the session with exit id old by one with id new: every rest of
// g holds the new one in the old one's place.
func (p *Pool) restMoved(g *gateway, old, new uint32) {
	if g.rests.n.Load() == 0 {
		return
	}
	g.rests.mu.Lock()
	defer g.rests.mu.Unlock()
	for _, r := range g.rests.m {
		if r.hold == nil {
			continue
		}
		h := &r.o.kin
		h.mu.Lock()
		m := map[uint32]*groupHold{}
		if cur := h.held.Load(); cur != nil {
			m = maps.Clone(*cur)
		}
		if m[old] == r.hold {
			delete(m, old)
		}
		m[new] = r.hold
		h.storeHeld(m)
		h.mu.Unlock()
	}
}

// hold puts ids under g in o's hold table.
func hold(o *originState, g *groupHold, ids []uint32) {
	h := &o.kin
	h.mu.Lock()
	defer h.mu.Unlock()
	m := map[uint32]*groupHold{}
	if cur := h.held.Load(); cur != nil {
		m = maps.Clone(*cur)
	}
	for _, id := range ids {
		m[id] = g
	}
	h.storeHeld(m)
	h.rests.Add(1)
}

// unhold takes every exit under g out of o's hold table.
func unhold(o *originState, g *groupHold) {
	h := &o.kin
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rests.Add(-1)
	cur := h.held.Load()
	if cur == nil {
		return
	}
	m := maps.Clone(*cur)
	maps.DeleteFunc(m, func(_ uint32, x *groupHold) bool { return x == g })
	if len(m) == 0 {
		m = nil
	}
	h.storeHeld(m)
}

// SiteRest is a site resting on a gateway (GatewayStatus.Resting): its fresh sessions were
// banned there GatewayRestAfter times in a row.
type SiteRest struct {
	Origin string    `json:"origin"`
	Until  time.Time `json:"until"` // when the next probe may go
	Rests  int       `json:"rests"` // rests in a row, this one included
}

// restsAt lists g's sites resting at now (or whose probe is due), by origin.
func (g *gateway) restsAt() []SiteRest {
	g.rests.mu.Lock()
	defer g.rests.mu.Unlock()
	var out []SiteRest
	for k, r := range g.rests.m {
		if r.hold != nil {
			out = append(out, SiteRest{Origin: k, Until: r.until, Rests: r.level})
		}
	}
	return out
}
