package pool

import "sync"

// sessionTable pins sticky sessions to exits, per origin. It holds at most max pins; when full, an
// arbitrary pin is evicted (its session simply picks anew).
type sessionTable struct {
	mu  sync.Mutex
	max int
	m   map[sessionPin]uint32
}

type sessionPin struct{ session, origin string }

func (s *sessionTable) pinned(session, origin string, set *exitSet) *exitState {
	s.mu.Lock()
	id, ok := s.m[sessionPin{session, origin}]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	return set.byID[id]
}

func (s *sessionTable) pin(session, origin string, id uint32) {
	k := sessionPin{session, origin}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[k]; !ok && len(s.m) >= s.max {
		for victim := range s.m {
			delete(s.m, victim)
			break
		}
	}
	s.m[k] = id
}

// sweep forgets pins to exits no longer in set.
func (s *sessionTable) sweep(set *exitSet) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, id := range s.m {
		if set.byID[id] == nil {
			delete(s.m, k)
		}
	}
}
