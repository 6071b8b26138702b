package pool

import (
	"sync/atomic"
	"time"
)

// Goodput per worker-second. A slow pair's answer holds its worker for several times what a fast
// pair's does (3–6 s against 0.2–1 s in the bench's round-3 world). Whether that is worth it
// depends on what else the worker could do meanwhile:
//
//   - A caller that waits for a token (configured limits, no FailFast) gets the fast exit's
//     answer after the wait: the scan takes a slow exit only when no fast exit's token comes
//     sooner than the slow answer would (select.go).
//   - A pick that fails fast hands the worker back at once. When the pool has lately served
//     another origin that does not bind — none of its picks found every fast exit busy or out
//     of tokens in the last minute — the caller has other work, and a fast page there costs a
//     fraction of one slow page's worker time: such a pick passes over slow pairs entirely, and
//     is refused rather than held (a ThrottledError or NoHealthyExitError with the soonest
//     instant a fast exit is ready). A slow pair is then used only by its trickle: its estimate
//     decays with time (latency.go) until it competes as an equal again, and its answer says
//     whether it got faster. This is the informed oracle's rule in the bench (worth: a slow
//     attempt is taken only when a worker-second gets less elsewhere, counted on the origins
//     whose capacity did not bind in the last minute), with "elsewhere" read from the pool's own
//     picks and successes instead of the hidden state.
//   - A pool most of whose picks are refused — more than idleRatio refusals per page served over
//     the last idleWindow, as in a finite crawl whose unbound sites are done or nearly — takes a
//     slow exit that answered (not one whose last answer was a timeout) when nothing else is
//     ready, even while another origin is served unbound: its
//     refused workers mostly find nothing to do elsewhere either (a refusal is a worker waiting,
//     and they outnumber the pages), so the slow answer costs worker time nothing else would
//     have used, and the binding site gets the slow pair's share of its capacity.
//   - A pool that serves one origin alone, or whose every origin served binds, takes a slow exit
//     when nothing else is ready: a refused worker would have nothing else to do, or only work
//     whose fast capacity other workers use anyway (the bench's round-1 world, where every site
//     caps each exit at 12 a minute: the flaky exits' pages are what is left to gain).
//
// servedMix says whether another origin was lately served without binding: one for which no
// pick found every fast exit busy or out of tokens (bound) in the last boundWindow. Only then has
// a refused worker other work that a worker-second pays for; when every origin binds (the bench's
// round-1 world: every site caps each exit), the capacity of each is used whatever a refused
// worker does next, and a slow or flaky pair that is ready adds what it serves. It is written at
// most once per mixSample by successes (a read of one shared word otherwise), so that reports
// from many goroutines do not contend on it.
type servedMix struct {
	// last is the latencyStamp of the latest sampled success.
	last atomic.Uint32
	// free are the latest sampled successes of unbound origins, of two different origins: each
	// the origin's tag (high word) and latencyStamp (low); 0 before any.
	free [2]atomic.Uint64
	// tally counts the pages served and the picks refused lately (idle).
	tally pickTally
}

// pickTally counts the pages served (low word) and the picks refused (high word) in the current
// idleWindow (cur, from the latencyStamp at) and the one before it (prev).
type pickTally struct {
	at        atomic.Uint32
	cur, prev atomic.Uint64
}

const (
	// idleWindow is the span over which served pages and refused picks are counted.
	idleWindow = time.Minute
	// idleRatio is how many refused picks per page served make the pool's workers idle.
	idleRatio = 2
	// idleMin is the fewest refused picks, over the two windows counted, that can.
	idleMin = 64
)

// add counts v (1 for a page served, 1<<32 for a pick refused) at now.
func (t *pickTally) add(now time.Time, v uint64) {
	a := t.at.Load()
	if since := sinceStamp(now, a); a == 0 || since >= idleWindow {
		if t.at.CompareAndSwap(a, latencyStamp(now)) {
			old := t.cur.Swap(0)
			if a == 0 || since >= 2*idleWindow {
				old = 0 // the window before was empty
			}
			t.prev.Store(old)
		}
	}
	t.cur.Add(v)
}

