package breaker

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Breaker is the circuit breaker for one key. Make one with NewBreaker (or New); the zero value is
// not usable. A Breaker is safe for concurrent use. Its memory is a few hundred bytes at most:
// FailureThreshold instants, HalfOpenProbes leases and, with FailureRatio set, ten counters.
type Breaker struct {
	p *Policy
	w Watcher // the owner's hooks; nil for none

	mu sync.Mutex
	// word is gen<<1 | (state != Closed), where gen is the breaker's generation. It is written
	// under mu, after every change of state or generation (publish), and read without mu by Ready,
	// State and ClosedPermit: a CLOSED breaker reads as CLOSED whatever now is, so the mirror
	// answers them without taking the lock, which keeps the pool's peeks at mostly-CLOSED breakers
	// from writing to (and, across cores, bouncing) the breaker's cache line — and it gives a
	// lock-free CLOSED permit the exact generation it was admitted in. Under mu it is also where
	// the generation lives (generation).
	word   atomic.Uint64
	state  State // stored state; OPEN reads as HALF_OPEN once now reaches nextProbe
	parked bool
	level  uint8 // backoff level of the last trip; decays while CLOSED (at most Policy.maxLevel)
	cause  cause // of the last transition
	trips  uint32

	// tally is what the current CLOSED generation remembers of its verdicts; nil until its first
	// failure (or, with FailureRatio, its first verdict), and dropped with the generation.
	tally *tally
	// probe is the HALF_OPEN bookkeeping; nil in the other states.
	probe *probing

	nextProbe int64 // OPEN: when probing may start
	closedAt  int64 // when it last closed, for the level's decay; 0 if it never tripped
	changedAt int64
	// lastUse is when the breaker last admitted or heard a verdict, for Idle. Atomic: a CLOSED
	// permit's success sets it without the lock (Permit.Success).
	lastUse   atomic.Int64
	lastFail  *string // the last failure's reason, interned (reason)
	lastFailT int64
}

// probing is a HALF_OPEN breaker's probe slots, made when it enters HALF_OPEN.
type probing struct {
	leases    []lease // one per probe slot
	inflight  int
	successes int
	seq       uint32
	reopenIn  int64 // the OPEN window a lease expiry leads to, drawn when HALF_OPEN began
}

type lease struct {
	deadline int64 // 0 = free
	seq      uint32
}

// New is shorthand for NewPolicy(s) followed by NewBreaker(onChange).
func New(s Settings, onChange func(Transition)) (*Breaker, error) {
	p, err := NewPolicy(s)
	if err != nil {
		return nil, err
	}
	return p.NewBreaker(onChange), nil
}

// NewBreaker returns a CLOSED breaker governed by p. onChange, if not nil, is called after every
// state change, outside the breaker's lock, possibly concurrently with other calls: it must be quick
// and must not block.
func (p *Policy) NewBreaker(onChange func(Transition)) *Breaker {
	return p.NewBreakerWith(Hooks{OnStateChange: onChange})
}

// Hooks are the optional callbacks of a breaker.
type Hooks struct {
	// OnStateChange is called after every state change, outside the breaker's lock, possibly
	// concurrently with other calls: it must be quick and must not block.
	OnStateChange func(Transition)
	// Mirror is called under the breaker's lock whenever the breaker leaves CLOSED (true) or returns
	// to it (false), in the order the changes happen, after the new generation is set and before
	// ClosedPermit can see it. It lets a table keep a compact copy of "which breakers are not
	// CLOSED" that is never stale for long; it must only store values (atomic writes) and must not
	// call the breaker.
	Mirror func(notClosed bool)
}

// StateChanged calls OnStateChange, if set.
func (h *Hooks) StateChanged(t Transition) {
	if h.OnStateChange != nil {
		h.OnStateChange(t)
	}
}

// MirrorClosed calls Mirror, if set.
func (h *Hooks) MirrorClosed(notClosed bool) {
	if h.Mirror != nil {
		h.Mirror(notClosed)
	}
}

