package pool

import (
	"fmt"
	"time"
)

// SuspectPolicy is what a Suspect answer (Verdict.Suspect: a plain 403) from an origin means. Set
// it per origin with WithOriginSettings; "*" sets it for every origin.
type SuspectPolicy uint8

// The policies. The zero value, SuspectDefault, keeps what a less specific pattern said, else
// SuspectEvidence.
const (
	SuspectDefault SuspectPolicy = iota
	// SuspectEvidence, the default, judges each Suspect answer by what the origin is doing to the
	// other exits: it is a block of the pair (Transient, ClassBlocked) when, within the origin
	// guard's Window, at least SuspectMinServed other exits got an ordinary answer from the origin
	// and fewer than half of the exits that tried it (this one included) got a Suspect one;
	// otherwise it is the site's answer (the Success it came as).
	SuspectEvidence
	// SuspectOff takes every Suspect answer as the site's: a Success, as if unmarked.
	SuspectOff
	// SuspectBan takes every Suspect answer as a block of the pair, as Crawlee and
	// scrapy-rotating-proxies treat a 403: for sites known to answer banned IPs 403 and nobody else.
	SuspectBan
)

// SuspectMinServed is how many other exits must have been served by an origin, within its guard's
// Window, for SuspectEvidence to take a Suspect answer for a block: one could be a fluke (a cached
// page, a path that happens to be open); two make "the site serves other IPs" a pattern.
const SuspectMinServed = 2

// SuspectDetector is the Verdict.Detector of a Suspect answer the pool judged a block.
const SuspectDetector = "forbidden"

var suspectNames = [...]string{"default", "evidence", "off", "ban"}

// String returns "default", "evidence", "off" or "ban".
func (s SuspectPolicy) String() string {
	if int(s) < len(suspectNames) {
		return suspectNames[s]
	}
	return fmt.Sprintf("suspect(%d)", uint8(s))
}

// judgeSuspect returns v as the pool counts it: a Suspect success at pair scope judged by the
// origin's policy and, for SuspectEvidence, by the guard's record of the other exits. Every other
// verdict comes back as it was.
func (p *Pool) judgeSuspect(now time.Time, t *ticket, v Verdict) Verdict {
	if !v.Suspect || v.Outcome != Success || v.Scope != ScopePair {
		return v
	}
	g := t.origin.guard
	switch g.cfg.suspect {
	case SuspectOff:
		return v
	case SuspectBan:
	default:
		if !g.othersServed(now, t.exit.id) {
			return v
		}
	}
	v.Outcome, v.Class, v.Detector = Transient, ClassBlocked, SuspectDetector
	return v
}

// othersServed reports whether, at now, the guard's record shows the origin serving other exits
// while refusing exit id (see SuspectEvidence). Exit id's own entry is replaced by the answer being
// judged: it counts as one exit tried, and as one Suspect answer.
func (g *originGuard) othersServed(now time.Time, id uint32) bool {
	since := now.UnixNano() - int64(g.cfg.Window)
	tried, suspect, served := 1, 1, 0
	g.mu.Lock()
	for _, e := range g.recent {
		if e.exit == 0 || e.exit == id+1 || e.at <= since {
			continue
		}
		tried++
		switch {
		case e.suspect:
			suspect++
		case !e.failed:
			served++
		}
	}
	g.mu.Unlock()
	return served >= SuspectMinServed && 2*suspect < tried
}
