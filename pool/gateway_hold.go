package pool

import (
	"slices"
	"sync"
)

// Held bans. A rotating gateway (rotate=on) used to replace a session at the first ban of any
// origin. But origins ban IPs, and a fair share of a provider's IPs is banned by some origin at
// any minute (a fifth of the (IP, origin) pairs in the simulation's gateway world, where only 8–11 %
// of IPs are clear of all 12 origins): a replacement soon met a ban of its own, and sessions lived
// about 20 s. Each replacement threw away an IP still good for most origins, and drew a fresh
// one whose flaky connections, slow pairs, stalling bodies and caps the pool had to meet again —
// the 15 s timeouts of flaky IPs alone took a quarter of the workers' time.
//
// So a ban of a session that still serves most of its origins is held instead: its pair for the
// banning origin stays OPEN and is probed on the ban ladder like a static line's, the other
// sessions serve that origin, and the session keeps serving the others. The session is replaced
// when the ban tips it over:
//
//   - RotateBans (3) or more origins have it out for a ban;
//   - more origins have it out for a ban than still serve it (a gateway scraping one origin
//     replaces a session at its first ban, as before);
//   - the banning origin has more than half of the gateway's sessions out for a ban: an origin
//     banning most of the sessions is better served by fresh IPs.
//
// Measured in the gateway world (docs/decisions.md, "the gateway world"): 3 against 1, 2, 4 and
// none; at 4 the median recovery per line grew to 28–47 s, without the goodput of 3.

// RotateBans is how many origins must have a session of a rotating gateway out for a ban before
// the gateway replaces it regardless of what still serves it (gateway_hold.go).
const RotateBans = 3

// maxSessionOrigins bounds the origins a session keeps per list: past it, origins are not noted
// (a session lives minutes; the counts only ever compare with RotateBans and each other).
const maxSessionOrigins = 64

// sessionBans is what a live session of a rotating gateway met per origin: the origins that served
// it and have not banned it since, and those that have it out for a ban. Safe for concurrent use.
type sessionBans struct {
	mu     sync.Mutex
	served []string
	banned []string
}

// servedBy notes that origin served the session: a ban of it, if any, is over.
func (b *sessionBans) servedBy(origin string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.banned = without(b.banned, origin)
	if !slices.Contains(b.served, origin) && len(b.served) < maxSessionOrigins {
		b.served = append(b.served, origin)
	}
}

// bannedBy notes that origin has the session out for a ban, and reports whether the bans tip it
// over: RotateBans origins, or more origins banning it than serving it.
func (b *sessionBans) bannedBy(origin string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.served = without(b.served, origin)
	if !slices.Contains(b.banned, origin) && len(b.banned) < maxSessionOrigins {
		b.banned = append(b.banned, origin)
	}
	return len(b.banned) >= RotateBans || len(b.banned) > len(b.served)
}

// knows reports whether origin has answered the session: served it, or has it out for a ban.
func (b *sessionBans) knows(origin string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Contains(b.served, origin) || slices.Contains(b.banned, origin)
}

// without returns s without x, in any order.
func without(s []string, x string) []string {
	if i := slices.Index(s, x); i >= 0 {
		s[i] = s[len(s)-1]
		return s[:len(s)-1]
	}
	return s
}

// mostBanned reports whether o has more than half of g's live sessions out for a ban (their
// pairs in a ban episode): the origin is better served by replacing its banned sessions than by
// waiting for them. Pairs resting for a 429 are no ban: the cap of an IP is met by every IP.
func (g *gateway) mostBanned(o *originState) bool {
	g.mu.Lock()
	ids := make([]uint32, 0, len(g.slots))
	for _, s := range g.slots {
		if s != nil && !s.done.Load() && o.open.get(s.id) {
			ids = append(ids, s.id)
		}
	}
	n := len(g.slots)
	g.mu.Unlock()
	if 2*len(ids) <= n {
		return false
	}
	banned := 0
	o.mu.RLock()
	for _, id := range ids {
		if pr := o.pairs[id]; pr != nil && pr.episode.Load() != 0 {
			banned++
		}
	}
	o.mu.RUnlock()
	return 2*banned > n
}

// rotateOnBan reports whether a ban by origin o, which tripped s's pair, should replace s rather
// than hold its pair OPEN (above).
func (s *gwSession) rotateOnBan(o *originState) bool {
	tipped := s.bans.bannedBy(o.key)
	return tipped || s.g.mostBanned(o)
}
