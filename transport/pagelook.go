package transport

import (
	"bytes"
	"net/http"
	"strings"

	"github.com/proxybreaker/proxybreaker/pool"
)

// DefaultPageLookPeek is how much of a 2xx HTML body the transport reads, when its headers arrive,
// to see what the page looks like: the <title> of a page sits in its head, within its first few
// KiB on nearly every site, and a soft block page is usually smaller than this whole.
const DefaultPageLookPeek = 8 << 10

// maxTitle is how much of a title is hashed: a block page's title is short, and a longer one
// says nothing more about which page it is.
const maxTitle = 512

// PageLooks configures the differential soft-block check of 2xx pages: for each 2xx HTML page,
// the transport reads what it looks like (PageLooks.Read: size, <title>, the caller's mark), and
// the pool judges it against the pages the other exits get from the origin (pool.Lease.JudgePageAt):
// a page that deviates — a "verify you are human" page with no vendor marker, an empty list, a
// login wall — while other exits are served real pages is a soft block of its pair (Transient,
// ClassBlocked, Detector pool.PageDetector), which observers, VerdictFromResponse and
// ErrorFromResponse see as a block. The site's own odd page, served to every exit, is no block.
//
// The zero PageLooks is the default (WithPageLooks): pages are classed by their path's first
// segment, DefaultPageLookPeek bytes are peeked, and no marker is read.
type PageLooks struct {
	// Peek bounds how much of a 2xx HTML body is read when its headers arrive (and put back: the
	// caller reads the whole body). 0 means DefaultPageLookPeek; negative turns the check off, and
	// no 2xx body is read.
	Peek int
	// Class names a request's path class: pages are compared with the pages of their class only,
	// so a site's small search pages do not make its large product pages look odd, or the other
	// way round. Nil means the path's first segment ("/p/123" and "/p/9" are "p", "/" is ""). An
	// origin remembers 4 classes at a time, the least recently judged one giving way.
	Class func(r *http.Request) string
	// Check, when set, is the caller's own reading of each 2xx HTML page, given the response and
	// the peeked prefix of its body (complete: the prefix is the whole body). It must not read or
	// close the body, and must be safe for concurrent use. pool.PageReal says the page has what a
	// real page of the site has (a marker), pool.PageNotReal that it lacks it, pool.PageBlock
	// that it is a block (counted at once, Detector pool.PageCheckDetector), pool.PageUnmarked
	// nothing. PageMarker builds one from a marker string.
	Check func(resp *http.Response, peek []byte, complete bool) pool.PageMark
}

// WithPageLooks sets the differential soft-block check of 2xx pages (see PageLooks). It is on by
// default, as the zero PageLooks; PageLooks{Peek: -1} turns it off.
func WithPageLooks(pl PageLooks) Option {
	return optionFunc(func(c *config) error {
		c.pages = pl
		return nil
	})
}

// PageMarker returns a PageLooks.Check that marks a page pool.PageReal when the peeked prefix of
// its body contains marker (byte for byte), pool.PageNotReal when the page was read whole without
// it, and pool.PageUnmarked when the marker may lie past the peek. Choose a marker that every real
// page has early on (a stylesheet link, a meta tag, the site's header): a block page lacks it.
func PageMarker(marker string) func(*http.Response, []byte, bool) pool.PageMark {
	m := []byte(marker)
	return func(_ *http.Response, peek []byte, complete bool) pool.PageMark {
		switch {
		case bytes.Contains(peek, m):
			return pool.PageReal
		case complete:
			return pool.PageNotReal
		}
		return pool.PageUnmarked
	}
}

// Read returns what resp's page looks like to the pool, and whether the check looks at it at all:
// a 2xx HTML response (Content-Type html) to a request other than HEAD, but for 204 and 206. Its
// class comes from resp.Request; its size from Content-Length, else from the body when the peek
// read it whole, else is a lower bound; its title from the peeked prefix (TitleHash). It peeks at
// most Peek bytes of the body and puts them back in front of the rest, so the caller still reads
// the whole body, byte for byte, and any read error at the same point; err is an error that ended
// the peek. Read on a PageLooks whose Peek is negative looks at nothing.
func (pl *PageLooks) Read(resp *http.Response) (pg pool.Page, ok bool, err error) {
	if pl.Peek < 0 || !pageLike(resp) {
		return pool.Page{}, false, nil
	}
	limit := pl.Peek
	if limit == 0 {
		limit = DefaultPageLookPeek
	}
	prefix, complete, err := peekBody(resp, limit)
	if err != nil {
		return pool.Page{}, true, err
	}
	pg.Class = pool.PathOf(pl.class(resp.Request))
	switch {
	case resp.ContentLength >= 0:
		pg.Size = resp.ContentLength
	case complete:
		pg.Size = int64(len(prefix))
	default:
		pg.Size, pg.AtLeast = int64(len(prefix)), true
	}
	pg.Title = TitleHash(prefix, complete)
	if pl.Check != nil {
		pg.Mark = pl.Check(resp, prefix, complete)
	}
	return pg, true, nil
}

