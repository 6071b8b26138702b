package statuspage

import (
	"cmp"
	"slices"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// actions groups the breakers that are not CLOSED by their last failure's class: what the
// operator has to act on, the class holding the most exits down first. Breakers with no failure
// class (restored from a saved state, say) are left out: there is nothing to say about them.
func actions(exits []ExitRow, pairs []PairRow, origins []OriginRow) []Action {
	by := map[string]*Action{}
	get := func(class string) *Action {
		a := by[class]
		if a == nil {
			a = &Action{Class: class, Hint: HintFor(pool.Class(class)), Examples: []string{}}
			by[class] = a
		}
		return a
	}
	example := func(a *Action, s string) {
		if len(a.Examples) < maxExamples {
			a.Examples = append(a.Examples, s)
		}
	}
	// Exits first, then pairs, then origins, each in its table's order, so the examples name the
	// worst first.
	ex := slices.Clone(exits)
	slices.SortStableFunc(ex, compareExits)
	for _, e := range ex {
		if e.Status != StatusDown || e.LastFailure == "" {
			continue
		}
		a := get(e.LastFailure)
		a.Exits++
		example(a, e.Display)
	}
	pr := slices.Clone(pairs)
	slices.SortStableFunc(pr, func(a, b PairRow) int {
		return cmp.Or(cmp.Compare(severity(&b.Breaker), severity(&a.Breaker)), cmp.Compare(a.Display, b.Display), cmp.Compare(a.Origin, b.Origin))
	})
	for _, p := range pr {
		if p.State == breaker.Closed || p.LastFailure == "" {
			continue
		}
		a := get(p.LastFailure)
		a.Pairs++
		example(a, p.Display+" × "+p.Origin)
	}
	for _, o := range origins {
		if o.State == breaker.Closed || o.LastFailure == "" {
			continue
		}
		a := get(o.LastFailure)
		a.Origins++
		example(a, o.Origin)
	}
	out := make([]Action, 0, len(by))
	for _, a := range by {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b Action) int {
		return cmp.Or(cmp.Compare(b.Exits, a.Exits), cmp.Compare(b.Origins, a.Origins), cmp.Compare(b.Pairs, a.Pairs),
			cmp.Compare(a.Class, b.Class))
	})
	return out
}

// addHints puts into m the hint of every failure class the rows show.
func addHints(m map[string]string, exits []ExitRow, pairs []PairRow, origins []OriginRow) {
	add := func(class string) {
		if class == "" {
			return
		}
		if _, done := m[class]; done {
			return
		}
		if h := HintFor(pool.Class(class)); h != "" {
			m[class] = h
		}
	}
	for i := range exits {
		add(exits[i].LastFailure)
	}
	for i := range pairs {
		add(pairs[i].LastFailure)
	}
	for i := range origins {
		add(origins[i].LastFailure)
	}
}