// A Watcher is told of a breaker's changes, as Hooks are (StateChanged is OnStateChange,
// MirrorClosed is Mirror, with the same rules). An owner that holds many breakers implements it
// on itself and embeds each Breaker (Policy.Init), so that a breaker costs no callbacks of its own.
type Watcher interface {
	StateChanged(Transition)
	MirrorClosed(notClosed bool)
}

// NewBreakerWith returns a CLOSED breaker governed by p, with hooks.
func (p *Policy) NewBreakerWith(h Hooks) *Breaker {
	b := new(Breaker)
	if h.OnStateChange != nil || h.Mirror != nil {
		p.Init(b, &h)
	} else {
		p.Init(b, nil)
	}
	return b
}

// Init makes *b a CLOSED breaker governed by p that tells w (nil: nobody) of its changes, in place:
// for an owner that embeds a Breaker in its own struct. b must be the zero Breaker, not yet in use.
func (p *Policy) Init(b *Breaker, w Watcher) {
	b.p, b.w = p, w
}

// publish mirrors the state and generation gen into word, under the lock, after every change of
// either. The Mirror hook runs before the new word is stored, so a reader that sees the new
// generation also sees whatever the hook wrote.
func (b *Breaker) publish(gen uint64) {
	notClosed := b.state != Closed
	w := gen << 1
	if notClosed {
		w |= 1
	}
	if old := b.word.Load(); (old&1 != 0) != notClosed && b.w != nil {
		b.w.MirrorClosed(notClosed)
	}
	b.word.Store(w)
}

// generation is the breaker's generation. Permits of another one are stale.
func (b *Breaker) generation() uint64 { return b.word.Load() >> 1 }

func (b *Breaker) notClosed() bool { return b.word.Load()&1 != 0 }

// ClosedPermit returns a permit for a CLOSED breaker without taking its lock, or ok false if the
// breaker is not CLOSED (then use Acquire, which may hand out a probe). The permit belongs to the
// generation the breaker is in now: if the breaker trips — and even if it closes again — before
// the verdict arrives, the verdict is dropped as stale. It is the cheap path for the many requests
// a CLOSED breaker admits; such permits are never probes.
func (b *Breaker) ClosedPermit() (pm Permit, ok bool) {
	w := b.word.Load()
	if w&1 != 0 {
		return Permit{}, false
	}
	return Permit{b: b, gen: w >> 1, slot: -1}, true
}

// PermitFor returns a CLOSED-state permit of generation gen, as if Acquire had issued it in that
// generation, without taking the breaker's lock. Its verdict applies if the breaker is CLOSED in
// generation gen when the verdict arrives and is dropped otherwise: a CLOSED permit never counts
// against an OPEN or HALF_OPEN breaker, nor against a later CLOSED generation. A table that admits
// a request before its breaker exists (a key seen for the first time) gives the verdict
// PermitFor(0) of the breaker it makes. Such permits are not probes.
func (b *Breaker) PermitFor(gen uint64) Permit { return Permit{b: b, gen: gen, slot: -1} }

// Policy returns the policy the breaker was made with.
func (b *Breaker) Policy() *Policy { return b.p }

// events collects the transitions of one call, so they can be delivered after the lock is released.
// A call makes at most two (a lease expiry, then a new probe).
type events struct {
	n  int
	ts [2]Transition
}

func (e *events) add(t Transition) {
	if e.n < len(e.ts) {
		e.ts[e.n] = t
		e.n++
	}
}

func (b *Breaker) deliver(e *events) {
	if b.w == nil {
		return
	}
	for i := range e.n {
		b.w.StateChanged(e.ts[i])
	}
}

// Ready reports whether Acquire at now would hand out a permit. When it would not, retryAt is the
// earliest instant that may change: the end of the cooldown or of the soonest probe lease. Ready
// changes nothing.
func (b *Breaker) Ready(now time.Time) (ok bool, retryAt time.Time) {
	if !b.notClosed() {
		return true, time.Time{} // CLOSED admits everything; see word
	}
	b.mu.Lock()
	st, until := b.view(now.UnixNano())
	free := st != HalfOpen || b.probeSlotFree(now.UnixNano())
	b.mu.Unlock()
	if st == Open || !free {
		return false, time.Unix(0, until)
	}
	return true, time.Time{}
}