// idle reports whether the picks refused over the last one to two idleWindows outnumber the pages
// served by more than idleRatio to one (and are at least idleMin): the pool's workers mostly wait.
func (t *pickTally) idle(now time.Time) bool {
	a := t.at.Load()
	if since := sinceStamp(now, a); a == 0 || since < 0 || since >= 2*idleWindow {
		return false
	}
	c := t.cur.Load() + t.prev.Load()
	served, refused := c&(1<<32-1), c>>32
	return refused >= idleMin && refused > idleRatio*served
}

// waitsIdle reports whether a pick for o may take the slow pair of exit id, which alone is ready,
// because the pool's workers mostly wait (pickTally.idle), whatever holdsSlow and the other
// exits' tokens say: not when the pair's last answer was a timeout (a flaky exit, whose timeouts
// would fail the exit for every origin), only when it answered, slowly.
func (p *Pool) waitsIdle(now time.Time, o *originState, id uint32) bool {
	return o.load.get(id) == 0 && p.mix.tally.idle(now) && !o.lat.timedOut(id)
}

// noteRefused counts a refused pick at now.
func (m *servedMix) noteRefused(now time.Time) { m.tally.add(now, 1<<32) }

const (
	// mixSample is the shortest interval between two samples of the served origin.
	mixSample = 100 * time.Millisecond
	// mixWindow is how long after an unbound origin was last seen served a refused worker still
	// counts as having other work.
	mixWindow = 30 * time.Second
	// boundWindow is how long after a pick for it found no fast exit ready an origin counts as
	// bound (the informed oracle's: a minute).
	boundWindow = time.Minute
)

// note samples a success for origin o at now.
func (m *servedMix) note(now time.Time, o *originState) {
	m.tally.add(now, 1)
	if v := m.last.Load(); v != 0 && sampledWithin(now, v, mixSample) {
		return
	}
	st := latencyStamp(now)
	m.last.Store(st)
	if !o.lat.unbound(now) {
		return
	}
	tag := o.tag()
	if f := m.free[0].Load(); f != 0 && uint32(f>>32) != tag {
		m.free[1].Store(f)
	}
	m.free[0].Store(uint64(tag)<<32 | uint64(st))
}

// elsewhere reports whether an origin other than o, unbound, was served within mixWindow of now.
func (m *servedMix) elsewhere(now time.Time, o *originState) bool {
	tag := o.tag()
	for i := range m.free {
		f := m.free[i].Load()
		if f == 0 || uint32(f>>32) == tag {
			continue
		}
		if d := sinceStamp(now, uint32(f)); d < 0 || d <= mixWindow {
			return true
		}
	}
	return false
}

// noteBound notes that a pick for the origin found no fast exit ready at now. It writes the
// shared word at most once per mixSample.
func (l *originLatency) noteBound(now time.Time) {
	if sampledWithin(now, l.bound.Load(), mixSample) {
		return
	}
	l.bound.Store(latencyStamp(now))
}

// unbound reports whether no pick for the origin found every fast exit unready within
// boundWindow of now.
func (l *originLatency) unbound(now time.Time) bool {
	b := l.bound.Load()
	if b == 0 {
		return true
	}
	d := sinceStamp(now, b)
	return d >= 0 && d > boundWindow
}

// sinceStamp is the time from latencyStamp st to now: negative if st is later (another
// goroutine's newer instant).
func sinceStamp(now time.Time, st uint32) time.Duration {
	return time.Duration(int32(latencyStamp(now)-st)) * latencyTick
}

// sampledWithin reports whether stamp st is at most d before now, not after it: a sample that
// recent makes another one unnecessary.
func sampledWithin(now time.Time, st uint32, d time.Duration) bool {
	since := sinceStamp(now, st)
	return since >= 0 && since < d
}

// tag returns a 32-bit FNV-1a hash of the origin's key: two origins share one only by chance
// (then the pool counts as serving one origin a little longer).
func (o *originState) tag() uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(o.key); i++ {
		h ^= uint32(o.key[i])
		h *= 16777619
	}
	return h
}

// holdsSlow reports whether a pick for o for which failFast says the caller gets a refusal rather
// than a wait may take a slow pair when only slow ones are ready: not when another origin is
// served unbound (the refused worker serves that one). See also waitsIdle.
func (p *Pool) holdsSlow(now time.Time, o *originState, failFast bool) bool {
	return !failFast || !p.mix.elsewhere(now, o)
}

// failsFast reports whether a pick for r refuses rather than waits for a token (pick).
func (p *Pool) failsFast(r Request) bool {
	return p.gate.FailFast() || r.FailFast || !p.limits
}
