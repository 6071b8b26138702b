package breaker

// tally is what a CLOSED generation remembers of its verdicts, made at its first failure (or, with
// FailureRatio, its first verdict) and dropped when the generation ends, so that an OPEN breaker —
// or a CLOSED one that has not failed since it closed — holds none of it.
//
// at remembers the instants of the last FailureThreshold failures: enough to answer "did
// FailureThreshold failures fall inside the window?" exactly, in O(1), with memory bounded by the
// threshold rather than by the traffic. softAt is when a soft failure began waiting for its other
// half (0: none); volume counts verdicts for the failure-ratio condition (nil without one).
type tally struct {
	at     []int64 // unix nanos; 0 = empty; allocated on the first failure
	next   int
	softAt int64
	volume *volumeBuckets
}

// tallied returns the generation's tally, making it if need be. b.mu is held.
func (b *Breaker) tallied() *tally {
	if b.tally == nil {
		b.tally = &tally{}
		if b.p.s.FailureRatio > 0 {
			b.tally.volume = newVolumeBuckets(int64(b.p.s.Window))
		}
	}
	return b.tally
}

func (r *tally) add(now int64, size int) {
	if r.at == nil {
		r.at = make([]int64, size)
	}
	r.at[r.next] = now
	r.next = (r.next + 1) % len(r.at)
}

// full reports whether the ring holds size failures, all after since.
func (r *tally) full(since int64) bool {
	if r == nil || r.at == nil {
		return false
	}
	oldest := r.at[r.next] // the slot written longest ago
	return oldest != 0 && oldest > since
}

// count returns how many remembered failures are after since; none for a nil tally.
func (r *tally) count(since int64) int {
	if r == nil {
		return 0
	}
	n := 0
	for _, t := range r.at {
		if t != 0 && t > since {
			n++
		}
	}
	return n
}

// volumeBuckets counts verdicts over the window in volumeSlots fixed slots, for the failure-ratio
// condition. Each slot covers window/volumeSlots, so the ratio looks back between 9/10 and the
// whole of the window. It is allocated only when FailureRatio is set.
type volumeBuckets struct {
	width int64
	slot  [volumeSlots]struct {
		epoch     int64
		ok, fails uint32
	}
}

const volumeSlots = 10

func newVolumeBuckets(window int64) *volumeBuckets {
	return &volumeBuckets{width: max(window/volumeSlots, 1)}
}

func (v *volumeBuckets) add(now int64, failed bool) {
	e := now / v.width
	s := &v.slot[uint64(e)%volumeSlots]
	if s.epoch != e {
		s.epoch, s.ok, s.fails = e, 0, 0
	}
	if failed {
		s.fails++
	} else {
		s.ok++
	}
}

// totals returns the verdicts in the slots of the last window.
func (v *volumeBuckets) totals(now int64) (total, fails int) {
	e := now / v.width
	for i := range v.slot {
		s := &v.slot[i]
		if s.epoch > e-volumeSlots && s.epoch <= e {
			total += int(s.ok + s.fails)
			fails += int(s.fails)
		}
	}
	return total, fails
}
