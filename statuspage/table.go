package statuspage

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// An exit's status on the page, from its own breaker and its pairs'.
const (
	StatusHealthy  = "healthy"  // its own breaker is CLOSED and so are all its pairs'
	StatusDegraded = "degraded" // its own breaker is CLOSED, some of its pairs' are OPEN or HALF_OPEN
	StatusDown     = "down"     // its own breaker is parked, OPEN or HALF_OPEN: no regular traffic
)

// Table is the breaker table as the page shows it, and its JSON form. It holds no credentials:
// exits appear by label, failures by class. Fields are only ever added to its JSON, never renamed.
type Table struct {
	At      time.Time   `json:"at"`
	Summary Summary     `json:"summary"`
	Exits   []ExitRow   `json:"exits"`   // down first (parked, OPEN, HALF_OPEN), then degraded, healthy; by tier, label
	Pairs   []PairRow   `json:"pairs"`   // pairs of parked exits first, then by state; by exit, origin
	Origins []OriginRow `json:"origins"` // OPEN, HALF_OPEN, then CLOSED; by origin
	// Actions are the failure classes behind the breakers that are not CLOSED, the most exits down
	// first, each with what to do about it.
	Actions []Action `json:"actions"`
	// Hints maps each failure class the table shows to what to do about it (see HintFor).
	Hints map[string]string `json:"hints"`
	// Grid is the exit × origin grid, bounded in rows and columns.
	Grid Grid `json:"grid"`
	// Gateways are the provider gateways with their sessions (gateways.go); their sessions are
	// rows of Exits too.
	Gateways []GatewayRow `json:"gateways"`
	// Groups are the groups of exits held for an origin (pool.GroupHold: several members banned
	// there, the others held to one attempt at a time until one is served).
	Groups []pool.GroupHold `json:"groups"`
	// Budgets are the pool's tier budgets and what is left of each in its current period
	// (pool.BudgetStatus; README, Cost and budgets); absent when the pool has none.
	Budgets []pool.BudgetStatus `json:"budgets,omitempty"`
}

// Summary counts what the table holds, before any row limit. The exit counts add up:
// Exits = ExitsHealthy + ExitsDegraded + ExitsDown, and ExitsDown = ExitsParked + ExitsCooling +
// ExitsProbing.
type Summary struct {
	Exits         int `json:"exits"`
	ExitsParked   int `json:"exits_parked"`
	ExitsOpen     int `json:"exits_open"` // own breaker OPEN, parked ones included
	PairsTracked  int `json:"pairs_tracked"`
	PairsOpen     int `json:"pairs_open"`
	PairsHalfOpen int `json:"pairs_half_open"`
	PairsOmitted  int `json:"pairs_omitted"` // beyond WithMaxPairs, the least severe
	OriginsOpen   int `json:"origins_open"`  // origins whose guard is OPEN: picks for them fail fast

	ExitsHealthy    int `json:"exits_healthy"`     // StatusHealthy
	ExitsDegraded   int `json:"exits_degraded"`    // StatusDegraded
	ExitsDown       int `json:"exits_down"`        // StatusDown: parked, cooling or probing
	ExitsCooling    int `json:"exits_cooling"`     // down: OPEN, not parked, waiting for its probe
	ExitsProbing    int `json:"exits_probing"`     // down: HALF_OPEN, not parked, its probes decide
	Origins         int `json:"origins"`           // origins the pool tracks: a guard or a pair breaker
	OriginsHalfOpen int `json:"origins_half_open"` // origins whose guard is HALF_OPEN: a probe decides
}

// Breaker is one breaker's row cells.
type Breaker struct {
	State            breaker.State `json:"state"`
	Parked           bool          `json:"parked"`
	Trips            uint32        `json:"trips"`
	Level            int           `json:"level"`
	FailuresInWindow int           `json:"failures_in_window"`
	ProbesInFlight   int           `json:"probes_in_flight"`
	// NextProbe is when an OPEN breaker admits a probe; NextProbeIn the seconds until then.
	NextProbe   time.Time     `json:"next_probe,omitzero"`
	NextProbeIn float64       `json:"next_probe_in_seconds,omitempty"`
	LastCause   breaker.Cause `json:"last_cause,omitempty"`
	// LastFailure is the class of the last failure ("timeout", "proxy_auth"), and when it was.
	LastFailure   string    `json:"last_failure,omitempty"`
	LastFailureAt time.Time `json:"last_failure_at,omitzero"`
}

