package transport

import (
	"sync"

	"github.com/proxybreaker/proxybreaker/pool"
)

// A gateway's session (pool.Exit.Gateway) is replaced when an origin bans it, when its connection
// failures trip it and when it reaches its TTL, before the provider recycles its IP. Closing its
// idle connections is not enough then: a CONNECT tunnel in use, or an HTTP/2 connection through
// one, would go on carrying requests through the retired session — the IP the site banned, or one
// the provider is about to hand to somebody else. So the transport keeps the open connections of
// every session exit, and closes all of them when the pool removes the exit: an attempt in flight
// on one fails as a connection error, and no tunnel outlives the session that opened it. Other
// exits keep no such set and pay nothing.

// sessionConns is the open connections of one gateway session's transport.
type sessionConns struct {
	mu     sync.Mutex
	m      map[*countedConn]struct{}
	closed bool
}

// newSessionConns returns the connection set for e when e is a gateway's session, else nil.
func newSessionConns(e *pool.Exit) *sessionConns {
	if e.Gateway() == "" {
		return nil
	}
	return &sessionConns{m: make(map[*countedConn]struct{})}
}

// add keeps c; once the session is retired, c is closed at once.
func (s *sessionConns) add(c *countedConn) {
	if s == nil {
		return
	}
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.m[c] = struct{}{}
	}
	s.mu.Unlock()
	if closed {
		c.Conn.Close()
	}
}

// remove forgets c, which is closing.
func (s *sessionConns) remove(c *countedConn) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.m, c)
	s.mu.Unlock()
}

// closeAll closes every open connection of the session, and any it dials from now on.
func (s *sessionConns) closeAll() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	conns := s.m
	s.m = nil
	s.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}