// view computes the state at now without changing anything. until is the end of the cooldown for
// Open, or the soonest lease deadline for HalfOpen.
func (b *Breaker) view(now int64) (State, int64) {
	switch b.state {
	case Open:
		if now < b.nextProbe {
			return Open, b.nextProbe
		}
		return HalfOpen, 0
	case HalfOpen:
		if e, ok := b.expiredLease(now); ok {
			// The probe that held this lease has failed; the breaker is OPEN from e on.
			if reopen := addSat(e, b.probe.reopenIn); now < reopen {
				return Open, reopen
			}
			return HalfOpen, 0
		}
		return HalfOpen, b.soonestLease()
	}
	return Closed, 0
}

// probeSlotFree reports whether a probe could be admitted in HALF_OPEN at now.
func (b *Breaker) probeSlotFree(now int64) bool {
	if b.state == Open {
		return true // the cooldown has ended; no probe is out yet
	}
	if _, ok := b.expiredLease(now); ok {
		return true // view has already checked the re-opened window has passed
	}
	return b.probe.inflight < b.p.s.HalfOpenProbes
}

// leases returns the probe slots: none outside HALF_OPEN.
func (b *Breaker) leases() []lease {
	if b.probe == nil {
		return nil
	}
	return b.probe.leases
}

func (b *Breaker) expiredLease(now int64) (int64, bool) {
	first, found := int64(0), false
	for _, l := range b.leases() {
		if l.deadline != 0 && l.deadline <= now && (!found || l.deadline < first) {
			first, found = l.deadline, true
		}
	}
	return first, found
}

func (b *Breaker) soonestLease() int64 {
	var s int64
	for _, l := range b.leases() {
		if l.deadline != 0 && (s == 0 || l.deadline < s) {
			s = l.deadline
		}
	}
	return s
}

// Acquire is shorthand for AcquireLease(now, 0): a probe gets the policy's ProbeLease.
func (b *Breaker) Acquire(now time.Time) (Permit, bool) { return b.AcquireLease(now, 0) }

// AcquireLease asks for a permit at now. In CLOSED it always succeeds; in OPEN never; in HALF_OPEN
// while a probe slot is free, and the permit is then a probe that holds its slot until its verdict
// or until lease has passed (lease <= 0 means the policy's ProbeLease). The caller must give the
// permit exactly one verdict, in a defer if anything can go wrong in between.
func (b *Breaker) AcquireLease(now time.Time, lease time.Duration) (Permit, bool) {
	if lease <= 0 {
		lease = b.p.s.ProbeLease
	}
	t := now.UnixNano()
	var ev events
	b.mu.Lock()
	b.expireLeases(t, &ev)
	pm, ok := b.acquire(t, int64(lease), &ev)
	b.mu.Unlock()
	b.deliver(&ev)
	return pm, ok
}

func (b *Breaker) acquire(now, leaseFor int64, ev *events) (Permit, bool) {
	switch b.state {
	case Closed:
		b.touch(now)
		return Permit{b: b, gen: b.generation(), slot: -1}, true
	case Open:
		if now < b.nextProbe {
			return Permit{}, false
		}
		b.enterHalfOpen(now, ev)
	}
	pr := b.probe
	if pr.inflight >= b.p.s.HalfOpenProbes {
		return Permit{}, false
	}
	for i := range pr.leases {
		if pr.leases[i].deadline == 0 {
			pr.seq++
			pr.leases[i] = lease{deadline: addSat(now, max(leaseFor, 1)), seq: pr.seq}
			pr.inflight++
			b.touch(now)
			return Permit{b: b, gen: b.generation(), slot: int16(i), seq: pr.seq}, true
		}
	}
	return Permit{}, false // unreachable: inflight < HalfOpenProbes means a slot is free
}

func (b *Breaker) enterHalfOpen(now int64, ev *events) {
	b.state = HalfOpen
	b.parked = false // a probe that fails or expires opens one level up, unparked
	// Drawn now, so that Ready can tell where a lease expiry leads without drawing.
	b.probe = &probing{
		leases:   make([]lease, b.p.s.HalfOpenProbes),
		reopenIn: int64(b.p.jittered(b.p.Cooldown(int(b.level) + 1))),
	}
	b.publish(b.generation() + 1)
	b.note(now, CauseCooldown, Open, ev)
}

