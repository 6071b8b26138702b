package pool

import (
	"maps"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Latency-aware selection. A worker that waits 3 s on a slow exit serves a tenth of the pages it
// would serve through a 0.3 s one; picking by in-flight count alone sends a slow exit its share
// of new requests whenever it holds fewer than the others, so in a pool with one slow exit most
// workers end up waiting on it. LeastLoaded therefore compares candidates by expected latency ×
// (in flight + 1), the cost of Finagle's "peak EWMA" balancer (finagle-core's PeakEwma; Envoy's
// least-request balancer weighs active requests the same way), per (exit, origin):
//
//   - Each origin keeps a typical latency: a moving average of the answers of its pairs that are
//     not tracked as slow. A pair whose answer takes more than slowFactor × the typical (and more
//     than latencyFloor) is tracked: it gets an estimate of its own, which jumps to any slower
//     answer at once (the "peak") and otherwise moves towards each answer with weight
//     1 − exp(−Δt/latencyDecay), at most 1 − latencyMemory (a pair answered rarely is judged on
//     more than its last answer). A timeout is an answer as long as the worker waited for it, so
//     a flaky exit costs what its timeouts make it cost on average. When it is back under
//     fastFactor × the typical it is no longer tracked. An exit slow for one site is tracked for
//     that site only: another site sees it at its typical latency.
//   - A slow pair is passed over while another exit is ready (passOver; the scan's rule for when
//     only slow ones are, goodput.go). Read at a pick, a tracked estimate decays towards the
//     typical with time since its last answer (trickleDecay), so a slow exit left alone for a
//     while is tried again — one attempt at a time, a trickle that notices when it got faster —
//     instead of never. After a timeout it decays three times as fast (timeoutDecay): a timeout
//     never reached the site, so it says nothing of whether the site serves the pair again.
//   - Untracked pairs all cost the typical: among them the comparison is the in-flight count,
//     as before; an origin with no tracked pair reads nothing more than before at a pick. A
//     tracked estimate decayed under fastFactor × the typical costs the typical too, so that a
//     once-slow exit competes as an equal again even where nothing is ever in flight at a pick.
//   - Slow start (Envoy's slow_start_window, HAProxy's slowstart): a pair whose probe closed it
//     after a trip is tracked for rampWindow as ramping — a candidate drawn for it takes part in
//     the pick only with probability age/rampWindow (at least rampFloor) — so its share grows
//     over half a minute instead of jumping to full at once, when a site that just lifted a ban
//     is likeliest to ban again.
//
// The latency of an attempt is the time from its admission (after any wait for a token) to its
// report: for the transport, until the body ended, which is what the worker spent on it.
// Successes and timeouts are samples; other failures say more about the exit than about its speed
// and are judged by the breakers.
const (
	// latencyDecay is the time constant of a tracked pair's estimate (Finagle's default decay time).
	latencyDecay = 60 * time.Second
	// trickleDecay is the time constant with which a tracked estimate decays towards the typical
	// while its pair is left alone: it comes back for one attempt (its trickle) when decayed under
	// fastFactor × the typical — after about 10 min for an answer 10× the typical, 14 for a timeout
	// 25× it. Each trickle holds a worker for a slow answer; with latencyDecay (1 min) the slow
	// and flaky pairs' trickles held a tenth of the bench's round-3 workers.
	trickleDecay = 3 * time.Minute
	// timeoutDecay is trickleDecay for a pair whose last answer was a timeout: a timeout never
	// reached the site, so it says nothing of whether the site serves the pair (a ban over), and
	// a flaky exit's next attempt is likelier served than not. From a 15 s timeout 25× the
	// typical, the trickle comes back after about 4 min instead of 14.
	timeoutDecay = time.Minute
	// latencyMemory is the least weight a tracked estimate keeps at an answer, however long ago
	// the last one was: a pair answered rarely (its trickle) is judged on more than one answer, so
	// that a flaky exit whose every third attempt times out is not back to full share at its
	// first fast one.
	latencyMemory = 0.5
	// slowFactor: an answer this many times the origin's typical latency makes its pair tracked.
	slowFactor = 3
	// fastFactor: a tracked pair whose estimate falls under this many times the typical is dropped.
	fastFactor = 1.5
	// latencyFloor: answers faster than this are never slow (jitter on fast links, or on a loaded
	// machine). With slowFactor 3 a pair is tracked only for a gap no noise of one answer makes
	// often: the slow exits that matter answer 10–20× slower than the others (3–6 s against 0.3 s).
	// 250 ms, not 50: a tracked pair is passed over until its trickle, minutes later, and on a
	// loaded machine one loopback answer of 60 ms where the typical is 2 ms took a fast exit out
	// of a site (transport's TestIntegSlowForOneSiteKeepsItsShareOfAnother, 3 of 400). The bench's
	// worlds answer in 0.2 s and more, where slowFactor × the typical is above it anyway.
	latencyFloor = 250 * time.Millisecond
	// typicalWeight is the weight of one answer in the origin's typical latency.
	typicalWeight = 1.0 / 16
	// latencyTick is the resolution of a tracked estimate's timestamp.
	latencyTick = 10 * time.Millisecond
	// rampWindow is how long a pair back from OPEN ramps up to its full share; rampFloor is the
	// share of its candidacies it keeps at first.
	rampWindow = 30 * time.Second
	rampFloor  = 0.1
)

// originLatency is an origin's latency state: its typical latency and its tracked (slow) pairs.
type originLatency struct {
	// tracked maps exit ids to their pair's estimate. The map is never modified once published:
	// a pair joins or leaves with a copy (rare: it takes a change of speed), and an estimate
	// changes in place, so a pick reads it without a lock.
	tracked atomic.Pointer[map[uint32]*pairLatency]
	typical atomic.Uint64 // math.Float64bits of seconds; 0 before the first sample
	bound   atomic.Uint32 // latencyStamp of the latest pick that found no fast exit ready (goodput.go)
	slow    bitTable      // per exit id: the pair is tracked
	mu      sync.Mutex    // serialises changes to tracked's membership
}

// pairLatency is a tracked pair's state. v is its estimate, packed so that it is read and
// written whole: the estimate in seconds (float32 bits, high word; 0 when it is not slow, only
// ramping) and the instant of its last answer in latencyTicks since episodeEpoch (low word; ages
// are computed modulo 2³², valid for 497 days). ramp is the latencyStamp of the start of its
// ramp, 0 when it is not ramping.
type pairLatency struct {
	v    atomic.Uint64
	ramp atomic.Uint32
	// timedOut: an answer of the pair timed out since it was tracked (a flaky exit, not only a
	// slow one; goodput.go's waitsIdle).
	timedOut atomic.Bool
}

// rampAge returns how long the pair has been ramping at now, and whether it still is.
func (pl *pairLatency) rampAge(now time.Time) (time.Duration, bool) {
	r := pl.ramp.Load()
	if r == 0 {
		return 0, false
	}
	age := time.Duration(max(int32(latencyStamp(now)-r), 0)) * latencyTick
	return age, age < rampWindow
}

// latencyStamp reads t in latencyTicks since episodeEpoch, never 0 (which says "no ramp").
// It reads nanoseconds rather than t.Sub, which weighs monotonic readings it does not need here.
func latencyStamp(t time.Time) uint32 {
	return max(uint32((t.UnixNano()-episodeEpochNanos)/int64(latencyTick)), 1)
}

// packLatency packs est and now; timedOut (the last answer was a timeout) is the estimate's sign.
func packLatency(est float64, now time.Time, timedOut bool) uint64 {
	if timedOut {
		est = -est
	}
	return uint64(math.Float32bits(float32(est)))<<32 | uint64(latencyStamp(now))
}

func (pl *pairLatency) load(now time.Time) (est float64, age time.Duration, timedOut bool) {
	v := pl.v.Load()
	est = float64(math.Float32frombits(uint32(v >> 32)))
	if d := int32(latencyStamp(now) - uint32(v)); d > 0 {
		age = time.Duration(d) * latencyTick
	}
	return math.Abs(est), age, math.Signbit(est)
}

// typicalSeconds returns the origin's typical latency in seconds, 0 before any sample.
func (l *originLatency) typicalSeconds() float64 {
	return math.Float64frombits(l.typical.Load())
}

// tracking reports whether any of the origin's pairs is tracked as slow.
func (l *originLatency) tracking() bool {
	m := l.tracked.Load()
	return m != nil && len(*m) > 0
}

// lookup returns the tracked state of the pair of exit id, or nil.
func (l *originLatency) lookup(id uint32) *pairLatency {
	if !l.slow.get(id) {
		return nil
	}
	m := l.tracked.Load()
	if m == nil {
		return nil
	}
	return (*m)[id]
}

// estimate returns the expected latency, in seconds, of the pair of exit id at now: its tracked
// estimate decayed towards typ by the time since its last answer, or typ when it is not tracked
// as slow or has decayed under fastFactor × typ.
func (l *originLatency) estimate(now time.Time, id uint32, typ float64) float64 {
	pl := l.lookup(id)
	if pl == nil {
		return typ
	}
	est, age, timedOut := pl.load(now)
	if est <= typ {
		return typ
	}
	decay := trickleDecay
	if timedOut {
		decay = timeoutDecay
	}
	if d := typ + (est-typ)*math.Exp(-age.Seconds()/decay.Seconds()); d >= fastFactor*typ {
		return d
	}
	return typ
}

// timedOut reports whether an answer of the tracked pair of exit id timed out since it was
// tracked.
func (l *originLatency) timedOut(id uint32) bool {
	pl := l.lookup(id)
	return pl != nil && pl.timedOut.Load()
}

// isSlow reports whether the pair of exit id is slow for the origin at now: tracked, and its
// decayed estimate still above fastFactor × the typical. A pick takes a slow exit only when no
// other is ready (sample, scan), as the informed oracle of the bench's round-3 world does.
func (l *originLatency) isSlow(now time.Time, id uint32) bool {
	if !l.slow.get(id) {
		return false
	}
	typ := l.typicalSeconds()
	return l.estimate(now, id, typ) > typ
}

// ramped reports whether a candidate drawn for the pair of exit id takes part in a pick at now:
// always, unless the pair is ramping, when with probability age/rampWindow (at least rampFloor);
// r is a uniform random draw.
func (l *originLatency) ramped(now time.Time, id uint32, r uint64) bool {
	pl := l.lookup(id)
	if pl == nil {
		return true
	}
	age, ramping := pl.rampAge(now)
	if !ramping {
		return true
	}
	keep := max(age.Seconds()/rampWindow.Seconds(), rampFloor)
	return float64(r>>11)/(1<<53) < keep
}

// startRamp makes the pair of exit id ramp from now (it just closed after a trip).
func (l *originLatency) startRamp(now time.Time, id uint32) {
	l.track(now, id, 0, false).ramp.Store(latencyStamp(now))
}

// observe takes one answer of the pair of exit id that took d; timedOut says it was a timeout.
func (l *originLatency) observe(now time.Time, id uint32, d time.Duration, timedOut bool) {
	s := d.Seconds()
	if s <= 0 {
		return
	}
	typ := l.typicalSeconds()
	if pl := l.lookup(id); pl != nil {
		if timedOut {
			pl.timedOut.Store(true)
		}
		l.update(now, id, pl, s, typ, timedOut)
		return
	}
	if typ > 0 && s > slowFactor*typ && d > latencyFloor {
		pl := l.track(now, id, s, timedOut)
		pl.ramp.Store(0)
		if timedOut {
			pl.timedOut.Store(true)
		}
		return
	}
	l.noteTypical(typ, s)
}

// noteTypical moves the typical latency typ by an untracked answer s (seconds). Load and store,
// not a CAS loop: an update lost to a concurrent one only weights that answer a little less.
func (l *originLatency) noteTypical(typ, s float64) {
	if typ == 0 {
		typ = s
	} else {
		typ += (s - typ) * typicalWeight
	}
	l.typical.Store(math.Float64bits(typ))
}

// update moves a tracked pair's estimate with answer s (seconds): up at once to a slower one
// (peak), else towards it by the time since the last; a pair back near the typical is dropped,
// unless it is ramping (then only its estimate is).
func (l *originLatency) update(now time.Time, id uint32, pl *pairLatency, s, typ float64, timedOut bool) {
	est, age, _ := pl.load(now)
	_, ramping := pl.rampAge(now)
	switch {
	case est == 0 && (s <= slowFactor*typ || s <= latencyFloor.Seconds()):
		// A ramping pair that is not slow: its answers feed the typical as any untracked one's.
		// The floor holds for it as for an untracked pair (observe): without it, one loopback
		// answer of a few milliseconds made a pair back from a ban slow, passed over for
		// minutes with no breaker transition (issue 35).
		if !ramping {
			l.untrack(id)
		}
		l.noteTypical(typ, s)
		return
	case s >= est:
		est = s
	default:
		w := max(math.Exp(-age.Seconds()/latencyDecay.Seconds()), latencyMemory)
		est = est*w + s*(1-w)
	}
	if est < fastFactor*typ {
		if !ramping {
			l.untrack(id)
			return
		}
		est = 0
	}
	pl.v.Store(packLatency(est, now, timedOut))
}

// track tracks the pair of exit id with estimate s (seconds; 0: not slow), timedOut if s was a
// timeout, and returns its state.
func (l *originLatency) track(now time.Time, id uint32, s float64, timedOut bool) *pairLatency {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.tracked.Load()
	if old != nil {
		if pl := (*old)[id]; pl != nil {
			if est, _, _ := pl.load(now); s > 0 || est == 0 {
				pl.v.Store(packLatency(s, now, timedOut)) // tracked meanwhile
			}
			return pl
		}
	}
	m := map[uint32]*pairLatency{}
	if old != nil {
		m = maps.Clone(*old)
	}
	pl := &pairLatency{}
	pl.v.Store(packLatency(s, now, timedOut))
	m[id] = pl
	l.tracked.Store(&m)
	l.slow.set(id, true)
	return pl
}

// untrack stops tracking the pair of exit id: it costs the typical again.
func (l *originLatency) untrack(id uint32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := l.tracked.Load()
	if old == nil || (*old)[id] == nil {
		return
	}
	l.slow.set(id, false)
	m := maps.Clone(*old)
	delete(m, id)
	l.tracked.Store(&m)
}

// latencySample reports whether a verdict's elapsed time says how fast its pair is: a success,
// or a timeout (the worker waited that long and got nothing).
func latencySample(v Verdict) bool {
	return v.Outcome == Success || v.Class == ClassTimeout
}

// prefer reports whether candidate b is to be preferred to a for origin o at now: its expected
// latency × (in flight for o + 1) is lower. Before the origin tracks any pair, that is the lower
// in-flight count, read from the origin's counters alone (load.go).
func (p *Pool) prefer(now time.Time, o *originState, a, b candidate) bool {
	na, nb := o.load.get(a.id), o.load.get(b.id)
	if !o.lat.tracking() {
		return nb < na
	}
	typ := o.lat.typicalSeconds()
	ca := o.lat.estimate(now, a.id, typ) * float64(na+1)
	cb := o.lat.estimate(now, b.id, typ) * float64(nb+1)
	return cb < ca
}

// cost is what LeastLoaded compares for exit id at o at now: expected latency × (in flight + 1).
func (p *Pool) cost(now time.Time, o *originState, id uint32) float64 {
	return o.lat.estimate(now, id, o.lat.typicalSeconds()) * float64(o.load.get(id)+1)
}

// passOver reports whether a pick passes over exit id for o while another may be ready: its
// pair is slow — unless its breakers are out of CLOSED, when the attempt is a probe, which says
// whether a ban or a rest is over and must not wait behind faster exits.
func (p *Pool) passOver(now time.Time, o *originState, id uint32) bool {
	return o.lat.passes(now, id, o.load.get(id) > 0) && !o.open.get(id) && !p.exitOpen.get(id)
}

// passes reports whether a pick passes over the pair of exit id at now: it is slow (isSlow), or
// it was slow and its estimate has decayed, but busy says an attempt of it is in flight — its
// trickle, whose answer will say whether it got faster; until then the others are not sent
// after it (a pair that decays while fast exits lack tokens would otherwise take every request).
func (l *originLatency) passes(now time.Time, id uint32, busy bool) bool {
	if !l.slow.get(id) {
		return false
	}
	if busy {
		if pl := l.lookup(id); pl != nil {
			if est, _, _ := pl.load(now); est > 0 {
				return true
			}
		}
	}
	typ := l.typicalSeconds()
	return l.estimate(now, id, typ) > typ
}
