package pool

// Views: an exit set's index of the exits that match one Want. Built the first time a pick of the
// set meets the Want (a pass over the set's exits), kept with the set (which is replaced, never
// modified, when exits join, leave or change), so that a constrained pick draws from the
// matching exits of each tier directly — the same sampling, at the same cost, as over a whole
// tier — instead of scanning for them. A request with no Want reads no view.

// wantView is the exits of one exit set that match one Want, per tier group.
type wantView struct {
	groups []subset // parallel to exitSet.groups
	n      int      // matching exits in all the groups
	ref    wantViewRef
}

// wantViewRef is what a Want caches of the last exit set it was picked in: the set and its view.
// It lives in the view, so that caching it allocates nothing.
type wantViewRef struct {
	set  *exitSet
	view *wantView
}

// subset is the matching exits of one tier group: their indexes in the group, ascending, and
// their cumulative weights when the group's weights differ (nil when they are equal). A nil
// *subset stands for the whole group.
type subset struct {
	idx []int32
	cum []float64
}

// view returns the set's view for w (nil for the nil Want: no constraint).
func (s *exitSet) view(w *Want) *wantView {
	if w == nil {
		return nil
	}
	if r := w.last.Load(); r != nil && r.set == s {
		return r.view
	}
	v, ok := s.views.Load(w)
	if !ok {
		v, _ = s.views.LoadOrStore(w, s.buildView(w))
	}
	view := v.(*wantView)
	w.last.Store(&view.ref)
	return view
}

func (s *exitSet) buildView(w *Want) *wantView {
	v := &wantView{groups: make([]subset, len(s.groups))}
	v.ref = wantViewRef{set: s, view: v}
	for gi := range s.groups {
		g := &s.groups[gi]
		sub := &v.groups[gi]
		sum := 0.0
		for i, es := range g.exits {
			if !w.Admits(es.exit) {
				continue
			}
			sub.idx = append(sub.idx, int32(i))
			if g.cum != nil {
				sum += es.exit.weight
				sub.cum = append(sub.cum, sum)
			}
		}
		v.n += len(sub.idx)
	}
	return v
}

// group returns the subset of group gi a pick draws from: nil for the whole group (no view, or
// every exit of the group matches), else the matching exits, possibly none.
func (v *wantView) group(gi int, g *tierGroup) *subset {
	if v == nil {
		return nil
	}
	sub := &v.groups[gi]
	if len(sub.idx) == len(g.ids) {
		return nil
	}
	return sub
}

// size is how many exits of g a pick may draw from.
func (sub *subset) size(g *tierGroup) int {
	if sub == nil {
		return len(g.ids)
	}
	return len(sub.idx)
}

// index returns the group index of the subset's k-th exit.
func (sub *subset) index(k int) int {
	if sub == nil {
		return k
	}
	return int(sub.idx[k])
}

// weights returns the cumulative weights draws from sub use (nil: equal weights).
func (sub *subset) weights(g *tierGroup) []float64 {
	if sub == nil {
		return g.cum
	}
	return sub.cum
}
