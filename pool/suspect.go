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
	// other exits and to this one: it is a block of the pair (Transient, ClassBlocked) when, within
	// the origin guard's Window, at least SuspectMinServed other exits got an ordinary answer from
	// the origin, and either this exit's answer before it was a Suspect one too while fewer than
	// half of the exits that tried the origin (this one included) got a Suspect answer, or this is
	// its SuspectProof-th Suspect answer in a row. A probe of a pair out for a ban counts as a
	// second answer in a row: the ban goes on; so does the trickle of a pair tracked as slow,
	// whose answers come minutes apart. A Suspect answer for a path (Lease.SetPath) the
	// origin served, within the Window, to this exit or to SuspectMinServed other exits is a block
	// too, whatever the other exits get now: the site does not forbid that path to everyone, and in
	// a wave of bans, while every exit is refused, the rule above sees none served. A probe of a
	// banned pair whose 403 is for a path no exit was served within the Window while another was
	// refused it (the site's answer for a path it forbids everyone) says nothing of the ban: it is
	// Neutral, and the pair is probed again at its origin's next pick. Otherwise it is
	// the site's answer (the Success it came as): one 403 through an exit that was being served is
	// as likely a page the site forbids everyone as a ban.
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

// SuspectProof is how many Suspect answers in a row through one exit, within the origin guard's
// Window, make a block under SuspectEvidence while others are served, however many other exits got
// Suspect answers too: a site that forbids a share f of its paths answers one exit three 403s in a
// row with probability f³ (1 in 1,000 at 10 %), a ban every time — and when the banned exits are
// the ones still in use, they fill the guard's record, and the half rule alone would take their
// 403s for the site's.
const SuspectProof = 3

// forbidsMemory is how long after its second latest lone 403 an origin counts as one that forbids
// some paths to everyone (forbidsPaths): a plain 403 through an exit between two answers the origin
// served it, within its guard's Window.
const forbidsMemory = 10 * time.Minute

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
// origin's policy and, for SuspectEvidence, by the guard's record of this exit and the others.
// Every other verdict comes back as it was.
func (p *Pool) judgeSuspect(now time.Time, t *ticket, v Verdict, path uint16) Verdict {
	if !v.Suspect || v.Outcome != Success || v.Scope != ScopePair {
		return v
	}
	g := &t.origin.guard
	switch g.cfg.suspect {
	case SuspectOff:
		return v
	case SuspectBan:
	default:
		// A probe of a pair that is out for a ban meets the ban going on: it follows the answers
		// that tripped the pair. A slow pair's trickle counts as one too (pace.go).
		probe := t.probingBan()
		block, forbidden := g.evidenceOfBlock(now, t.id, probe || t.trickled(now), path)
		if probe && forbidden {
			// The site's answer for a path it refuses everyone says nothing of the ban: the probe
			// is neutral, and its slot free again at once (probeBack), so the pair is probed again
			// at its origin's next pick instead of parked on the ban's cadence.
			v.Outcome = Neutral
			return v
		}
		if !block {
			return v
		}
	}
	v.Outcome, v.Class, v.Detector = Transient, ClassBlocked, SuspectDetector
	return v
}

// evidenceOfBlock reports whether, at now, the guard's record shows the origin serving other
// exits while refusing exit id (see SuspectEvidence); banned says the answer follows a ban of the
// pair; path is the PathOf the answer's request (0: unknown). Exit id's own entry is replaced by the answer being
// judged: it counts as one exit tried, and as one Suspect answer, after the ones in a row its
// entry counted. It also reports whether path looks forbidden to everyone: known, served to no
// exit within the Window, and refused (a Suspect answer, the latest through that exit) to another.
func (g *originGuard) evidenceOfBlock(now time.Time, id uint32, banned bool, path uint16) (block, forbidden bool) {
	since := now.UnixNano() - int64(g.cfg.Window)
	tried, suspect, served, inRow := 1, 1, 0, 1
	ownPath, pathServed, pathRefused := false, 0, 0 // the path was served to this exit; to, refused to how many others
	g.mu.Lock()
	for _, e := range g.recent {
		if e.exit == 0 || e.at <= since {
			continue
		}
		if e.exit == id+1 {
			inRow += int(e.streak)
			ownPath = path != 0 && e.served == path
			continue
		}
		if path != 0 && e.served == path {
			pathServed++
		}
		tried++
		switch {
		case e.suspect():
			suspect++
			if path != 0 && e.refused == path {
				pathRefused++
			}
		case !e.failed:
			served++
		}
	}
	forbids := g.forbidsPaths(now.UnixNano())
	g.mu.Unlock()
	if banned {
		inRow = max(inRow, 2)
	}
	if ownPath || pathServed >= SuspectMinServed {
		return true, false // the site serves this path: not one it forbids everyone
	}
	forbidden = pathServed == 0 && pathRefused > 0
	two := inRow >= 2 && 2*suspect < tried && (banned || !forbids)
	return served >= SuspectMinServed && (inRow >= SuspectProof || two), forbidden
}

// forbidsPaths reports whether the origin showed, twice within forbidsMemory of t (UnixNano), a
// lone 403: a plain 403 through an exit between two answers it served that exit, within the
// guard's Window — a page the site forbids everyone, not a ban, which goes on. Such an origin
// answers one exit two 403s in a row as often as the share f of its requests for forbidden
// paths, squared: 1 % of the requests at f = 10 %, each of which the rule of two took for a ban
// and tripped its pair (the bench's round-3 world, seed 17: 212 such trips on one origin against
// 37 for its bans). There a block takes SuspectProof in a row (f³), unless the pair is out for a
// ban already. Bans of a minute and more seldom end within the Window of their first 403. The
// caller holds g.mu.
func (g *originGuard) forbidsPaths(t int64) bool {
	return g.lone[1] != 0 && loneMinute(t)-g.lone[1] <= uint16(forbidsMemory/time.Minute)
}

// loneMinute is t (UnixNano) in whole minutes since episodeEpoch, modulo 2¹⁶ (45 days: only
// differences of minutes are read), never 0 (none).
func loneMinute(t int64) uint16 {
	return max(uint16((t-episodeEpochNanos)/int64(time.Minute)), 1)
}
