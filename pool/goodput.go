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
//   - A pick that fails fast hands the worker back at once. When the pool has lately served more
//     than one origin, the caller has other work, and a fast page of another origin costs a
//     fraction of one slow page's worker time: such a pick passes over slow pairs entirely,
//     and is refused rather than held (a ThrottledError or NoHealthyExitError with the soonest
//     instant a fast exit is ready). A slow pair is then used only by its trickle: its estimate
//     decays with time (latency.go) until it competes as an equal again, and its answer says
//     whether it got faster. This is the informed oracle's rule in the bench (worth: a slow
//     attempt is taken only when a worker-second gets less elsewhere), with "elsewhere" read
//     from the pool's own successes instead of the hidden state.
//   - A pool that serves one origin alone takes a slow exit when nothing else is ready: a refused
//     worker would have nothing else to do.
//
// servedMix says whether the pool's successes lately came from more than one origin. It is
// written at most once per mixSample by successes (a read of one shared word otherwise), so that
// reports from many goroutines do not contend on it.
type servedMix struct {
	// last is the latest sampled success: its origin's tag (high word) and latencyStamp (low).
	last atomic.Uint64
	// mixed is the latencyStamp of the latest sample whose origin differed from the one before.
	mixed atomic.Uint32
}

const (
	// mixSample is the shortest interval between two samples of the served origin.
	mixSample = 100 * time.Millisecond
	// mixWindow is how long after two origins were last seen served in turn the pool still counts
	// as serving several.
	mixWindow = 30 * time.Second
)

// note samples a success for origin o at now.
func (m *servedMix) note(now time.Time, o *originState) {
	st := latencyStamp(now)
	v := m.last.Load()
	if d := int32(st - uint32(v)); v != 0 && d >= 0 && time.Duration(d)*latencyTick < mixSample {
		return
	}
	tag := o.tag()
	if v != 0 && uint32(v>>32) != tag {
		m.mixed.Store(st)
	}
	m.last.Store(uint64(tag)<<32 | uint64(st))
}

// several reports whether more than one origin was served within mixWindow of now.
func (m *servedMix) several(now time.Time) bool {
	at := m.mixed.Load()
	if at == 0 {
		return false
	}
	d := int32(latencyStamp(now) - at)
	return d < 0 || time.Duration(d)*latencyTick <= mixWindow
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

// holdsSlow reports whether a pick for which failFast says the caller gets a refusal rather than
// a wait may take a slow pair when only slow ones are ready: not when the pool serves several
// origins (the refused worker serves another).
func (p *Pool) holdsSlow(now time.Time, failFast bool) bool {
	return !failFast || !p.mix.several(now)
}

// failsFast reports whether a pick for r refuses rather than waits for a token (pick).
func (p *Pool) failsFast(r Request) bool {
	return p.gate.FailFast() || r.FailFast || !p.limits
}