// expireLeases applies the failure of every probe whose lease ended at or before now.
func (b *Breaker) expireLeases(now int64, ev *events) {
	if b.state != HalfOpen {
		return
	}
	if e, ok := b.expiredLease(now); ok {
		b.lastFail, b.lastFailT = reason("probe lease expired"), e
		b.level = uint8(min(int(b.level)+1, b.p.maxLevel))
		b.trips++
		b.open(e, addSat(e, b.probe.reopenIn), CauseLeaseExpired, false, ev)
	}
}

// note records a transition that has just happened (b.state is the new state).
func (b *Breaker) note(now int64, c Cause, from State, ev *events) {
	b.changedAt, b.cause = now, causeOf(c)
	t := Transition{
		From: from, To: b.state, At: time.Unix(0, now), Cause: c, Generation: b.generation(),
		Level: int(b.level), Trips: b.trips, Parked: b.parked,
	}
	if b.state == Open {
		t.NextProbe = time.Unix(0, b.nextProbe)
		t.Reason = b.lastReason()
	}
	ev.add(t)
}

// open moves the breaker to OPEN until next.
func (b *Breaker) open(now, next int64, c Cause, parked bool, ev *events) {
	from := b.state
	b.state = Open
	b.parked = parked
	b.nextProbe = next
	b.publish(b.newGeneration())
	b.note(now, c, from, ev)
}

// newGeneration starts a new generation, which the caller publishes: every permit out becomes
// stale, every probe slot is freed, and the failure counts start from nothing. It returns the new
// generation.
func (b *Breaker) newGeneration() uint64 {
	b.probe, b.tally = nil, nil
	return b.generation() + 1
}

// effectiveLevel is the backoff level after the decay earned by staying CLOSED.
func (b *Breaker) effectiveLevel(now int64) int {
	level := int(b.level)
	if b.state != Closed || b.closedAt == 0 || level == 0 {
		return level
	}
	sp := b.p.s.StablePeriod
	if sp < 0 {
		return 0
	}
	stable := now - b.closedAt
	if stable <= 0 {
		return level
	}
	return max(level-int(stable/int64(sp)), 0)
}

// trip opens the breaker one backoff level higher, or for the failure's Retry-After.
//
// A failure with a Retry-After is the origin's own answer to "when?": the breaker stays OPEN that
// long (capped at MaxRetryAfter), never less than BaseCooldown (MinRetryAfterRest with
// Failure.ExactRetryAfter), lengthened only by jitter — and the
// backoff level neither climbs nor applies. A pair that meets a per-minute cap every minute is then
// rested each minute, not for ever-longer windows (a pace problem is the rate limiter's to fix),
// and a pair whose level rose in a ban is not kept out longer than the origin asks once the ban
// has turned into a rate limit. Failures without one climb the ladder, whose window a
// Failure.MaxWindow caps; a Failure.Stretch reads it that many rungs higher.
func (b *Breaker) trip(now int64, f Failure, c Cause, ev *events) {
	b.trips++
	var window time.Duration
	if f.RetryAfter > 0 {
		b.level = uint8(b.effectiveLevel(now))
		floor := b.p.s.BaseCooldown
		if f.ExactRetryAfter {
			floor = MinRetryAfterRest
		}
		window = max(floor, min(f.RetryAfter, b.p.s.MaxRetryAfter))
	} else {
		b.level = uint8(min(b.effectiveLevel(now)+1, b.p.maxLevel))
		window = b.p.Cooldown(int(b.level) + min(max(f.Stretch, 0), maxStretch))
		if f.MaxWindow > 0 {
			window = min(window, max(f.MaxWindow, b.p.s.BaseCooldown))
		}
	}
	b.open(now, addSat(now, int64(b.p.jittered(window))), c, false, ev)
}

