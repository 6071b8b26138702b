package proxyd

import "sync"

// sessionExits remembers which exit carried each client session for each site, so that a client
// that cannot see Proxy-Status (an HTTPS client never reads a CONNECT reply's headers) can report
// what it found by the session it named in its username (Server.ExitOfSession). It holds at most
// max entries; when full, an arbitrary one is dropped. Session ids stay in memory: never logged,
// never shown.
type sessionExits struct {
	mu  sync.Mutex
	max int
	m   map[sessionSite]string
}

type sessionSite struct{ session, origin string }

func newSessionExits(max int) *sessionExits {
	return &sessionExits{max: max, m: map[sessionSite]string{}}
}

// note records that session's request for origin left through the exit labelled label.
func (se *sessionExits) note(session, origin, label string) {
	if session == "" {
		return
	}
	k := sessionSite{session, origin}
	se.mu.Lock()
	defer se.mu.Unlock()
	if _, ok := se.m[k]; !ok && len(se.m) >= se.max {
		for old := range se.m {
			delete(se.m, old)
			break
		}
	}
	se.m[k] = label
}

// exit returns the label of the exit that last carried session for origin.
func (se *sessionExits) exit(session, origin string) (string, bool) {
	se.mu.Lock()
	defer se.mu.Unlock()
	l, ok := se.m[sessionSite{session, origin}]
	return l, ok
}