// ExitRow is one exit's own breaker: exit-wide trouble (proxy auth rejected, gateway refused,
// connection failures across origins).
type ExitRow struct {
	Exit     string  `json:"exit"`
	Tier     int     `json:"tier"`
	Weight   float64 `json:"weight"`
	InFlight int     `json:"in_flight"`
	Breaker
	// Display is the label in compact form ("user@host:port" for "http://user:xxxxx@host:port"),
	// unique in the table; Exit stays the key.
	Display string `json:"display"`
	// Status is StatusHealthy, StatusDegraded or StatusDown.
	Status string `json:"status"`
	// PairsOpen and PairsHalfOpen count the exit's pairs in those states, all origins.
	PairsOpen     int `json:"pairs_open"`
	PairsHalfOpen int `json:"pairs_half_open"`
	// Bytes is what the exit carried to and from its proxy since it joined the pool
	// (pool.ExitStatus.Bytes).
	Bytes pool.Traffic `json:"bytes"`
	// Spend is what those bytes and the exit's attempts cost, in the pool's cost unit
	// (pool.ExitStatus.Spend); 0 for an exit without prices.
	Spend float64 `json:"spend"`
}

// PairRow is one (exit, origin) breaker. ExitParked marks pairs whose exit is parked: the pair's own
// state does not matter while it is.
type PairRow struct {
	Exit       string `json:"exit"`
	Origin     string `json:"origin"`
	ExitParked bool   `json:"exit_parked"`
	// Rate is the pair's token rate in requests a second when rate limits give it a bucket (a
	// per-pair limit, or a pace cut by 429s); 0 when it has none: no limit.
	Rate float64 `json:"rate,omitempty"`
	Breaker
	// Display is the exit's display name (see ExitRow.Display).
	Display string `json:"display"`
}

// OriginRow is one origin's guard.
type OriginRow struct {
	Origin string `json:"origin"`
	Breaker
	// Capacity is the origin's capacity answer (pool.Pool.Capacity), when the page's source
	// gives one; JSON only.
	Capacity *pool.Capacity `json:"capacity,omitempty"`
}

// Action is one failure class behind breakers that are not CLOSED: how many it holds down and what
// to do about it.
type Action struct {
	Class string `json:"class"`
	// Hint is HintFor(Class); empty for a class the page has no hint for.
	Hint    string `json:"hint"`
	Exits   int    `json:"exits"`   // exits down with it as their last failure
	Pairs   int    `json:"pairs"`   // pairs OPEN or HALF_OPEN with it
	Origins int    `json:"origins"` // origin guards OPEN or HALF_OPEN with it
	// Examples names up to maxExamples of them: exits by display name, then "exit × origin", then
	// origins.
	Examples []string `json:"examples"`
}

// maxExamples bounds Action.Examples.
const maxExamples = 3

// layout is what a table is built to: row limits and the grid's order.
type layout struct {
	maxPairs    int // negative: all
	gridExits   int // negative: all
	gridOrigins int // negative: all
	sort        string
}

// BuildTable turns a snapshot into the page's table, keeping at most maxPairs pair rows (the most
// severe; negative keeps all). The grid has the default bounds (DefaultGridExits,
// DefaultGridOrigins) and its rows are sorted by status (SortStatus).
func BuildTable(s pool.Snapshot, maxPairs int) Table {
	return build(s, layout{maxPairs: maxPairs, gridExits: DefaultGridExits, gridOrigins: DefaultGridOrigins, sort: SortStatus})
}

