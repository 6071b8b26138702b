package pool

import "sync"

// sessionTable pins sticky sessions to exits, per origin. It holds at most max pins; when full, an
// arbitrary pin is evicted (its session simply picks anew).
type sessionTable struct {
	mu  sync.Mutex
	max int
	m   map[sessionPin]pinned
}

type sessionPin struct{ session, origin string }

// pinned is one pin: the exit id, whether a gateway rotated the pin to it (follow) since the
// session last picked, and whether the session's last pick moved it to another exit than its pin.
type pinned struct {
	id      uint32
	rotated bool
	moved   bool
}

// pinned returns the exit the session is pinned to for origin (nil when none, or when that exit
// has left set), whether it had a pin at all, and whether a gateway rotated the pin since.
func (s *sessionTable) pinned(session, origin string, set *exitSet) (es *exitState, had, rotated bool) {
	s.mu.Lock()
	pn, ok := s.m[sessionPin{session, origin}]
	s.mu.Unlock()
	if !ok {
		return nil, false, false
	}
	return set.byID[pn.id], true, pn.rotated
}

// pin pins the session to exit id for origin; it notes whether the session moved: it had a pin
// to another exit, or one a gateway rotated.
func (s *sessionTable) pin(session, origin string, id uint32) {
	k := sessionPin{session, origin}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, ok := s.m[k]
	if !ok && len(s.m) >= s.max {
		for victim := range s.m {
			delete(s.m, victim)
			break
		}
	}
	s.m[k] = pinned{id: id, moved: ok && (old.id != id || old.rotated)}
}

// moved reports whether the session's last pick for origin moved it to another exit, and clears
// the note.
func (s *sessionTable) moved(session, origin string) bool {
	k := sessionPin{session, origin}
	s.mu.Lock()
	defer s.mu.Unlock()
	pn, ok := s.m[k]
	if !ok || !pn.moved {
		return false
	}
	pn.moved = false
	s.m[k] = pn
	return true
}

// unpin forgets the session's pin for origin.
func (s *sessionTable) unpin(session, origin string) {
	s.mu.Lock()
	delete(s.m, sessionPin{session, origin})
	s.mu.Unlock()
}

// follow moves every pin to exit from onto exit to, marked rotated, and returns how many moved:
// the caller sessions of a gateway session that was replaced (gateway_rotate.go).
func (s *sessionTable) follow(from, to uint32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, pn := range s.m {
		if pn.id == from {
			s.m[k] = pinned{id: to, rotated: true}
			n++
		}
	}
	return n
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
