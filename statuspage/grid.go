package statuspage

import (
	"cmp"
	"slices"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Bounds of the exit × origin grid: a pool with a thousand origins does not make a thousand-column
// page. WithGrid changes them.
const (
	DefaultGridExits   = 100 // rows: the exits in the most trouble
	DefaultGridOrigins = 12  // columns: the origins with the most breaker activity
)

// Orders of the grid's rows, chosen with ?sort= on the page's URL.
const (
	SortStatus = "status" // down first (parked, OPEN, HALF_OPEN), then degraded, then healthy; the default
	SortName   = "name"   // by display name
)

// Grid is the exit × origin grid: a row per exit, a column per origin, each cell the pair's
// breaker. It is bounded: the rows are the exits in the most trouble (whatever the sort), the
// columns the origins with the most breaker activity — guard OPEN, then the most pairs OPEN or
// HALF_OPEN, then the most pairs tracked, then the most failures in the window.
type Grid struct {
	Origins []GridOrigin `json:"origins"` // the columns
	Rows    []GridRow    `json:"rows"`
	Sort    string       `json:"sort"` // SortStatus or SortName
	// OriginsOmitted counts origins beyond the columns; ExitsOmitted exits beyond the rows, of
	// which ExitsOmittedUnhealthy are degraded or down.
	OriginsOmitted        int `json:"origins_omitted"`
	ExitsOmitted          int `json:"exits_omitted"`
	ExitsOmittedUnhealthy int `json:"exits_omitted_unhealthy"`
}

// GridOrigin is one column: an origin, its guard's state and how many of its pairs are in trouble.
type GridOrigin struct {
	Origin       string        `json:"origin"`
	Guard        breaker.State `json:"guard"`
	PairsTrouble int           `json:"pairs_trouble"` // pairs OPEN or HALF_OPEN
	PairsTracked int           `json:"pairs_tracked"`
}

// GridRow is one exit's row: the exit's own breaker (as in Table.Exits) and a cell per column.
type GridRow struct {
	ExitRow
	Cells []Cell `json:"cells"` // one per Grid.Origins, in order
	// OtherTrouble counts the exit's pairs OPEN or HALF_OPEN for origins not among the columns.
	OtherTrouble int `json:"other_trouble"`
}

// Cell is one (exit, origin) pair in the grid. A pair the pool holds no breaker for (it has not
// failed lately) is not Tracked: CLOSED and healthy.
type Cell struct {
	Tracked          bool          `json:"tracked"`
	State            breaker.State `json:"state"`
	Parked           bool          `json:"parked,omitempty"`
	NextProbeIn      float64       `json:"next_probe_in_seconds,omitempty"`
	FailuresInWindow int           `json:"failures_in_window,omitempty"`
	LastFailure      string        `json:"last_failure,omitempty"`
	Rate             float64       `json:"rate,omitempty"` // requests a second; 0: no limit
}

// originActivity is what ranks an origin for a column.
type originActivity struct {
	origin                     string
	guard                      breaker.State
	guardRank                  int
	trouble, tracked, failures int
}

func buildGrid(exits []ExitRow, pairs []PairRow, origins []OriginRow, l layout) Grid {
	g := Grid{Origins: []GridOrigin{}, Rows: []GridRow{}, Sort: l.sort}

	act := map[string]*originActivity{}
	get := func(o string) *originActivity {
		a := act[o]
		if a == nil {
			a = &originActivity{origin: o}
			act[o] = a
		}
		return a
	}
	for i := range origins {
		a := get(origins[i].Origin)
		a.guard, a.guardRank = origins[i].State, severity(&origins[i].Breaker)
	}
	for i := range pairs {
		a := get(pairs[i].Origin)
		a.tracked++
		a.failures += pairs[i].FailuresInWindow
		if pairs[i].State != breaker.Closed {
			a.trouble++
		}
	}
	cols := make([]*originActivity, 0, len(act))
	for _, a := range act {
		cols = append(cols, a)
	}
	slices.SortFunc(cols, func(a, b *originActivity) int {
		return cmp.Or(cmp.Compare(b.guardRank, a.guardRank), cmp.Compare(b.trouble, a.trouble), cmp.Compare(b.tracked, a.tracked),
			cmp.Compare(b.failures, a.failures), cmp.Compare(a.origin, b.origin))
	})
	if l.gridOrigins >= 0 && len(cols) > l.gridOrigins {
		g.OriginsOmitted = len(cols) - l.gridOrigins
		cols = cols[:l.gridOrigins]
	}
	colAt := make(map[string]int, len(cols))
	for i, a := range cols {
		colAt[a.origin] = i
		g.Origins = append(g.Origins, GridOrigin{Origin: a.origin, Guard: a.guard, PairsTrouble: a.trouble, PairsTracked: a.tracked})
	}

	rows := slices.Clone(exits)
	slices.SortStableFunc(rows, compareExits) // the rows kept are the most troubled, whatever the sort
	if l.gridExits >= 0 && len(rows) > l.gridExits {
		for _, e := range rows[l.gridExits:] {
			g.ExitsOmitted++
			if e.Status != StatusHealthy {
				g.ExitsOmittedUnhealthy++
			}
		}
		rows = rows[:l.gridExits]
	}
	if l.sort == SortName {
		slices.SortStableFunc(rows, func(a, b ExitRow) int { return cmp.Or(cmp.Compare(a.Display, b.Display), cmp.Compare(a.Exit, b.Exit)) })
	}
	rowAt := make(map[string]int, len(rows))
	cells := make([]Cell, len(rows)*len(cols)) // one allocation for the whole grid
	for i, e := range rows {
		rowAt[e.Exit] = i
		g.Rows = append(g.Rows, GridRow{ExitRow: e, Cells: cells[i*len(cols) : (i+1)*len(cols) : (i+1)*len(cols)]})
	}
	for i := range pairs {
		p := &pairs[i]
		r, ok := rowAt[p.Exit]
		if !ok {
			continue
		}
		c, ok := colAt[p.Origin]
		if !ok {
			if p.State != breaker.Closed {
				g.Rows[r].OtherTrouble++
			}
			continue
		}
		g.Rows[r].Cells[c] = Cell{Tracked: true, State: p.State, Parked: p.Parked, NextProbeIn: p.NextProbeIn,
			FailuresInWindow: p.FailuresInWindow, LastFailure: p.LastFailure, Rate: p.Rate}
	}
	return g
}
