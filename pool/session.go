package pool

import "sync"

// sessionTable pins sticky sessions to exits, per origin. It holds at most max pins; when full, an
// arbitrary pin is evicted (its session simply picks anew). With limits (WithSessionLimits) a pin
// lasts at most maxAge from its first pick and serves at most maxUses picks.
//
// A sticky pick takes the table's lock once while its pin is live (claim: look up the pin, judge
// it against the limits and count the pick, in one step), and twice when it pins afresh (claim,
// then install). Because a pick is counted in the same critical section that judged the pin, N
// goroutines picking one session with maxUses K get exactly K picks through each pin.
type sessionTable struct {
	mu      sync.Mutex
	max     int
	maxAge  int64  // nanoseconds; 0: no age limit
	maxUses uint32 // 0: no use limit
	gen     uint32 // the last generation given to a pin
	m       map[sessionPin]pinned
}

type sessionPin struct{ session, origin string }

// pinned is one pin: the exit id, when its first pick was (UnixNano; 0 until then: a pin a gateway
// rotated starts its age at its next pick), how many picks it served, its generation (unique per
// pin, so that a pick that judged one pin never replaces another), and whether a gateway rotated
// the pin to this exit (follow) since the session last picked.
type pinned struct {
	since   int64
	id      uint32
	uses    uint32
	gen     uint32
	rotated bool
}

// sessionClaim is what a claim found for a session's pick: the pin (had), and whether it was live
// (within the limits: this pick was counted on it) or why it expired.
type sessionClaim struct {
	pin     pinned
	had     bool
	live    bool
	expired SessionMoveReason // MovedMaxAge or MovedMaxUses when had and not live
}

// expiry says whether pn is past the table's limits at now, and which.
func (s *sessionTable) expiry(pn pinned, now int64) SessionMoveReason {
	switch {
	case s.maxUses > 0 && pn.uses >= s.maxUses:
		return MovedMaxUses
	case s.maxAge > 0 && pn.since != 0 && now-pn.since >= s.maxAge:
		return MovedMaxAge
	}
	return MovedNone
}

// claim looks up the session's pin for origin at now. A live pin counts this pick as one of its
// uses and forgets its rotated note (the claim keeps it, for the lease). An expired one is left in
// place for install to replace — or, when forget is set (a strict pool), removed at once, so
// that exactly one pick hears of the expiry.
func (s *sessionTable) claim(session, origin string, now int64, forget bool) sessionClaim {
	k := sessionPin{session, origin}
	s.mu.Lock()
	defer s.mu.Unlock()
	pn, ok := s.m[k]
	if !ok {
		return sessionClaim{}
	}
	c := sessionClaim{pin: pn, had: true}
	if c.expired = s.expiry(pn, now); c.expired != MovedNone {
		if forget {
			delete(s.m, k)
		}
		return c
	}
	if pn.since == 0 {
		pn.since = now
	}
	pn.uses++
	pn.rotated = false
	s.m[k] = pn
	c.live = true
	return c
}

// install pins the session to exit id for origin at now, in place of the pin the pick's claim saw
// (gen; 0: none), and counts this pick as its first use. When another pick replaced that pin
// meanwhile with one still live, this pick joins it instead: it is counted there. It returns the
// pin the pick was counted on (its exit is the one to go through) and the pin it replaced, if any
// (replaced).
func (s *sessionTable) install(session, origin string, gen, id uint32, now int64) (via, old pinned, replaced bool) {
	k := sessionPin{session, origin}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[k]
	if ok && cur.gen != gen && s.expiry(cur, now) == MovedNone {
		if cur.since == 0 {
			cur.since = now
		}
		cur.uses++
		s.m[k] = cur
		return cur, pinned{}, false
	}
	if !ok && len(s.m) >= s.max {
		for victim := range s.m {
			delete(s.m, victim)
			break
		}
	}
	via = pinned{id: id, since: now, uses: 1, gen: s.nextGen()}
	s.m[k] = via
	return via, cur, ok
}

// refund gives back the use a claim or install counted on pin gen, when the pick could not go
// through its exit after all (another request took the probe slot or the token between the peek
// and the acquire), and restores its rotated note.
func (s *sessionTable) refund(session, origin string, gen uint32, rotated bool) {
	k := sessionPin{session, origin}
	s.mu.Lock()
	defer s.mu.Unlock()
	if pn, ok := s.m[k]; ok && pn.gen == gen && pn.uses > 0 {
		pn.uses--
		pn.rotated = pn.rotated || rotated
		s.m[k] = pn
	}
}

// unpin forgets the session's pin for origin, if it is still pin gen.
func (s *sessionTable) unpin(session, origin string, gen uint32) {
	k := sessionPin{session, origin}
	s.mu.Lock()
	defer s.mu.Unlock()
	if pn, ok := s.m[k]; ok && pn.gen == gen {
		delete(s.m, k)
	}
}

// follow moves every pin to exit from onto exit to, marked rotated, and returns how many moved:
// the caller sessions of a gateway session that was replaced (gateway_rotate.go). A followed pin
// is a new pin: a new generation, no use yet, its age from its next pick.
func (s *sessionTable) follow(from, to uint32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, pn := range s.m {
		if pn.id == from {
			s.m[k] = pinned{id: to, rotated: true, gen: s.nextGen()}
			n++
		}
	}
	return n
}

// nextGen returns a new pin generation, never 0 (which says "no pin"). s.mu is held.
func (s *sessionTable) nextGen() uint32 {
	s.gen++
	if s.gen == 0 {
		s.gen = 1
	}
	return s.gen
}

// sweep forgets pins to exits no longer in set.
func (s *sessionTable) sweep(set *exitSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, pn := range s.m {
		if set.byID[pn.id] == nil {
			delete(s.m, k)
		}
	}
}

// avoidingPin returns what a pick re-pinning a session should pass over: the exits memo avoids
// and the session's old exit, so that a pin past its limits moves to another IP while another exit
// is ready (choose falls back to the avoided ones when none is). Only re-pins pay for the copy.
func avoidingPin(memo *Retries, old *Exit) *Retries {
	a := &Retries{}
	if memo != nil {
		memo.mu.Lock()
		a.avoid, a.next = memo.avoid, memo.next
		memo.mu.Unlock()
	}
	a.avoidExit(old)
	return a
}
