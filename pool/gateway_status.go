package pool

import (
	"cmp"
	"slices"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// What a gateway shows: in Snapshot, its own breaker and its live sessions by label; in
// SavedState, its own breaker under its label. Its sessions' breakers are never saved nor
// restored: a session label belongs to one minted id, and a restart mints others under the same
// numbers — a saved ban would fall on a fresh IP.

// GatewayStatus is one gateway: its own breaker, which every session's exit breaker is, and its
// live sessions.
type GatewayStatus struct {
	Gateway string           `json:"gateway"`
	Breaker breaker.Snapshot `json:"breaker"`
	// Sessions are the labels of its live sessions, by slot ("gw#7"; never a minted id).
	Sessions []string `json:"sessions"`
	// SessionTTL is the gateway's session-ttl; 0: none. Rotate is its rotate= setting.
	SessionTTL time.Duration `json:"session_ttl,omitempty"`
	Rotate     bool          `json:"rotate"`
	// Rotations counts the sessions it replaced since it joined the pool, by reason
	// ("blocked", "connection", "ttl"); reasons never met are left out.
	Rotations map[string]uint64 `json:"rotations,omitempty"`
	// EgressBans is how many (egress IP, origin) bans the gateway keeps in force
	// (egress-header=, gateway_egress.go).
	EgressBans int `json:"egress_bans,omitempty"`
	// Resting are the sites resting on the gateway, by origin: each banned GatewayRestAfter of its
	// fresh sessions in a row (gateway_rest.go).
	Resting []SiteRest `json:"resting,omitempty"`
}

// Gateway returns the label of the gateway e is a session of, or "" for any other exit. A
// session exit may be replaced by its gateway at any time (a ban, its TTL): a transport closes
// every connection of a session that left the pool, not only its idle ones.
func (e *Exit) Gateway() string {
	if e.gw == nil {
		return ""
	}
	return e.gw.s.g.exit.label
}

// gateways returns the pool's gateways, sorted by label.
func (p *Pool) gatewayList() []*gateway {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*gateway, 0, len(p.gateways.byLabel))
	for _, g := range p.gateways.byLabel {
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *gateway) int { return cmp.Compare(a.exit.label, b.exit.label) })
	return out
}

// gatewayStatuses returns every gateway's status at now.
func (p *Pool) gatewayStatuses(now time.Time) []GatewayStatus {
	var out []GatewayStatus
	for _, g := range p.gatewayList() {
		gs := GatewayStatus{Gateway: g.exit.label, Breaker: g.wide.Snapshot(now), SessionTTL: g.spec.ttl, Rotate: g.spec.rotate, EgressBans: g.egress.banned(now)}
		g.mu.Lock()
		for _, s := range g.slots {
			gs.Sessions = append(gs.Sessions, s.exit.label)
		}
		g.mu.Unlock()
		gs.Resting = g.restsAt()
		slices.SortFunc(gs.Resting, func(a, b SiteRest) int { return cmp.Compare(a.Origin, b.Origin) })
		for r := range rotationReasons {
			if n := g.rotations[r].Load(); n > 0 {
				if gs.Rotations == nil {
					gs.Rotations = make(map[string]uint64)
				}
				gs.Rotations[r.String()] = n
			}
		}
		out = append(out, gs)
	}
	return out
}

// savedGateways returns the gateways' breakers worth keeping at now, under their labels.
func (p *Pool) savedGateways(now time.Time) []SavedBreaker {
	var out []SavedBreaker
	for _, g := range p.gatewayList() {
		if s := g.wide.Save(now); s.Worth() {
			out = append(out, SavedBreaker{Scope: ScopeExit, Exit: g.exit.label, Saved: s})
		}
	}
	return out
}

// applyGateway applies a saved breaker whose label is no plain exit's (es is nil) or is a
// gateway's session (es): a gateway's own breaker takes a ScopeExit entry under its label; a
// session's entries are known and never applied.
func (p *Pool) applyGateway(now time.Time, sb SavedBreaker, es *exitState) (changed, known bool) {
	if es != nil {
		return false, true
	}
	p.mu.Lock()
	g := p.gateways.byLabel[sb.Exit]
	p.mu.Unlock()
	if g == nil || sb.Scope != ScopeExit {
		return false, g != nil
	}
	return g.wide.Restore(now, sb.Saved), true
}
