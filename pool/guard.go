package pool

import (
	"fmt"
	"sync"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// OriginGuardSettings tune the origin guard: the breaker that notices when an origin, not the
// exits, is failing. When at least MinExits distinct exits, and more than Share of the distinct
// exits that tried the origin within Window, failed it, the guard trips: requests for the origin
// fail fast with an *OriginUnhealthyError, one probe at a time tests it, and pair breakers do not
// count failures from the episode, so a down origin does not burn the whole pool.
// Zero values mean the defaults.
type OriginGuardSettings struct {
	// Disabled turns the guard off.
	Disabled bool
	// MinExits is the least number of distinct failing exits that can trip the guard. Default 3.
	MinExits int
	// Share is the fraction of recently tried exits that must be failing. Default 0.5 (most).
	Share float64
	// Window is how far back attempts count. Default 30 s.
	Window time.Duration
	// BaseCooldown and MaxCooldown bound the guard's OPEN windows. Defaults 10 s and 1 min (a
	// probe is one attempt per origin: guardprobe.go).
	BaseCooldown, MaxCooldown time.Duration
}

// Defaults for OriginGuardSettings.
const (
	DefaultGuardMinExits     = 3
	DefaultGuardShare        = 0.5
	DefaultGuardWindow       = 30 * time.Second
	DefaultGuardBaseCooldown = 10 * time.Second
	DefaultGuardMaxCooldown  = time.Minute
)

// guardSlots is how many distinct exits per origin the guard remembers: enough to judge "most of
// those tried", bounded so an origin costs the same whatever the pool size.
const guardSlots = 16

type guardConfig struct {
	OriginGuardSettings
	policy  *breaker.Policy
	suspect SuspectPolicy // what a Suspect answer from the origin means (never SuspectDefault)
}

// newGuardConfig validates s; the guards' jitter draws from rnd, the pool's random source, so a
// pool given WithSeed is deterministic throughout.
func newGuardConfig(s OriginGuardSettings, rnd func() uint64) (guardConfig, error) {
	if s.MinExits < 0 || s.MinExits > guardSlots {
		return guardConfig{}, fmt.Errorf("pool: OriginGuardSettings.MinExits = %d: must be in [0, %d]", s.MinExits, guardSlots)
	}
	if s.MinExits == 0 {
		s.MinExits = DefaultGuardMinExits
	}
	if s.Share < 0 || s.Share >= 1 || s.Share != s.Share {
		return guardConfig{}, fmt.Errorf("pool: OriginGuardSettings.Share = %v: must be in [0, 1)", s.Share)
	}
	if s.Share == 0 {
		s.Share = DefaultGuardShare
	}
	if s.Window < 0 {
		return guardConfig{}, fmt.Errorf("pool: OriginGuardSettings.Window = %v: must not be negative", s.Window)
	}
	if s.Window == 0 {
		s.Window = DefaultGuardWindow
	}
	if s.BaseCooldown == 0 {
		s.BaseCooldown = DefaultGuardBaseCooldown
	}
	if s.MaxCooldown == 0 {
		s.MaxCooldown = max(DefaultGuardMaxCooldown, s.BaseCooldown)
	}
	pol, err := breaker.NewPolicy(breaker.Settings{
		FailureThreshold: 1, BaseCooldown: s.BaseCooldown, MaxCooldown: s.MaxCooldown,
		Rand: func() float64 { return float64(rnd()>>11) / (1 << 53) },
	})
	if err != nil {
		return guardConfig{}, fmt.Errorf("pool: OriginGuardSettings: %w", err)
	}
	return guardConfig{OriginGuardSettings: s, policy: pol, suspect: SuspectEvidence}, nil
}

// originGuard is one origin's guard: a breaker, tripped by hand, and the recent outcome of each of
// the last guardSlots distinct exits that tried the origin. The same record is the evidence
// SuspectEvidence judges a plain 403 by (suspect.go).
//
// It lives in its origin's state, its breaker in it: a pick reads the breaker's word, and at
// 1,000 origins a guard and a breaker of their own were two cache misses more per pick.
type originGuard struct {
	cfg *guardConfig // first: the pick reads it and the breaker's word, in one cache line
	b   breaker.Breaker

	mu      sync.Mutex
	recent  [guardSlots]guardEntry
	failing uint16 // distinct failing exits when it last tripped (at most guardSlots)
	// lone holds the minutes (loneMinute) of the origin's two latest lone 403s, newest first, 0
	// for none (suspect.go: forbidsPaths); kept when recent is cleared. Packed beside failing, so
	// that the guard keeps its size and the state its layout (layout_test.go).
	lone     [2]uint16
	lastSeen int64
}

type guardEntry struct {
	exit   uint32 // id + 1; 0 = empty
	at     int64
	failed bool
	// streak counts the Suspect answers (plain 403s, judged a block or not; never failed) in a
	// row through the exit, the latest included, at most 255: 0 when the latest was another answer.
	streak uint8
	// served is the PathOf the exit's latest served answer (0: none known), kept through
	// the Suspect answers after it.
	served uint16
	// refused is the PathOf the exit's latest Suspect answer (0: none known); it counts while
	// that answer is the exit's latest (streak > 0).
	refused uint16
}

// suspect reports whether the exit's latest answer was a Suspect one.
func (e *guardEntry) suspect() bool { return e.streak > 0 }

// initOriginGuard makes o's guard, in place.
func (p *Pool) initOriginGuard(o *originState) {
	g := &o.guard
	g.cfg = &p.guard
	if o.rule != nil {
		g.cfg = &o.rule.guard
	}
	g.cfg.policy.Init(&g.b, &breaker.Hooks{OnStateChange: func(t breaker.Transition) {
		if t.To == breaker.Closed {
			g.mu.Lock()
			g.recent = [guardSlots]guardEntry{}
			g.mu.Unlock()
		}
		p.obs.stateChanged(StateChange{Scope: ScopeOrigin, Origin: o.key, Transition: t})
	}})
}

// admit asks the guard to let a request for the origin through (its key at origin: a refusal
// names it, and the common case does not load it). It returns the guard's permit
// (a probe while the guard is HALF_OPEN) or the error to refuse the request with.
func (g *originGuard) admit(now time.Time, origin *string) (breaker.Permit, error) {
	if g.cfg.Disabled {
		return breaker.Permit{}, nil
	}
	if pm, ok := g.b.ClosedPermit(); ok {
		// The common case, without the breaker's lock (every request for the origin passes here).
		return pm, nil
	}
	pm, ok := g.b.Acquire(now)
	if ok {
		return pm, nil
	}
	_, retryAt := g.b.Ready(now)
	g.mu.Lock()
	failing := g.failing
	g.mu.Unlock()
	return pm, &OriginUnhealthyError{Origin: *origin, FailingExits: int(failing), RetryIn: max(retryAt.Sub(now), 0)}
}

// observe feeds the guard one verdict for the origin through exit id, with the permit admit gave.
// It reports whether the pair breaker should ignore the verdict's failure: the origin is to blame.
//
// A Suspect answer (a plain 403, as judgeSuspect left it) counts as the origin answering, as a 403
// always did: an exit tried, not failing. It is recorded as Suspect for the evidence, and a
// disabled guard still records what the evidence needs, when the origin's policy asks for it.
func (g *originGuard) observe(now time.Time, id uint32, v Verdict, pm breaker.Permit, path uint16) (originsFault bool) {
	suspect := v.Suspect && v.Scope == ScopePair && (v.Outcome == Success || v.Outcome == Transient)
	counts := v.Scope == ScopePair && (v.Outcome == Success || suspect || (v.Outcome == Transient && originPlausible(v.Class)))
	failed := counts && v.Outcome == Transient && !suspect
	if g.cfg.Disabled {
		if counts && g.cfg.suspect == SuspectEvidence {
			t := now.UnixNano()
			g.mu.Lock()
			g.lastSeen = t
			g.record(id, t, false, suspect, path)
			g.mu.Unlock()
		}
		return false
	}
	if pm.Probe() {
		switch {
		case failed:
			pm.Failure(now, breaker.Failure{Reason: string(v.Class)})
			return true
		case counts:
			pm.Success(now)
		default:
			pm.Neutral(now)
		}
		return false
	}
	if g.b.State(now) != breaker.Closed {
		// In flight when the guard tripped: part of the episode.
		pm.Neutral(now)
		return failed
	}
	if !counts {
		pm.Neutral(now)
		return false
	}
	t := now.UnixNano()
	g.mu.Lock()
	g.lastSeen = t
	g.record(id, t, failed, suspect, path)
	trip := false
	if failed {
		tried, failing := g.tally(t - int64(g.cfg.Window))
		trip = failing >= g.cfg.MinExits && float64(failing) > g.cfg.Share*float64(tried)
		if trip {
			g.failing = uint16(failing)
			g.recent = [guardSlots]guardEntry{}
		}
	}
	g.mu.Unlock()
	if trip {
		pm.Failure(now, breaker.Failure{Reason: string(v.Class)})
		return true
	}
	pm.Neutral(now)
	return false
}

// originPlausible reports whether a failure of this class may be the origin's doing rather than
// the exit's: timeouts, dropped connections, 5xx, an unreachable target. A 429 or a challenge page
// is a judgement of one IP and stays with its pair, even when many IPs get it at once: each pair
// then opens on its own schedule, and pairs not yet judged keep serving.
func originPlausible(c Class) bool {
	return c != ClassRateLimited && c != ClassBlocked
}

// record remembers the latest outcome through exit id, replacing the oldest entry if id is new.
func (g *originGuard) record(id uint32, t int64, failed, suspect bool, path uint16) {
	oldest, e := 0, (*guardEntry)(nil)
	for i := range g.recent {
		if g.recent[i].exit == id+1 {
			e = &g.recent[i]
			break
		}
		if g.recent[i].at < g.recent[oldest].at {
			oldest = i
		}
	}
	if e == nil {
		e = &g.recent[oldest]
		*e = guardEntry{exit: id + 1}
	}
	if !suspect && !failed && e.streak == 1 && t-e.at <= int64(g.cfg.Window) {
		g.lone[0], g.lone[1] = loneMinute(t), g.lone[0] // one 403 between two served answers (suspect.go)
	}
	e.at, e.failed = t, failed
	switch {
	case !suspect:
		e.streak = 0
		if !failed && path != 0 {
			e.served = path
		}
	default:
		e.refused = path
		if e.streak < 255 {
			e.streak++
		}
	}
}

func (g *originGuard) tally(since int64) (tried, failing int) {
	for _, e := range g.recent {
		if e.exit != 0 && e.at > since {
			tried++
			if e.failed {
				failing++
			}
		}
	}
	return tried, failing
}

// idle reports whether the guard remembers nothing worth keeping.
func (g *originGuard) idle(now time.Time, ttl time.Duration) bool {
	if !g.b.Idle(now, ttl) {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return now.UnixNano()-g.lastSeen >= int64(ttl)
}
