package breaker

// failureRing remembers the instants of the last FailureThreshold failures: enough to answer
// "did FailureThreshold failures fall inside the window?" exactly, in O(1), with memory bounded by
// the threshold rather than by the traffic.
type failureRing struct {
	at   []int64 // unix nanos; 0 = empty; allocated on the first failure
	next int
}

func (r *failureRing) add(now int64, size int) {
	if r.at == nil {
		r.at = make([]int64, size)
	}
	r.at[r.next] = now
	r.next = (r.next + 1) % len(r.at)
}

// full reports whether the ring holds size failures, all after since.
func (r *failureRing) full(since int64) bool {
	if r.at == nil {
		return false
	}
	oldest := r.at[r.next] // the slot written longest ago
	return oldest != 0 && oldest > since
}

// count returns how many remembered failures are after since.
func (r *failureRing) count(since int64) int {
	n := 0
	for _, t := range r.at {
		if t != 0 && t > since {
			n++
		}
	}
	return n
}

func (r *failureRing) reset() {
	clear(r.at)
	r.next = 0
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

func (v *volumeBuckets) reset() { clear(v.slot[:]) }