// pageLike reports whether the check looks at resp: a 2xx HTML page with a body.
func pageLike(resp *http.Response) bool {
	code := resp.StatusCode
	if code < 200 || code > 299 || code == http.StatusNoContent || code == http.StatusPartialContent {
		return false
	}
	if resp.Request != nil && resp.Request.Method == http.MethodHead {
		return false
	}
	return strings.Contains(headerValue(resp.Header, "Content-Type"), "html")
}

// class returns r's path class.
func (pl *PageLooks) class(r *http.Request) string {
	if r == nil || r.URL == nil {
		return ""
	}
	if pl.Class != nil {
		return pl.Class(r)
	}
	p := strings.TrimPrefix(r.URL.Path, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		p = p[:i]
	}
	return p
}

// judgePage is the transport's part of the check: it reads the page of a successful attempt and
// asks the pool for its judgement (pool.Lease.JudgePageAt). A peek that failed is the failure a
// classifier's peek gives: the body died.
func (t *Transport) judgePage(a *attempt, at *Attempt, v pool.Verdict) pool.Verdict {
	pg, ok, err := t.pages.Read(at.Response)
	switch {
	case !ok:
		return v
	case err != nil && at.CallerDone:
		return pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}
	case err != nil:
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBodyRead, ConnLevel: true}
	}
	return a.lease.JudgePageAt(at.Now, v, pg)
}

// TitleHash returns a hash of the text of the first <title> element in b, the start of an HTML
// page (complete: b is the whole page): ASCII letters lower-cased, runs of white space made one
// space and trimmed, runs of digits made one "0" (a block page's reference number changes with
// every answer), at most 512 bytes of it, hashed with FNV-1a. It returns 0 when the title is not
// known — b has no <title> but is not the whole page, or the title runs past its end — and the
// hash of the empty title when a whole page has none. It never fails and never allocates.
func TitleHash(b []byte, complete bool) uint32 {
	start := titleStart(b)
	if start < 0 {
		if complete {
			return titleHasher{h: fnvOffset}.sum()
		}
		return 0
	}
	h := titleHasher{h: fnvOffset}
	for i := start; i < len(b); i++ {
		c := b[i]
		if c == '<' && hasFoldPrefix(b[i+1:], "/title") {
			return h.sum()
		}
		h.add(c)
	}
	if complete {
		return h.sum() // a whole page whose title never closes: what there is of it
	}
	return 0
}

// titleStart returns the index just past the '>' of the first <title …> tag in b, or −1.
func titleStart(b []byte) int {
	for i := 0; i < len(b); i++ {
		if b[i] != '<' || !hasFoldPrefix(b[i+1:], "title") {
			continue
		}
		j := i + 1 + len("title")
		if j < len(b) && b[j] != '>' && !isSpace(b[j]) && b[j] != '/' {
			continue // <titles>, <title-x>: another tag
		}
		for ; j < len(b); j++ {
			if b[j] == '>' {
				return j + 1
			}
		}
		return -1
	}
	return -1
}

// hasFoldPrefix reports whether b starts with lower, which is lower-case ASCII, ignoring case.
func hasFoldPrefix(b []byte, lower string) bool {
	if len(b) < len(lower) {
		return false
	}
	for i := 0; i < len(lower); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

// titleHasher hashes a title's text as TitleHash normalises it, byte by byte.
type titleHasher struct {
	h            uint32
	n            int  // bytes hashed
	space, digit bool // the last byte seen was white space (pending), a digit
}

func (t *titleHasher) add(c byte) {
	switch {
	case isSpace(c):
		t.space = t.n > 0 // leading space is dropped, inner runs become one
		return
	case '0' <= c && c <= '9':
		if t.digit && !t.space {
			return
		}
		c = '0'
	case 'A' <= c && c <= 'Z':
		c += 'a' - 'A'
	}
	if t.space {
		t.byte(' ')
		t.space = false
	}
	t.digit = c == '0'
	t.byte(c)
}

func (t *titleHasher) byte(c byte) {
	if t.n < maxTitle {
		t.h = (t.h ^ uint32(c)) * fnvPrime
		t.n++
	}
}

// sum is the hash; never 0, which means "not known".
func (t titleHasher) sum() uint32 {
	if t.h == 0 {
		return 1
	}
	return t.h
}
