package pool

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// Learning from an origin: its pace and how long its bans last.
//
// Pace. A pair that meets a 429 with a Retry-After learns the origin's window from it and is paced
// at that rate from then on (ratelimit.Pair.Limited); pairs that never met one are not paced. What
// the origin's pairs learn is kept per origin (originPace) and is the first pace of each other pair
// of the origin at its first 429, which otherwise would only rest until the Retry-After and learn
// nothing yet: the origin's limit is usually the same for every IP.
//
// Recovery. A pair tripped by a block (a challenge page, a plain 403 judged a ban) is probed on
// the breaker's backoff ladder, but never less often than once per the larger of maxWindow — a
// tenth of what the origin's earlier bans lasted (from the trip to the probe that closed the
// pair), DefaultRecoveryWindow until a ban has been seen — and an eighth of how long this ban has
// lasted, and never less often than every MaxBanProbeGap (restCap). A ban of 25 minutes is then
// probed every 2.5 minutes once the ladder reaches that, and a pair is back within a few minutes
// of the ban's end, with about a dozen probes per ban; a ban that has lasted an hour is probed
// every 3 minutes, whatever the origin's recent short ones say. Both are kept with the origin's
// state, so an origin the idle sweep forgets (no pair and no traffic for the idle TTL) starts
// learning again. A pair out for a ban keeps that cadence whatever its probes meet, but a probe
// that met its exit's own trouble (connection-level: a timeout, a dropped tunnel, a body cut off)
// learned nothing of the ban, and the next one comes within BanProbeRetry; its probe passes its
// exit's rest (passesRest). A 429 without Retry-After is no ban: the pair rests at most UnannouncedRest
// at a time, and its rests are not counted among the origin's bans — an origin that limits its
// pairs to a few requests a minute would otherwise teach its bans to last a minute, and its banned
// pairs would be probed every BaseCooldown for hours.

// DefaultRecoveryWindow is the longest wait between probes of a banned pair while its origin's
// bans have not been measured yet.
const DefaultRecoveryWindow = 2 * time.Minute

// UnannouncedRest is the longest rest of a pair tripped by a 429 without Retry-After (never below
// the pair's BaseCooldown, which it equals by default): the pair is tried again about this often
// until it is served. A window the origin does not announce resets within a minute or is not
// learned (ratelimit's unannounced windows); resting up to a minute (the ladder's 20, 40, 60 s)
// spared a fifth of the 429s and cost 3 % of the goodput in the simulation (docs/decisions.md).
const UnannouncedRest = 20 * time.Second

// MaxBanProbeGap is the longest wait between probes of a banned pair (before the breaker's
// jitter, up to a quarter more), however long its ban has lasted and whatever the origin's
// earlier bans lasted (a repeat offender of an origin that hardens waits up to 2ⁿ times it, at
// most the breaker's MaxCooldown: offence.go): at most 20 probes an hour, and a pair whose ban
// ended is seen back within about this long. Bans are heavy-tailed, and back to back bans of one
// pair run into one episode whose age says nothing of when it ends: with the breaker's 15 min, a
// pair whose two-hour ban ended waited up to 19 min for its next probe (in the simulation 7 of
// 1,785 bans were never seen to end; none with a cap of 5 min). A pair banned again a few
// minutes after a ban ended is seen in between only if a probe falls in the gap: with 5 min
// (5–6¼ with jitter) a 4-minute gap was missed about one time in four, and 1 to 3 of the
// round-2 world's ~1,800 bans were never seen to end; with 3 min (and BanProbeRetry, and a slow
// pair's lone 403 judged as a probe's: trickled), none, for 6 % more wasted attempts
// (docs/decisions.md).
const MaxBanProbeGap = 3 * time.Minute

