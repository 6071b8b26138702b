package statuspage

import (
	"cmp"
	"slices"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// Table is the breaker table as the page shows it, and its JSON form. It holds no credentials:
// exits appear by label.
type Table struct {
	At      time.Time   `json:"at"`
	Summary Summary     `json:"summary"`
	Exits   []ExitRow   `json:"exits"`   // parked first, then OPEN, HALF_OPEN, CLOSED; by tier, label
	Pairs   []PairRow   `json:"pairs"`   // pairs of parked exits first, then by state; by exit, origin
	Origins []OriginRow `json:"origins"` // OPEN, HALF_OPEN, then CLOSED; by origin
}

// Summary counts what the table holds, before any row limit.
type Summary struct {
	Exits         int `json:"exits"`
	ExitsParked   int `json:"exits_parked"`
	ExitsOpen     int `json:"exits_open"` // parked ones included
	PairsTracked  int `json:"pairs_tracked"`
	PairsOpen     int `json:"pairs_open"`
	PairsHalfOpen int `json:"pairs_half_open"`
	PairsOmitted  int `json:"pairs_omitted"` // beyond WithMaxPairs, the least severe
	OriginsOpen   int `json:"origins_open"`
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
}

// PairRow is one (exit, origin) breaker. ExitParked marks pairs whose exit is parked: the pair's own
// state does not matter while it is.
type PairRow struct {
	Exit       string `json:"exit"`
	Origin     string `json:"origin"`
	ExitParked bool   `json:"exit_parked"`
	// Rate is the pair's token rate in requests a second when rate limits give it a bucket (a
	// per-pair limit, or a pace cut by 429s); 0 when it has none.
	Rate float64 `json:"rate,omitempty"`
	Breaker
}

// OriginRow is one origin's guard.
type OriginRow struct {
	Origin string `json:"origin"`
	Breaker
}

// BuildTable turns a snapshot into the page's table, keeping at most maxPairs pair rows (the most
// severe; negative keeps all).
func BuildTable(s pool.Snapshot, maxPairs int) Table {
	t := Table{At: s.At, Exits: []ExitRow{}, Pairs: []PairRow{}, Origins: []OriginRow{}} // [] in JSON, not null
	parked := map[string]bool{}
	for _, e := range s.Exits {
		row := ExitRow{Exit: e.Exit, Tier: e.Tier, Weight: e.Weight, InFlight: e.InFlight, Breaker: view(e.Breaker, s.At)}
		t.Exits = append(t.Exits, row)
		t.Summary.Exits++
		if e.Breaker.Parked {
			parked[e.Exit] = true
			t.Summary.ExitsParked++
		}
		if e.Breaker.State == breaker.Open {
			t.Summary.ExitsOpen++
		}
	}
	for _, p := range s.Pairs {
		t.Pairs = append(t.Pairs, PairRow{Exit: p.Exit, Origin: p.Origin, ExitParked: parked[p.Exit], Rate: p.Rate, Breaker: view(p.Breaker, s.At)})
		t.Summary.PairsTracked++
		switch p.Breaker.State {
		case breaker.Open:
			t.Summary.PairsOpen++
		case breaker.HalfOpen:
			t.Summary.PairsHalfOpen++
		}
	}
	for _, o := range s.Origins {
		t.Origins = append(t.Origins, OriginRow{Origin: o.Origin, Breaker: view(o.Breaker, s.At)})
		if o.Breaker.State == breaker.Open {
			t.Summary.OriginsOpen++
		}
	}
	slices.SortStableFunc(t.Exits, func(a, b ExitRow) int {
		return cmp.Or(cmp.Compare(severity(&b.Breaker), severity(&a.Breaker)), cmp.Compare(a.Tier, b.Tier), cmp.Compare(a.Exit, b.Exit))
	})
	slices.SortStableFunc(t.Pairs, func(a, b PairRow) int {
		return cmp.Or(compareBool(b.ExitParked, a.ExitParked), cmp.Compare(severity(&b.Breaker), severity(&a.Breaker)),
			cmp.Compare(a.Exit, b.Exit), cmp.Compare(a.Origin, b.Origin))
	})
	slices.SortStableFunc(t.Origins, func(a, b OriginRow) int {
		return cmp.Or(cmp.Compare(severity(&b.Breaker), severity(&a.Breaker)), cmp.Compare(a.Origin, b.Origin))
	})
	if maxPairs >= 0 && len(t.Pairs) > maxPairs {
		t.Summary.PairsOmitted = len(t.Pairs) - maxPairs
		t.Pairs = t.Pairs[:maxPairs]
	}
	return t
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
