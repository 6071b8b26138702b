package pool

import (
	"cmp"
	"slices"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Snapshot is the state of every breaker in a pool at one instant. It marshals to JSON and holds
// no credentials: exits appear by label.
type Snapshot struct {
	At      time.Time      `json:"at"`
	Exits   []ExitStatus   `json:"exits"`
	Pairs   []PairStatus   `json:"pairs"`
	Origins []OriginStatus `json:"origins"`
	// Traffic is the bytes moved per origin, through every exit, for the origins the pool keeps
	// (an origin the idle sweep forgets takes its total with it), sorted by origin; origins that
	// moved nothing are left out.
	Traffic []OriginTraffic `json:"traffic,omitempty"`
	// Gateways are the provider gateways, each with its own breaker and its live sessions
	// (gateway_status.go), sorted by label; their sessions are in Exits too.
	Gateways []GatewayStatus `json:"gateways,omitempty"`
	// Groups are the groups of exits held for an origin (group.go), by origin and group.
	Groups []GroupHold `json:"groups,omitempty"`
	// Budgets is what is left of each tier budget (WithTierBudget) in its current period, by
	// tier and name.
	Budgets []BudgetStatus `json:"budgets,omitempty"`
}

// ExitStatus is one exit's own breaker.
type ExitStatus struct {
	Exit     string           `json:"exit"`
	Tier     int              `json:"tier"`
	Weight   float64          `json:"weight"`
	InFlight int              `json:"in_flight"`
	Breaker  breaker.Snapshot `json:"breaker"`
	// Bytes is what the exit's attempts moved since it joined the pool (Lease.ReportTrafficAt).
	Bytes Traffic `json:"bytes"`
	// Gateway is the label of the gateway the exit is a session of; empty for other exits. A
	// session's Breaker is its gateway's.
	Gateway string `json:"gateway,omitempty"`
	// Spend is what those attempts cost, in the pool's cost unit (Pool.CostOf; spend.go).
	Spend float64 `json:"spend,omitempty"`
}

// PairStatus is one (exit, origin) breaker. Pairs the pool holds no breaker for are CLOSED and
// fresh, and are not listed.
type PairStatus struct {
	Exit    string           `json:"exit"`
	Origin  string           `json:"origin"`
	Breaker breaker.Snapshot `json:"breaker"`
	// Rate is the pair's token rate in requests a second, when rate limits give it a bucket (a
	// per-pair limit, or a pace cut by 429s and not yet grown back); 0 when it has none.
	Rate float64 `json:"rate,omitempty"`
}

// OriginStatus is one origin's guard.
type OriginStatus struct {
	Origin  string           `json:"origin"`
	Breaker breaker.Snapshot `json:"breaker"`
}

// Snapshot returns the state of every breaker at the pool's current time.
func (p *Pool) Snapshot() Snapshot { return p.SnapshotAt(p.clock.Now()) }

// SnapshotAt returns the state of every breaker at now, sorted by exit label and origin. It
// changes nothing.
func (p *Pool) SnapshotAt(now time.Time) Snapshot {
	s := Snapshot{At: now}
	set := p.set.Load()
	for _, es := range set.all {
		s.Exits = append(s.Exits, ExitStatus{
			Exit: es.exit.label, Tier: es.exit.tier, Weight: es.exit.weight,
			InFlight: int(p.inflight.get(es.id)), Breaker: es.wide.Snapshot(now),
			Bytes: p.traffic.lookup(es.id).load(), Gateway: es.exit.Gateway(), Spend: p.spentBy(es.id),
		})
	}
	s.Gateways = p.gatewayStatuses(now)
	for _, o := range p.originList() {
		o.mu.RLock()
		for id, pr := range o.pairs {
			es := set.byID[id]
			if es == nil {
				continue // the exit is out of the pool
			}
			ps := PairStatus{Exit: es.exit.label, Origin: o.key, Breaker: pr.b.Snapshot(now)}
			if b := o.paces[id].Bucket(); b != nil {
				ps.Rate = float64(b.Limit())
			}
			s.Pairs = append(s.Pairs, ps)
		}
		o.mu.RUnlock()
		if tr := o.traffic.load(); tr != (Traffic{}) {
			s.Traffic = append(s.Traffic, OriginTraffic{Origin: o.key, Bytes: tr, Spend: o.traffic.spent()})
		}
		if !o.guard.cfg.Disabled {
			s.Origins = append(s.Origins, OriginStatus{Origin: o.key, Breaker: o.guard.b.Snapshot(now)})
		}
	}
	slices.SortFunc(s.Exits, func(a, b ExitStatus) int { return cmp.Compare(a.Exit, b.Exit) })
	slices.SortFunc(s.Pairs, func(a, b PairStatus) int {
		return cmp.Or(cmp.Compare(a.Exit, b.Exit), cmp.Compare(a.Origin, b.Origin))
	})
	slices.SortFunc(s.Origins, func(a, b OriginStatus) int { return cmp.Compare(a.Origin, b.Origin) })
	s.Budgets = p.budgetStatus(now)
	slices.SortFunc(s.Budgets, func(a, b BudgetStatus) int { return cmp.Or(cmp.Compare(a.Tier, b.Tier), cmp.Compare(a.Name, b.Name)) })
	slices.SortFunc(s.Traffic, func(a, b OriginTraffic) int { return cmp.Compare(a.Origin, b.Origin) })
	s.Groups = p.groupHoldsAt(now)
	return s
}
