package probe

import "iter"

// grid is how Run lays out a Report's Results: exit by exit, each exit's results for every target
// in order, so that exit e's are Results[e*targets : (e+1)*targets] and target t's are every
// targets-th from t. The zero grid says nothing: the summaries group the results by label.
type grid struct{ exits, targets int }

// fits reports whether g describes n results.
func (g grid) fits(n int) bool { return g.exits > 0 && g.targets > 0 && g.exits*g.targets == n }

// Targets returns an iterator over the summary of each target's probes through every exit, in the
// order of Config.Targets (for a Report from NewReport or decoded from JSON: in the order the
// targets first appear in Results). Each summary is computed from Results under Policy when the
// iterator reaches it and is not kept: a report of a million probes needs no memory for its
// summaries beyond the one in hand. The iterator may be used again; do not change Results
// meanwhile.
func (r *Report) Targets() iter.Seq[TargetSummary] {
	return func(yield func(TargetSummary) bool) {
		for g, s := range r.summaries(true, false) {
			if !yield(TargetSummary{Target: g.key, Origin: g.origin, Summary: *s}) {
				return
			}
		}
	}
}

// Exits returns an iterator over the summary of each exit's probes of every target, in the order
// of Config.Exits (for a Report from NewReport or decoded from JSON: in the order the exits first
// appear in Results). Like Targets, it computes each summary when it reaches it and keeps none.
func (r *Report) Exits() iter.Seq[ExitSummary] {
	return func(yield func(ExitSummary) bool) {
		for g, s := range r.summaries(false, false) {
			if !yield(ExitSummary{Exit: g.key, Summary: *s}) {
				return
			}
		}
	}
}

// summaries yields each target's (byTarget) or exit's group and its summary under r.Policy. With
// reuse, the summary and its maps are valid only until the next step: one accumulator serves
// every group, which spares the garbage of a hundred thousand sets of maps when writing.
func (r *Report) summaries(byTarget, reuse bool) iter.Seq2[group, *Summary] {
	return func(yield func(group, *Summary) bool) {
		a := newAccumulator()
		var s Summary
		for g := range r.groups(byTarget) {
			if reuse {
				a.reset()
			} else {
				a = newAccumulator()
			}
			for res := range g.each {
				a.add(res)
			}
			s.Stats = a.stats()
			s.Assessment = Assess(s.Stats, r.Policy)
			if !yield(g, &s) {
				return
			}
		}
	}
}

// group is the results of one target or exit.
type group struct {
	key    string // the target, or the exit's label
	origin string // the target's origin
	each   iter.Seq[*Result]
}

// groups yields the group of each target (byTarget) or exit, in order of first appearance, its
// results in order. A Report from Run is a grid, walked by index; any other is grouped by key
// first.
func (r *Report) groups(byTarget bool) iter.Seq[group] {
	return func(yield func(group) bool) {
		res := r.Results
		if g := r.grid; g.fits(len(res)) {
			n, stride, step := g.exits, g.targets, 1 // exit e: res[e*stride + k*step], k < targets
			if byTarget {
				n, stride, step = g.targets, 1, g.targets
			}
			m := len(res) / n
			for i := range n {
				first := &res[i*stride]
				key := first.Exit
				if byTarget {
					key = first.Target
				}
				each := func(y func(*Result) bool) {
					for k := range m {
						if !y(&res[i*stride+k*step]) {
							return
						}
					}
				}
				if !yield(group{key, first.Origin, each}) {
					return
				}
			}
			return
		}
		// Group indices by key, keys in order of first appearance: one slice of indices for all.
		key := func(x *Result) string {
			if byTarget {
				return x.Target
			}
			return x.Exit
		}
		at := map[string]int{}
		var firsts []int            // index of each key's first result
		of := make([]int, len(res)) // the group of each result
		for i := range res {
			g, ok := at[key(&res[i])]
			if !ok {
				g = len(firsts)
				at[key(&res[i])] = g
				firsts = append(firsts, i)
			}
			of[i] = g
		}
		counts := make([]int, len(firsts)+1)
		for _, g := range of {
			counts[g+1]++
		}
		for g := range firsts {
			counts[g+1] += counts[g]
		}
		order := make([]int, len(res))
		next := append([]int(nil), counts[:len(firsts)]...)
		for i, g := range of {
			order[next[g]] = int(i)
			next[g]++
		}
		for g, i := range firsts {
			idx := order[counts[g]:counts[g+1]]
			each := func(y func(*Result) bool) {
				for _, k := range idx {
					if !y(&res[k]) {
						return
					}
				}
			}
			if !yield(group{key(&res[i]), res[i].Origin, each}) {
				return
			}
		}
	}
}
