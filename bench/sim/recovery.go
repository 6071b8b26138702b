package sim

import (
	"slices"
	"time"
)

// The recovery measure: how long after a ban ended its pair next carried a success.
//
// It is taken per ban episode: a pair's bans less than BanMergeGap apart are one episode, for
// a strategy is rarely served between them — but when it is (a probe lands in the gap), the
// episode is cut there: the bans before the success are recovered from, and those after it are
// an episode of their own, met or not on their own answers. And it is taken only of the
// episodes the strategy met — it got a challenge page or a ban's plain 403 from one — for a ban
// none of whose answers reached a strategy did not take its pair out: its pair was idle, or
// resting on other trouble, all along (the oracles meet no ban at all). Episodes that ended less
// than RecoveryHorizon before the end of the run are not measured either. Metrics.Unmet counts the
// measurable episodes a strategy never met, so that the measure's reach shows beside it.

// BanMergeGap is how close a pair's next ban must begin after one ends for the two to be one
// episode of the recovery measure: the target for the median recovery (TargetRecovery),
// so that a pair seen back at the median would already meet the next ban.
const BanMergeGap = TargetRecovery

// banEpisode is one or more bans of one pair run together.
type banEpisode struct {
	Window
	bans []Window // the bans it runs together, sorted
	met  bool     // an answer of its bans reached the strategy
}

// recoveryLog follows every pair's ban episodes through one run. The scheduler runs one worker at
// a time, so it needs no lock.
// recoveryLog is nil when the strategy measures recovery itself (Env.ownRecovery).
type recoveryLog struct {
	eps     [][]banEpisode // by pair, sorted
	next    []int          // by pair: the first episode not yet recovered from
	horizon time.Time      // episodes that end after it are not measured
}

func newRecoveryLog(bans [][]Window, horizon time.Time) *recoveryLog {
	l := &recoveryLog{eps: make([][]banEpisode, len(bans)), next: make([]int, len(bans)), horizon: horizon}
	for p, ws := range bans {
		l.eps[p] = mergeBans(ws, BanMergeGap)
	}
	return l
}

// mergeBans runs sorted bans that begin less than gap after the previous one's end into one.
func mergeBans(ws []Window, gap time.Duration) []banEpisode {
	var eps []banEpisode
	for _, w := range ws {
		if n := len(eps); n > 0 && w.From.Sub(eps[n-1].To) < gap {
			eps[n-1].To = w.To
			eps[n-1].bans = append(eps[n-1].bans, w)
			continue
		}
		eps = append(eps, banEpisode{Window: w, bans: []Window{w}})
	}
	return eps
}

// met notes that pair p answered an attempt sent at sent with a ban's answer.
func (l *recoveryLog) met(p int, sent time.Time) {
	if l == nil {
		return
	}
	eps := l.eps[p]
	for k := l.next[p]; k < len(eps) && !eps[k].From.After(sent); k++ {
		if eps[k].Contains(sent) {
			eps[k].met = true
			return
		}
	}
}

// served notes a success of pair p at now: every episode that ended by then is recovered from.
func (l *recoveryLog) served(p int, now time.Time, m *Metrics) {
	if l == nil {
		return
	}
	l.cut(p, now)
	eps := l.eps[p]
	for ; l.next[p] < len(eps) && !eps[l.next[p]].To.After(now); l.next[p]++ {
		ep := eps[l.next[p]]
		switch {
		case ep.To.After(l.horizon):
		case ep.met:
			m.Recovery = append(m.Recovery, now.Sub(ep.To))
		default:
			m.Unmet++
		}
	}
}

// cut splits pair p's current episode at now when now falls between two of its bans: the bans
// that ended by now become an episode the success recovers from, the rest one of their own, not
// yet met (every answer that met the first part was sent before now).
func (l *recoveryLog) cut(p int, now time.Time) {
	k := l.next[p]
	if k >= len(l.eps[p]) {
		return
	}
	ep := l.eps[p][k]
	if len(ep.bans) < 2 || now.Before(ep.From) || !now.Before(ep.To) {
		return
	}
	for i := 0; i+1 < len(ep.bans); i++ {
		if !ep.bans[i].To.After(now) && ep.bans[i+1].From.After(now) {
			head := banEpisode{Window: Window{From: ep.From, To: ep.bans[i].To}, bans: ep.bans[: i+1 : i+1], met: ep.met}
			tail := banEpisode{Window: Window{From: ep.bans[i+1].From, To: ep.To}, bans: ep.bans[i+1:]}
			l.eps[p] = slices.Insert(l.eps[p], k+1, tail)
			l.eps[p][k] = head
			return
		}
	}
}

// finish counts the measurable episodes no success followed.
func (l *recoveryLog) finish(m *Metrics) {
	if l == nil {
		return
	}
	for p, eps := range l.eps {
		for _, ep := range eps[l.next[p]:] {
			switch {
			case ep.To.After(l.horizon):
			case ep.met:
				m.Unrecovered++
			default:
				m.Unmet++
			}
		}
	}
}
