package pool

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// SavedStateVersion is the version of the SavedState format Save writes and Restore reads.
const SavedStateVersion = 1

// SavedState is the part of a pool's breakers worth keeping across a restart or handing to another
// process: every breaker that is not CLOSED or whose backoff level has not decayed, keyed by exit
// label and origin. It marshals to JSON and holds no credentials.
type SavedState struct {
	Version  int            `json:"version"`
	Saved    time.Time      `json:"saved"`
	Breakers []SavedBreaker `json:"breakers"`
}

// SavedBreaker is one breaker's saved state with its key: the exit's label for ScopeExit, the
// origin for ScopeOrigin, both for ScopePair.
type SavedBreaker struct {
	Scope  Scope  `json:"scope"`
	Exit   string `json:"exit,omitempty"`
	Origin string `json:"origin,omitempty"`
	breaker.Saved
}

// Save returns the state of every breaker worth keeping at now, sorted by scope, exit and origin.
func (p *Pool) Save(now time.Time) SavedState {
	st := SavedState{Version: SavedStateVersion, Saved: now}
	set := p.set.Load()
	st.Breakers = p.savedGateways(now) // a gateway's breaker under its label, its sessions' never (gateway_status.go)
	for _, es := range set.all {
		if es.exit.gw != nil {
			continue
		}
		if s := es.wide.Save(now); s.Worth() {
			st.Breakers = append(st.Breakers, SavedBreaker{Scope: ScopeExit, Exit: es.exit.label, Saved: s})
		}
	}
	for _, o := range p.originList() {
		o.mu.RLock()
		for id, pr := range o.pairs {
			es := set.byID[id]
			if es == nil || es.exit.gw != nil {
				continue // the exit is out of the pool, or a gateway's session: its state dies with it
			}
			if s := pr.b.Save(now); s.Worth() {
				st.Breakers = append(st.Breakers, SavedBreaker{Scope: ScopePair, Exit: es.exit.label, Origin: o.key, Saved: s})
			}
		}
		o.mu.RUnlock()
		if s := o.guard.b.Save(now); s.Worth() {
			st.Breakers = append(st.Breakers, SavedBreaker{Scope: ScopeOrigin, Origin: o.key, Saved: s})
		}
	}
	slices.SortFunc(st.Breakers, func(a, b SavedBreaker) int {
		return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Exit, b.Exit), cmp.Compare(a.Origin, b.Origin))
	})
	return st
}

// Restore applies a SavedState at now: each breaker takes its saved state unless it has
// changed state since (breaker.Breaker.Restore). Entries for exits the pool does not have are
// skipped and counted. An OPEN pair keeps its remaining window and trip count; a parked exit stays
// parked; an entry whose window has passed admits a probe at once. A SavedState of another version is
// an error, and nothing is applied.
func (p *Pool) Restore(now time.Time, s SavedState) (applied, skipped int, err error) {
	if s.Version != SavedStateVersion {
		return 0, 0, fmt.Errorf("pool: saved state version %d, want %d", s.Version, SavedStateVersion)
	}
	for _, sb := range s.Breakers {
		ok, known := p.apply(now, sb)
		switch {
		case !known:
			skipped++
		case ok:
			applied++
		}
	}
	return applied, skipped, nil
}

// Apply applies one saved breaker at now, as Restore does: a store or a fleet member
// delivering another process's news. It reports whether the breaker changed.
func (p *Pool) Apply(now time.Time, sb SavedBreaker) bool {
	ok, _ := p.apply(now, sb)
	return ok
}

func (p *Pool) apply(now time.Time, sb SavedBreaker) (changed, known bool) {
	switch sb.Scope {
	case ScopeOrigin:
		if sb.Origin == "" {
			return false, false
		}
		return p.liveOrigin(sb.Origin).guard.b.Restore(now, sb.Saved), true
	case ScopeExit, ScopePair:
	default:
		return false, false
	}
	es := p.set.Load().byLabel[sb.Exit]
	if es == nil || es.exit.gw != nil {
		return p.applyGateway(now, sb, es) // gateway_status.go
	}
	if sb.Scope == ScopeExit {
		return es.wide.Restore(now, sb.Saved), true
	}
	if sb.Origin == "" {
		return false, false
	}
	for range 3 {
		if pr, alive := p.pairFor(p.liveOrigin(sb.Origin), es); alive {
			return pr.b.Restore(now, sb.Saved), true
		}
	}
	return false, true
}

// ProbeTarget is a breaker whose cooldown has ended and that has a probe slot free: work for a
// reheat loop when no traffic happens to probe it. Exit is nil for ScopeOrigin; Origin is empty
// for ScopeExit.
type ProbeTarget struct {
	Scope  Scope
	Exit   *Exit
	Origin string
}

// DueProbes lists, at now, the breakers that would admit a probe: OPEN with their cooldown over
// (or HALF_OPEN with a slot free). It changes nothing; a prober sends each probe through the
// pool with Request.Exit set, so it takes the slot by the same path a live request would.
func (p *Pool) DueProbes(now time.Time) []ProbeTarget {
	var out []ProbeTarget
	due := func(b *breaker.Breaker) bool {
		if b.State(now) != breaker.HalfOpen {
			return false
		}
		ok, _ := b.Ready(now)
		return ok
	}
	set := p.set.Load()
	for _, es := range set.all {
		if p.exitOpen.get(es.id) && due(es.wide) {
			out = append(out, ProbeTarget{Scope: ScopeExit, Exit: es.exit})
		}
	}
	for _, o := range p.originList() {
		o.mu.RLock()
		for id, pr := range o.pairs {
			if es := set.byID[id]; es != nil && o.open.get(id) && due(&pr.b) {
				out = append(out, ProbeTarget{Scope: ScopePair, Exit: es.exit, Origin: o.key})
			}
		}
		o.mu.RUnlock()
		if due(&o.guard.b) {
			out = append(out, ProbeTarget{Scope: ScopeOrigin, Origin: o.key})
		}
	}
	slices.SortFunc(out, func(a, b ProbeTarget) int {
		la, lb := "", ""
		if a.Exit != nil {
			la = a.Exit.label
		}
		if b.Exit != nil {
			lb = b.Exit.label
		}
		return cmp.Or(cmp.Compare(a.Scope, b.Scope), cmp.Compare(la, lb), cmp.Compare(a.Origin, b.Origin))
	})
	return out
}