// ExitRest is the longest rest of an exit's own breaker after a transient trip (timeouts, dropped
// connections: Failure.MaxWindow, so a park keeps its ParkFor), unless WithExitSettings sets a
// MaxCooldown of its own. An exit is every origin's road: its
// connection trouble is most often passing, and while it rests its pairs cannot learn that their
// bans have ended (a ban's probe passes the rest, but a ban that begins and ends while the exit
// rests is never met). Rests of up to 2 min, against the breaker's 15, cut the bans never seen to
// recover in the simulation from 39 to 11 of 2,031 (docs/decisions.md).
const ExitRest = 2 * time.Minute

// BanProbeRetry is the longest wait after a banned pair's probe that failed at the connection (a
// timeout, a dropped tunnel: its exit's trouble), which learned nothing of the ban: the next
// probe comes within it, well inside the gap between two bans that a flaky exit's probes must
// not all miss. With ExitRest (2 min) in its place, three probes of a flaky exit's pair in a
// 6-minute gap between two bans all timed out, and the pair was never seen back (round-2 world,
// seed 1; docs/decisions.md).
const BanProbeRetry = time.Minute

// recoveryShare is the share of an origin's typical ban the probes of a banned pair are spaced by
// at most.
const recoveryShare = 10

// originPace keeps the window an origin's pairs learned last (ratelimit.Window), packed in one word:
// N in the high 16 bits, Length in milliseconds in the low 48 (0: none yet), and beside it the
// window's Upper in milliseconds when its Length is a guess of the period (0: no guess; the two
// words are stored one after the other, and a prior read between them is a window of either
// learning's: both were learned). Safe for concurrent use.
type originPace struct {
	bits  atomic.Uint64
	upper atomic.Int64
}

// prior returns the origin's learned window, zero when none.
func (o *originPace) prior() ratelimit.Window {
	v := o.bits.Load()
	w := ratelimit.Window{N: int(v >> 48), Length: time.Duration(v&(1<<48-1)) * time.Millisecond}
	if u := time.Duration(o.upper.Load()) * time.Millisecond; u > w.Length {
		w.Upper = u
	}
	return w
}

// learn keeps w, a window a pair of the origin learned from its own traffic, as the prior.
func (o *originPace) learn(w ratelimit.Window) {
	ms := w.Length.Milliseconds()
	if w.IsZero() || w.N >= 1<<16 || ms <= 0 || ms >= 1<<48 {
		return
	}
	o.upper.Store(w.Upper.Milliseconds())
	o.bits.Store(uint64(w.N)<<48 | uint64(ms))
}

// recoveryStats keeps how long an origin's ban episodes lasted: an exponentially weighted mean in
// nanoseconds, weight ¼ for the newest (0: none yet). Safe for concurrent use.
type recoveryStats struct{ typical atomic.Int64 }

// record folds one episode's length into the mean.
func (r *recoveryStats) record(d time.Duration) {
	if d <= 0 {
		return
	}
	for {
		old := r.typical.Load()
		next := int64(d)
		if old != 0 {
			next = old + (next-old)/4
		}
		if r.typical.CompareAndSwap(old, next) {
			return
		}
	}
}

// maxWindow is the longest wait between probes of a banned pair of the origin.
func (r *recoveryStats) maxWindow() time.Duration {
	t := time.Duration(r.typical.Load())
	if t == 0 {
		return DefaultRecoveryWindow
	}
	return min(t/recoveryShare, MaxBanProbeGap)
}