func build(s pool.Snapshot, l layout) Table {
	t := Table{At: s.At, Exits: []ExitRow{}, Pairs: []PairRow{}, Origins: []OriginRow{}, Actions: []Action{},
		Hints: map[string]string{}, Groups: []pool.GroupHold{}} // [] and {} in JSON, not null
	t.Groups = append(t.Groups, s.Groups...)
	t.Budgets = s.Budgets
	labels := make([]string, 0, len(s.Exits))
	for _, e := range s.Exits {
		labels = append(labels, e.Exit)
	}
	names := displayNames(labels)
	name := func(label string) string {
		if d, ok := names[label]; ok {
			return d
		}
		return displayName(label) // a pair whose exit left between the snapshot's two reads
	}

	exitAt := make(map[string]int, len(s.Exits))
	for _, e := range s.Exits {
		exitAt[e.Exit] = len(t.Exits)
		t.Exits = append(t.Exits, ExitRow{Exit: e.Exit, Tier: e.Tier, Weight: e.Weight, InFlight: e.InFlight, Bytes: e.Bytes, Spend: e.Spend,
			Breaker: view(e.Breaker, s.At), Display: name(e.Exit)})
	}
	origins := map[string]bool{}
	for _, p := range s.Pairs {
		i, known := exitAt[p.Exit]
		parked := known && t.Exits[i].Parked
		t.Pairs = append(t.Pairs, PairRow{Exit: p.Exit, Origin: p.Origin, ExitParked: parked, Rate: finiteRate(p.Rate),
			Breaker: view(p.Breaker, s.At), Display: name(p.Exit)})
		origins[p.Origin] = true
		t.Summary.PairsTracked++
		switch p.Breaker.State {
		case breaker.Open:
			t.Summary.PairsOpen++
			if known {
				t.Exits[i].PairsOpen++
			}
		case breaker.HalfOpen:
			t.Summary.PairsHalfOpen++
			if known {
				t.Exits[i].PairsHalfOpen++
			}
		}
	}
	for _, o := range s.Origins {
		t.Origins = append(t.Origins, OriginRow{Origin: o.Origin, Breaker: view(o.Breaker, s.At)})
		origins[o.Origin] = true
		switch o.Breaker.State {
		case breaker.Open:
			t.Summary.OriginsOpen++
		case breaker.HalfOpen:
			t.Summary.OriginsHalfOpen++
		}
	}
	t.Summary.Origins = len(origins)
	for i := range t.Exits {
		e := &t.Exits[i]
		e.Status = exitStatus(e)
		t.Summary.Exits++
		switch {
		case e.Parked:
			t.Summary.ExitsParked++
		case e.State == breaker.Open:
			t.Summary.ExitsCooling++
		case e.State == breaker.HalfOpen:
			t.Summary.ExitsProbing++
		}
		if e.State == breaker.Open {
			t.Summary.ExitsOpen++
		}
		switch e.Status {
		case StatusDown:
			t.Summary.ExitsDown++
		case StatusDegraded:
			t.Summary.ExitsDegraded++
		default:
			t.Summary.ExitsHealthy++
		}
	}

	t.Actions = actions(t.Exits, t.Pairs, t.Origins)
	addHints(t.Hints, t.Exits, t.Pairs, t.Origins)
	t.Grid = buildGrid(t.Exits, t.Pairs, t.Origins, l)
	t.Gateways = gatewayRows(s, t.Exits)

	slices.SortStableFunc(t.Exits, compareExits)
	slices.SortStableFunc(t.Pairs, func(a, b PairRow) int {
		return cmp.Or(compareBool(b.ExitParked, a.ExitParked), cmp.Compare(severity(&b.Breaker), severity(&a.Breaker)),
			cmp.Compare(a.Exit, b.Exit), cmp.Compare(a.Origin, b.Origin))
	})
	slices.SortStableFunc(t.Origins, func(a, b OriginRow) int {
		return cmp.Or(cmp.Compare(severity(&b.Breaker), severity(&a.Breaker)), cmp.Compare(a.Origin, b.Origin))
	})
	if l.maxPairs >= 0 && len(t.Pairs) > l.maxPairs {
		t.Summary.PairsOmitted = len(t.Pairs) - l.maxPairs
		t.Pairs = t.Pairs[:l.maxPairs]
	}
	return t
}

// exitStatus is the exit's status from its own breaker and its pairs' counts.
func exitStatus(e *ExitRow) string {
	switch {
	case e.Parked || e.State != breaker.Closed:
		return StatusDown
	case e.PairsOpen+e.PairsHalfOpen > 0:
		return StatusDegraded
	}
	return StatusHealthy
}

// compareExits orders exits by what matters: down (parked, OPEN, HALF_OPEN), then degraded (the
// most pairs in trouble first), then healthy; then by tier and label.
func compareExits(a, b ExitRow) int {
	return cmp.Or(cmp.Compare(severity(&b.Breaker), severity(&a.Breaker)),
		cmp.Compare(b.PairsOpen+b.PairsHalfOpen, a.PairsOpen+a.PairsHalfOpen),
		cmp.Compare(a.Tier, b.Tier), cmp.Compare(a.Exit, b.Exit))
}

// finiteRate is r when it is a limit worth showing; 0 (no limit) for an infinite, NaN or
// non-positive rate, which JSON could not encode anyway.
func finiteRate(r float64) float64 {
	if r > 0 && !math.IsInf(r, 0) {
		return r
	}
	return 0
}

func view(b breaker.Snapshot, now time.Time) Breaker {
	v := Breaker{
		State: b.State, Parked: b.Parked, Trips: b.Trips, Level: b.Level,
		FailuresInWindow: b.FailuresInWindow, ProbesInFlight: b.ProbesInFlight,
		LastCause: b.LastCause, LastFailure: b.LastFailure, LastFailureAt: b.LastFailureAt,
	}
	if b.State == breaker.Open {
		v.NextProbe = b.NextProbe
		v.NextProbeIn = max(b.NextProbe.Sub(now), 0).Seconds()
	}
	return v
}

// severity orders rows: parked, OPEN, HALF_OPEN, CLOSED.
func severity(b *Breaker) int {
	switch {
	case b.Parked:
		return 3
	case b.State == breaker.Open:
		return 2
	case b.State == breaker.HalfOpen:
		return 1
	}
	return 0
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}
