package pool

import (
	"sync"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Page is what a 2xx page looked like, as its reader saw it (package transport reads it from the
// response: PageLooks.Read): enough for the pool to tell the page an origin serves every exit from
// a soft block it serves one exit — a "verify you are human" page, an empty list, a login wall,
// answered 200 with no vendor marker. See Lease.JudgePageAt.
type Page struct {
	// Class is the mark (PathOf) of the request's path class: pages are compared with pages of the
	// same class only. Package transport's default class is the path's first segment.
	Class uint16
	// Size is the body's length in bytes; negative when not known. With AtLeast it is a lower
	// bound: the body was longer than what was read of it.
	Size    int64
	AtLeast bool
	// Title is a hash of the page's <title> (transport: TitleHash); 0 when not known (the title
	// was not within what was read).
	Title uint32
	// Mark is what the caller's own reading of the page says (PageUnmarked: nothing).
	Mark PageMark
}

// PageMark is the caller's own reading of a page (transport: PageLooks.Check).
type PageMark uint8

// The marks.
const (
	// PageUnmarked: no reading, or it cannot tell; the page is judged by its size and title.
	PageUnmarked PageMark = iota
	// PageReal: the page has what every real page of the site has (the caller's marker).
	PageReal
	// PageNotReal: the page lacks the caller's marker. Like a small size, it makes the page
	// deviate; it is judged a block only by the evidence (another exit served real pages), so a
	// site that drops the marker from every page trips nothing.
	PageNotReal
	// PageBlock: the caller declares the page a block of the pair, as a detector would; no
	// evidence is asked for.
	PageBlock
)

// PageSizeBand is how many times smaller than the pages other exits get a page must be to deviate
// by its size: a 2 KB block page against 40 KB product pages does; product pages of one class
// that vary by less than this never make each other deviate.
const PageSizeBand = 4

// PageDetector is the Verdict.Detector of a page the pool judged a soft block (JudgePageAt);
// PageCheckDetector that of a page the caller marked PageBlock.
const (
	PageDetector      = "page"
	PageCheckDetector = "page_check"
)

// pageSlots is how many distinct exits' latest pages a class remembers, and pageClasses how many
// classes an origin remembers (the least recently judged is replaced): an origin costs at most
// one pageBook (pageClasses × pageSlots × 24 bytes, under 1 KiB), whatever the pool's size.
const (
	pageSlots   = 8
	pageClasses = 4
)

// pageBook is one origin's record of the pages its exits got, per path class. It is made on the
// origin's first judged page and lives as long as the origin's state.
type pageBook struct {
	mu      sync.Mutex
	classes [pageClasses]pageClass
}

type pageClass struct {
	used  int64 // when a page of the class was last judged; 0: the slot is free
	class uint16
	slots [pageSlots]pageEntry
}

// pageEntry is an exit's latest page in a class.
type pageEntry struct {
	at    int64
	exit  uint32 // id + 1; 0 = empty
	size  uint32 // bytes, at most 4 GiB − 1; see flags
	title uint32
	flags uint8 // pageSized, pageAtLeast
	mark  PageMark
	// streak counts the deviating pages in a row through the exit, the latest included (at most
	// 255); 0 when its latest page was like the others'.
	streak uint8
}

const (
	pageSized   = 1 << iota // size is known
	pageAtLeast             // size is a lower bound
)

func entryOf(pg Page) pageEntry {
	e := pageEntry{title: pg.Title, mark: pg.Mark}
	if pg.Size >= 0 {
		e.flags |= pageSized
		e.size = uint32(min(pg.Size, 1<<32-1))
		if pg.AtLeast || pg.Size >= 1<<32-1 {
			e.flags |= pageAtLeast
		}
	}
	return e
}

// JudgePageAt returns v as the pool counts a 2xx page that looked like pg, through the lease's
// exit, at now, and remembers the page for the judgement of the next ones. v must be the verdict
// of the page: a Success at pair scope; any other verdict comes back as it is, and so does every
// verdict of the zero Lease or of a lease already reported.
//
// The page is a soft block of the pair (Transient, ClassBlocked, Detector PageDetector) when the
// origin serves other exits real pages meanwhile and this one something less, the shape of the
// plain-403 evidence (SuspectEvidence): within the origin guard's Window, at least
// SuspectMinServed other exits' latest pages of the same class look more like the real page than
// pg does — pg is PageSizeBand times smaller than theirs, or lacks the caller's marker where theirs
// have it, or has another title than one they share while no larger than theirs — and either this
// exit's page before it deviated too while fewer than half of the exits that got pages of the
// class (this one included) got pages like pg, or it is this exit's SuspectProof-th deviating page
// in a row. A probe of a pair out for a ban counts as a second in a row. A page the caller marked
// PageBlock is a block at once (Detector PageCheckDetector). Otherwise v comes back as it was.
//
// The site's own odd page served to every exit is nobody's block, and a deviating page that
// others get too is the site's; the price is a second deviating page through an exit before its
// pair trips. Judge a lease's page once, before reporting it (package transport judges every 2xx
// HTML page when its headers arrive), and report the verdict JudgePageAt returned.
func (l *Lease) JudgePageAt(now time.Time, v Verdict, pg Page) Verdict {
	if l.p == nil || l.done || v.Outcome != Success || v.Scope != ScopePair || v.Suspect {
		return v
	}
	if pg.Mark == PageBlock {
		v.Outcome, v.Class, v.Detector = Transient, ClassBlocked, PageCheckDetector
		return v
	}
	o := l.t.origin
	b := o.pages.Load()
	if b == nil {
		b = new(pageBook)
		if !o.pages.CompareAndSwap(nil, b) {
			b = o.pages.Load()
		}
	}
	if !b.judge(now, l.t.id, entryOf(pg), pg.Class, l.t.probingBan(), o.guard.cfg.Window) {
		return v
	}
	v.Outcome, v.Class, v.Detector = Transient, ClassBlocked, PageDetector
	return v
}

// probingBan reports whether the ticket is a probe of a pair that is out for a ban: its answer
// follows the answers that tripped the pair.
func (t *ticket) probingBan() bool {
	return t.pair != nil && t.pairState != breaker.Closed && t.pair.episode.Load() != 0
}

// judge records page p of class cls through exit id at now, and reports whether it is a block
// (see JudgePageAt); banned says it follows a ban of the pair.
func (b *pageBook) judge(now time.Time, id uint32, p pageEntry, cls uint16, banned bool, window time.Duration) bool {
	t := now.UnixNano()
	since := t - int64(window)
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.class(cls, t)
	common := c.commonTitle(id, since)
	tried, like, served, inRow := 1, 1, 0, 1
	var own *pageEntry
	for i := range c.slots {
		e := &c.slots[i]
		if e.exit == 0 || e.at <= since {
			continue
		}
		if e.exit == id+1 {
			own = e
			continue
		}
		tried++
		switch {
		case !e.realer(&p, common):
			like++
		case e.streak == 0:
			served++
		}
	}
	odd := served >= SuspectMinServed
	streak := uint8(0) // this page's, once recorded
	if odd {
		streak = 1
		if own != nil {
			inRow += int(own.streak)
			streak = min(own.streak, 254) + 1
		}
	}
	if banned {
		inRow = max(inRow, 2)
	}
	p.streak = streak
	c.record(id, t, p)
	return odd && (inRow >= SuspectProof || (inRow >= 2 && 2*like < tried))
}

// class returns the record of class cls, taking the least recently judged one's place if it has
// none, and marks it used at t.
func (b *pageBook) class(cls uint16, t int64) *pageClass {
	oldest := 0
	for i := range b.classes {
		c := &b.classes[i]
		if c.used != 0 && c.class == cls {
			c.used = t
			return c
		}
		if c.used < b.classes[oldest].used {
			oldest = i
		}
	}
	c := &b.classes[oldest]
	*c = pageClass{class: cls}
	c.used = t
	return c
}

// commonTitle returns a title that at least SuspectMinServed other exits' latest pages within the
// window share while none of them deviated, or 0: a class whose real pages share one title.
func (c *pageClass) commonTitle(id uint32, since int64) uint32 {
	for i := range c.slots {
		a := &c.slots[i]
		if !a.current(id, since) || a.title == 0 {
			continue
		}
		n := 1
		for j := i + 1; j < len(c.slots); j++ {
			if b := &c.slots[j]; b.current(id, since) && b.title == a.title {
				n++
			}
		}
		if n >= SuspectMinServed {
			return a.title
		}
	}
	return 0
}

// current reports whether e is another exit's page than id's, within the window, not deviating.
func (e *pageEntry) current(id uint32, since int64) bool {
	return e.exit != 0 && e.exit != id+1 && e.at > since && e.streak == 0
}

// realer reports whether page e looks more like the origin's real page than p: it has the
// caller's marker and p lacks it, or p is PageSizeBand times smaller, or e has the title common to
// the class and p another, while p is no larger than e.
func (e *pageEntry) realer(p *pageEntry, common uint32) bool {
	if e.mark == PageNotReal || p.mark == PageReal {
		return false
	}
	if e.mark == PageReal && p.mark == PageNotReal {
		return true
	}
	pExact := p.flags&pageSized != 0 && p.flags&pageAtLeast == 0
	if pExact && e.flags&pageSized != 0 && e.size > p.size && uint64(e.size) >= PageSizeBand*uint64(p.size) {
		return true
	}
	if common == 0 || e.title != common || p.title == 0 || p.title == common {
		return false
	}
	// No larger than e: a larger page with another title is as likely the real one.
	return p.flags&pageSized == 0 || e.flags&pageSized == 0 || e.flags&pageAtLeast != 0 || p.size <= e.size
}

// record remembers p as exit id's latest page of the class at t, replacing the oldest entry if id
// is new.
func (c *pageClass) record(id uint32, t int64, p pageEntry) {
	oldest, e := 0, (*pageEntry)(nil)
	for i := range c.slots {
		if c.slots[i].exit == id+1 {
			e = &c.slots[i]
			break
		}
		if c.slots[i].at < c.slots[oldest].at {
			oldest = i
		}
	}
	if e == nil {
		e = &c.slots[oldest]
	}
	p.exit, p.at = id+1, t
	*e = p
}
