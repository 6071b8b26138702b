package pool

import (
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Repeat offences: a pair banned again soon after a ban is probed on a longer ladder.
//
// Some WAFs harden: each repeat ban of an IP lasts longer than the one before (fail2ban's
// bantime.increment doubles it), and some ban an IP the more readily the more it sent lately.
// Probing a repeat offender on the ladder a first ban gets wastes probes on a ban that is likely
// longer, and each probe is one more request the WAF counts against the IP.
//
// Each pair remembers how many of its bans it still holds against itself (at most MaxOffences)
// and when the last one ended, to the minute; the count falls by one for each full OffenceDecay
// since then, so a long clean period forgets it. On an origin that hardens, a failure that starts
// or continues a ban of a pair that remembers n bans (counted when the ban began) trips it n
// rungs higher on its breaker's ladder (breaker.Failure.Stretch) and with the pool's cap on the
// window (restCap) ×2ⁿ: its first probe comes 2ⁿ times later than a first offender's, and so does
// each one after, up to the breaker's MaxCooldown. A first ban, and one after a clean period of
// n × OffenceDecay, is probed as before. A ban's probe that failed at the connection (its exit's
// trouble) is not stretched: it learned nothing of the ban (restCap's BanProbeRetry).
//
// An origin hardens once its repeat offenders' bans have been seen to last hardenRatio times as
// long as its first offenders' (offenceStats, from the bans' lengths when a probe closes them).
// Elsewhere a repeat ban is no longer than a first one, and a longer ladder only sees the pair
// back later: stretched on every origin, the round-3 world's median recovery rose from 1m26s to
// 1m56s for no page more (docs/decisions.md).
//
// Only a confirmed ban counts, in the memory and in the origin's figures: one that a probe met
// going on (a probe failed for a block while the ban ran). A "ban" its first probe ended lasted
// less than one rung and may have been none: two 403s in a row to a path the site forbids
// everyone are judged a block (SuspectEvidence), and its first probe, asking for another page,
// is served. Counted, such trips taught an origin with a forbidden path that its first bans
// last 25 s and its repeat ones (the real bans, minutes to hours) 20 min, so it "hardened", every
// pair it had tripped once became a repeat offender, and its real bans were probed up to 8 times
// later: in the round-2 world, pairs banned again a few minutes after a ban ended were not seen
// back in between (docs/decisions.md). A real ban outlasts its first probe (BaseCooldown) but
// for its shortest few, which neither side of the comparison then counts.
//
// The memory is one word the pair already had (its mute flag's), so a pair stays 144 bytes; a
// pair that remembers a ban is not swept as idle (at most MaxOffences × OffenceDecay after its
// last ban ended), and one swept or retuned forgets it. It is not saved (SavedState, stores):
// their rows carry the breaker's state, and a restarted pool treats every pair's next ban as a
// first one — the breaker's own backoff level, which is saved, still remembers the last few
// minutes.

// OffenceDecay is how long a pair must stay clear of bans, after its last one ended, for the
// pool to forget one of the bans it remembers.
const OffenceDecay = 2 * time.Hour

// MaxOffences is the most bans a pair remembers: a repeat offender's probes are spaced at most
// 2^MaxOffences times as far apart as a first offender's (before the breaker's MaxCooldown).
const MaxOffences = 3

// pairFlags is a pair's mute flag (bit 31) and its memory of bans: how many it remembers (bits
// 29–30), whether a probe confirmed the ban running now (bit 28), and when the last one ended, in
// minutes since episodeEpoch (bits 0–27, 0: never; good until the year 2535). Safe for
// concurrent use.
type pairFlags struct{ v atomic.Uint32 }

const (
	muteBit      = 1 << 31
	offenceShift = 29
	confirmedBit = 1 << 28
	offenceEnd   = confirmedBit - 1 // the mask of the last ban's end
)

// muted reports whether the pair's hooks are silenced (retune.go).
func (f *pairFlags) muted() bool { return f.v.Load()&muteBit != 0 }

// setMuted silences the pair's hooks, or lets them speak again.
func (f *pairFlags) setMuted(m bool) {
	if m {
		f.v.Or(muteBit)
	} else {
		f.v.And(^uint32(muteBit))
	}
}

// offences returns how many bans the pair remembers at instant at.
func (f *pairFlags) offences(at time.Time) int { return remembered(f.v.Load(), at) }

// remembered is the bans word w remembers at instant at: its count less one per full OffenceDecay
// since the last ban ended (none before it ended: a clock that went back forgets nothing).
func remembered(w uint32, at time.Time) int {
	n, end := int(w>>offenceShift&3), w&offenceEnd
	if n == 0 || end == 0 {
		return 0
	}
	clean := time.Duration(int64(offenceClock(at))-int64(end)) * time.Minute
	return max(n-int(max(clean, 0)/OffenceDecay), 0)
}

// confirm notes that a probe met the pair's running ban going on.
func (f *pairFlags) confirm() { f.v.Or(confirmedBit) }

// takeConfirmed reports whether a probe confirmed the pair's running ban, and forgets it: the ban
// ended, or a new one may begin.
func (f *pairFlags) takeConfirmed() bool { return f.v.And(^uint32(confirmedBit))&confirmedBit != 0 }

// banEnded remembers one more ban, begun at start (the count it is added to is what the pair
// remembered then) and ended at end.
func (f *pairFlags) banEnded(start, end time.Time) {
	for {
		w := f.v.Load()
		n := min(remembered(w, start)+1, MaxOffences)
		next := w&muteBit | uint32(n)<<offenceShift | offenceClock(end)
		if f.v.CompareAndSwap(w, next) {
			return
		}
	}
}

// offenceClock reads t in minutes since episodeEpoch, never 0 (which says "never banned").
func offenceClock(t time.Time) uint32 {
	return uint32(min(max(t.Sub(episodeEpoch)/time.Minute, 1), offenceEnd))
}

// episodeTime is the instant episodeClock read as at.
func episodeTime(at uint32) time.Time { return episodeEpoch.Add(time.Duration(at) * episodeTick) }

// noteOffence follows the pair's ban through t: a probe that met the running ban (pace.go's
// episode) for a block confirms it, and when a probe closes the pair the confirmed ban is
// remembered and the origin told how long it lasted, a repeat offence or not. It runs before
// noteEpisode, which starts and forgets the episode.
func (pr *pair) noteOffence(t breaker.Transition) {
	at := pr.episode.Load()
	switch {
	case t.From == breaker.Closed:
		pr.flags.takeConfirmed() // a ban may begin: nothing confirmed yet
	case t.From == breaker.HalfOpen && t.To == breaker.Open:
		if at != 0 && t.Reason == string(ClassBlocked) {
			pr.flags.confirm()
		}
	case t.To == breaker.Closed:
		if pr.flags.takeConfirmed() && at != 0 && t.From == breaker.HalfOpen {
			start := episodeTime(at)
			pr.origin.harden.record(pr.flags.offences(start) > 0, t.At.Sub(start))
			pr.flags.banEnded(start, t.At)
		}
	}
}

// offenceStats is what an origin's bans say of its WAF: the mean length of the bans of pairs that
// remembered none when banned (first offences, or after a long clean period) and of those of
// repeat offenders, in nanoseconds, each the plain mean of its first hardenSamples and then
// exponentially weighted (weight 1/hardenSamples for the newest), with how many of each were
// measured (saturating). Safe for concurrent use.
type offenceStats struct {
	first, repeat   atomic.Int64
	nFirst, nRepeat atomic.Uint32
}

// The origin hardens once at least hardenMinRepeats of its repeat bans have been measured, and
// on average they lasted at least hardenRatio times its first bans (a WAF that doubles each
// repeat ban of an IP shows 2–3×; one that does not, 1× give or take its bans' spread). The means
// weigh the newest of hardenSamples bans or more 1/hardenSamples. Four repeat bans were too few:
// heavy-tailed ban lengths made an origin that does not harden look so by chance (round-2 world,
// seed 2), and a repeat offender's stretched probes skipped two short gaps between its bans
// (docs/decisions.md).
const (
	hardenMinRepeats = 8
	hardenSamples    = 8
	hardenRatio      = 1.5
)

// record folds in one ban of length d, a repeat offender's or not.
func (s *offenceStats) record(repeat bool, d time.Duration) {
	if d <= 0 {
		return
	}
	mean, n := &s.first, &s.nFirst
	if repeat {
		mean, n = &s.repeat, &s.nRepeat
	}
	k := int64(min(n.Load(), hardenSamples-1)) + 1 // the weight of the newest is 1/k
	if n.Load() < 1<<31 {
		n.Add(1)
	}
	for {
		old := mean.Load()
		if mean.CompareAndSwap(old, old+(int64(d)-old)/k) {
			return
		}
	}
}

// hardens reports whether the origin's repeat offenders have been seen banned longer than its
// first offenders: only then are they probed on a longer ladder.
func (s *offenceStats) hardens() bool {
	if s.nRepeat.Load() < hardenMinRepeats || s.nFirst.Load() == 0 {
		return false
	}
	return float64(s.repeat.Load()) >= hardenRatio*float64(s.first.Load())
}

// repeatOffence stretches f, the failure v of t's pair at now, when it starts or continues a ban
// of a repeat offender: by the bans the pair remembered when the ban began, each doubling the
// breaker's rung (f.Stretch) and the pool's cap (f.MaxWindow, from restCap). Anything else — a
// first ban, a rate limit, a Retry-After, its exit's trouble, a failure that is not the pair's —
// is left as it is.
func repeatOffence(now time.Time, t *ticket, v Verdict, f *breaker.Failure) {
	if v.Scope != ScopePair || v.ConnLevel || f.RetryAfter > 0 || f.MaxWindow <= 0 || v.unannouncedLimit() ||
		!t.origin.harden.hardens() {
		return
	}
	pr := t.pair
	if pr == nil {
		if v.Class != ClassBlocked {
			return // a CLOSED pair's failure that begins no ban
		}
		if pr = t.origin.lookupPair(t.id); pr == nil {
			return // no breaker yet: never banned
		}
	}
	at := now
	if start := pr.episode.Load(); start != 0 {
		at = episodeTime(start)
	} else if v.Class != ClassBlocked {
		return
	}
	if n := pr.flags.offences(at); n > 0 {
		f.Stretch = n
		f.MaxWindow <<= n // at most MaxBanProbeGap << MaxOffences: no overflow
	}
}