// restCap returns the longest OPEN window v may trip t's pair for, 0 for no cap of the pool's. A
// 429 without Retry-After rests at most UnannouncedRest. A pair out for a ban — a block, or any
// failure of a pair whose ban episode is running (a probe through a flaky exit that timed out: the
// next probe must still come while the ban may be over) — is probed at least once per the larger
// of a tenth of the origin's typical ban and an eighth of how long this ban has lasted, at most
// MaxBanProbeGap: bans are heavy-tailed, and one that has lasted an hour is likely to last a while
// yet, whatever the origin's recent short ones say (an origin whose last bans lasted minutes had
// its hour-long ones probed every 20 s, 270 probes each). A probe of a banned pair that failed at
// the connection (v.ConnLevel) says nothing of the ban: the next comes within BanProbeRetry.
func restCap(now time.Time, t *ticket, v Verdict) time.Duration {
	var at uint32
	if t.pair != nil {
		at = t.pair.episode.Load()
	}
	switch {
	case v.unannouncedLimit():
		return UnannouncedRest
	case v.Class != ClassBlocked && at == 0:
		return 0
	}
	c := t.origin.learn.maxWindow()
	if at != 0 {
		if age := time.Duration(episodeClock(now)-at) * episodeTick; age > 0 {
			c = max(c, min(age/banAgeShare, MaxBanProbeGap))
		}
		if v.ConnLevel {
			c = min(c, BanProbeRetry)
		}
	}
	return c
}

// trickled reports whether t's pair is tracked as slow at now (latency.go): passed over while
// other exits are ready, it is sent one attempt minutes apart, its trickle, so its answers never
// come two in a row within the origin guard's window. A plain 403 through it, while other exits
// are served, is then judged as a banned pair's probe's is (judgeSuspect): a ban. Taken for the
// site's own answer instead, as a first 403 in a row is, the ban of a slow or flaky pair was
// never judged one, its breaker never probed it, and its next trickle came up to 10 min later:
// in the round-2 world a flaky exit's pair met its ban that way, and the 6 minutes between that
// ban's end and the next went by with one trickle, which timed out (docs/decisions.md). If the
// 403 was the site's, the pair rests one BaseCooldown, is served by its probe and counts no ban
// (offence.go); it was being passed over anyway.
func (t *ticket) trickled(now time.Time) bool {
	pl := t.origin.lat.lookup(t.id)
	if pl == nil {
		return false
	}
	est, _, _ := pl.load(now)
	return est > 0 // slow, not only ramping
}

// unannouncedLimit reports whether v is a 429 without Retry-After: a rate limit whose end the
// origin did not say, which is no ban.
func (v Verdict) unannouncedLimit() bool { return v.Class == ClassRateLimited && v.RetryAfter <= 0 }

// banAgeShare: a ban is probed at least every banAgeShare-th of its age (restCap).
const banAgeShare = 8

// noteEpisode follows the pair's ban episodes through its transitions: one begins when the pair
// trips from CLOSED for a block, or when a probe of a pair resting for other trouble meets one, and
// ends when a probe closes it; its length goes to the origin's recovery stats.
func (pr *pair) noteEpisode(t breaker.Transition) {
	switch {
	case t.From == breaker.Closed && t.To == breaker.Open:
		var at uint32
		if t.Reason == string(ClassBlocked) {
			at = episodeClock(t.At)
		}
		pr.episode.Store(at)
	case t.To == breaker.Open && t.Reason == string(ClassBlocked):
		// A pair out for other trouble (its exit's timeouts) whose probe meets a block: the ban
		// began while it rested, and from now on it is probed as a banned pair.
		pr.episode.CompareAndSwap(0, episodeClock(t.At))
	case t.To == breaker.Closed:
		if at := pr.episode.Swap(0); at != 0 && t.From == breaker.HalfOpen {
			pr.origin.learn.record(time.Duration(episodeClock(t.At)-at) * episodeTick)
		}
	}
}

// episodeClock reads t in episodeTicks since episodeEpoch, never 0 (which says "no episode"):
// four bytes a pair, whole seconds (bans last minutes to hours), until the year 2161.
func episodeClock(t time.Time) uint32 {
	d := t.Sub(episodeEpoch) / episodeTick
	return uint32(min(max(d, 1), math.MaxUint32))
}

// An episode's start is kept to the second, counted from 2025.
const episodeTick = time.Second

var episodeEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

var episodeEpochNanos = episodeEpoch.UnixNano()
