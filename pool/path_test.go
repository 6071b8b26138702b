package pool

import (
	"testing"
	"time"
)

// TestServedPathIsEvidence: a plain 403 for a path the origin served this exit, or two others,
// within the guard's window is a block even while no exit is being served (a wave); one for a path
// nobody was served stays the site's answer; without a path (0) nothing changes.
func TestServedPathIsEvidence(t *testing.T) {
	p, err := New(WithExits(MustParseExit("10.0.0.1:80"), MustParseExit("10.0.0.2:80"), MustParseExit("10.0.0.3:80"), MustParseExit("10.0.0.4:80")),
		WithOriginGuard(OriginGuardSettings{Disabled: true}))
	if err != nil {
		t.Fatal(err)
	}
	g := &p.origin("shop.test").guard
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ns := func(d time.Duration) int64 { return now.Add(d).UnixNano() }
	page, other := PathOf("/page"), PathOf("/other")
	g.record(1, ns(0), false, false, page)  // exit 1 served /page
	g.record(2, ns(1), false, false, page)  // exit 2 served /page
	g.record(3, ns(2), false, false, other) // exit 3 served /other
	for _, s := range []struct{ id uint32 }{{1}, {2}, {3}} {
		g.record(s.id, ns(3), false, true, page) // then every exit gets 403s: a wave
	}
	at := now.Add(4 * time.Millisecond)
	for _, c := range []struct {
		id   uint32
		path uint16
		want bool
	}{
		{1, page, true},                  // served /page itself a moment before
		{0, page, true},                  // exits 1 and 2 were served /page
		{0, other, false},                // one other exit served /other: not enough
		{0, PathOf("/forbidden"), false}, // nobody was served it
		{0, 0, false},                    // no path known: the old rule, and nobody is being served
	} {
		if got, _ := g.evidenceOfBlock(at, c.id, false, c.path); got != c.want {
			t.Errorf("evidenceOfBlock(exit %d, path %d) = %v, want %v", c.id, c.path, got, c.want)
		}
	}
	if PathOf("") == 0 || PathOf("/a") == PathOf("/b") {
		t.Error("PathOf: 0 for the empty path, or one mark for two paths")
	}
}
