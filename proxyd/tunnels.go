package proxyd

import (
	"sync"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// tunnelSet is the live tunnels, by exit label and origin, so that a pair or an exit that opens
// closes the tunnels on it (tunnelCloser) and shutdown can drain them.
type tunnelSet struct {
	mu     sync.Mutex
	byExit map[string]map[*tunnel]struct{}
	n      int
	empty  chan struct{} // closed when n drops to 0 while someone waits (wait)
}

func newTunnelSet() *tunnelSet {
	return &tunnelSet{byExit: map[string]map[*tunnel]struct{}{}}
}

func (ts *tunnelSet) add(t *tunnel) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	m := ts.byExit[t.label()]
	if m == nil {
		m = map[*tunnel]struct{}{}
		ts.byExit[t.label()] = m
	}
	m[t] = struct{}{}
	ts.n++
}

func (ts *tunnelSet) remove(t *tunnel) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	m := ts.byExit[t.label()]
	if _, ok := m[t]; !ok {
		return
	}
	delete(m, t)
	if len(m) == 0 {
		delete(ts.byExit, t.label())
	}
	ts.n--
	if ts.n == 0 && ts.empty != nil {
		close(ts.empty)
		ts.empty = nil
	}
}

// len returns the number of live tunnels.
func (ts *tunnelSet) len() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.n
}

// on returns the live tunnels on the exit labelled label, for origin ("" for every origin).
func (ts *tunnelSet) on(label, origin string) []*tunnel {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []*tunnel
	for t := range ts.byExit[label] {
		if origin == "" || t.origin == origin {
			out = append(out, t)
		}
	}
	return out
}

// all returns every live tunnel.
func (ts *tunnelSet) all() []*tunnel {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []*tunnel
	for _, m := range ts.byExit {
		for t := range m {
			out = append(out, t)
		}
	}
	return out
}

// drained returns a channel closed once no tunnel is live.
func (ts *tunnelSet) drained() <-chan struct{} {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.n == 0 {
		c := make(chan struct{})
		close(c)
		return c
	}
	if ts.empty == nil {
		ts.empty = make(chan struct{})
	}
	return ts.empty
}

// tunnelCloser is the pool observer that closes the live tunnels of a pair that opened (or of an
// exit that opened, on every origin): a tunnel is one exit for its life, so closing it is how the
// client's next connection goes elsewhere. A pair or exit that goes HALF_OPEN or CLOSED, or the
// origin guard, closes nothing: the guard blames the origin, which no other exit would reach
// better.
type tunnelCloser struct {
	pool.NopObserver
	s *Server
}

// StateChanged closes the tunnels the transition condemns, on a goroutine of its own (observers
// must return quickly).
func (c tunnelCloser) StateChanged(sc pool.StateChange) {
	if sc.To != breaker.Open || sc.Exit == nil || sc.Scope == pool.ScopeOrigin {
		return
	}
	origin := sc.Origin
	if sc.Scope == pool.ScopeExit {
		origin = ""
	}
	ts := c.s.tunnels.on(sc.Exit.Label(), origin)
	if len(ts) == 0 {
		return
	}
	go func() {
		for _, t := range ts {
			t.kill()
			c.s.metrics.tunnelKilled()
		}
	}()
}
