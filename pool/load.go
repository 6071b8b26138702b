package pool

import "sync/atomic"

// originLoad counts an origin's attempts in flight per exit, for the pick's comparison: how
// loaded an exit is *for this site* — an exit busy with slow requests for site A is not busy
// for site B, and a pick that counted load per exit across sites starved it of B's requests
// (4–11 % where a fair share was 25 %). The pool-wide count per exit stays in Pool.inflight
// (Snapshot's InFlight).
//
// The counters are slots by exit id modulo loadSlots, not one per pair: a pair holds no memory
// unless it needs a breaker, and a table per origin as long as the pool would cost 400 KB an
// origin at 100,000 exits. In a tier of at most loadSlots consecutive ids no two exits share a
// slot; in a larger one, exits that do share their count, which only ever overestimates an
// exit's load by others' attempts for the same site (with few in flight per site, rarely).
type originLoad [loadSlots]atomic.Int32

// loadSlots is the number of an origin's load counters: 256 bytes an origin.
const loadSlots = 64

func (l *originLoad) get(id uint32) int32 { return l[id%loadSlots].Load() }

func (l *originLoad) add(id uint32, d int32) { l[id%loadSlots].Add(d) }

// startAttempt counts an attempt through exit id for o as in flight; endAttempt counts it out.
func (p *Pool) startAttempt(o *originState, id uint32) {
	p.inflight.add(id, 1)
	o.load.add(id, 1)
}

func (p *Pool) endAttempt(t *ticket) {
	p.inflight.add(t.id, -1)
	t.origin.load.add(t.id, -1)
}