// maxStretch bounds Failure.Stretch: past MaxLevel (at most 62) every rung is MaxCooldown.
const maxStretch = 64

// park opens the breaker for ParkFor without raising the backoff level.
func (b *Breaker) park(now int64, ev *events) {
	b.level = uint8(b.effectiveLevel(now))
	b.trips++
	b.open(now, addSat(now, int64(b.p.jittered(b.p.s.ParkFor))), CausePermanent, true, ev)
}

func (b *Breaker) close(now int64, ev *events) {
	b.state = Closed
	b.parked = false
	b.closedAt = now
	b.publish(b.newGeneration()) // probe successes must not dilute the next CLOSED period's ratio
	if b.p.s.StablePeriod < 0 {
		b.level = 0
	}
	b.note(now, CauseProbeOK, HalfOpen, ev)
}

// Snapshot returns the breaker's state at now. It changes nothing.
func (b *Breaker) Snapshot(now time.Time) Snapshot {
	t := now.UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	st, until := b.view(t)
	s := Snapshot{
		State:          st,
		Parked:         b.parked && st == Open,
		Generation:     b.generation(),
		Trips:          b.trips,
		Level:          b.effectiveLevel(t),
		LastCause:      b.cause.Cause(),
		LastFailure:    b.lastReason(),
		LastFailureAt:  unixTime(b.lastFailT),
		LastTransition: unixTime(b.changedAt),
	}
	switch st {
	case Closed:
		s.FailuresInWindow = b.tally.count(t - int64(b.p.s.Window))
	case Open:
		s.NextProbe = time.Unix(0, until)
	}
	if b.state == HalfOpen {
		if _, expired := b.expiredLease(t); expired {
			// What the next call will apply: the probe failed, one level up.
			s.Trips++
			s.Level = min(int(b.level)+1, b.p.maxLevel)
		} else {
			s.ProbesInFlight = b.probe.inflight
		}
	}
	return s
}

// addSat returns t+d, saturating at the largest instant instead of wrapping into the past: a
// breaker parked "forever" must not reopen at once.
func addSat(t, d int64) int64 {
	if d > 0 && t > math.MaxInt64-d {
		return math.MaxInt64
	}
	return t + d
}

// softPending reports whether a soft failure inside the window is waiting for its other half.
func (b *Breaker) softPending(now int64) bool {
	return b.tally != nil && b.tally.softAt != 0 && b.tally.softAt > now-int64(b.p.s.Window)
}

func unixTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// Idle reports whether the breaker holds nothing worth keeping at now, having not been used for at
// least ttl: either CLOSED with no failure in the window and its backoff level fully decayed, or
// OPEN with its cooldown over for at least ttl and no probe out — a key nobody asked for since it
// became probeable (an origin seen once, say). Forgetting that one costs at most the one request a
// probe would have cost. A table of breakers may drop an idle one and make a fresh one when the key
// comes back.
func (b *Breaker) Idle(now time.Time, ttl time.Duration) bool {
	t := now.UnixNano()
	b.mu.Lock()
	defer b.mu.Unlock()
	if t-b.lastUse.Load() < int64(ttl) {
		return false
	}
	switch b.state {
	case Closed:
		return !b.softPending(t) && b.effectiveLevel(t) == 0 && b.tally.count(t-int64(b.p.s.Window)) == 0
	case Open:
		return t-b.nextProbe >= int64(ttl)
	}
	return false // HALF_OPEN: a probe is out
}

// State returns the state at now, as Snapshot would report it, without the rest of the snapshot.
func (b *Breaker) State(now time.Time) State {
	if !b.notClosed() {
		return Closed // see word
	}
	b.mu.Lock()
	st, _ := b.view(now.UnixNano())
	b.mu.Unlock()
	return st
}

// Resting reports whether the breaker refuses at now for a transient failure: OPEN (or HALF_OPEN
// with its probe slots taken) and not parked by a permanent one.
func (b *Breaker) Resting(now time.Time) bool {
	if !b.notClosed() {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	st, _ := b.view(now.UnixNano())
	if st == Open {
		return !b.parked
	}
	return st == HalfOpen && !b.probeSlotFree(now.UnixNano())
}
