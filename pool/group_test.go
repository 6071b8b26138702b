package pool_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// newGroupPool is a pool on a fake clock of a /24 of four exits (s0…s3, 203.0.113.1-4) and two
// exits in other subnets (o0, o1), whose pairs trip on one failure and rest 10 s; two bans in
// the default window hold a group.
func newGroupPool(t *testing.T, opts ...pool.Option) (*pool.Pool, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(syncT0)
	exits := []*pool.Exit{
		pool.MustParseExit("203.0.113.1:3128").WithLabel("s0"),
		pool.MustParseExit("203.0.113.2:3128").WithLabel("s1"),
		pool.MustParseExit("203.0.113.3:3128").WithLabel("s2"),
		pool.MustParseExit("203.0.113.4:3128").WithLabel("s3"),
		pool.MustParseExit("198.51.100.1:3128").WithLabel("o0"),
		pool.MustParseExit("192.0.2.1:3128").WithLabel("o1"),
	}
	all := []pool.Option{
		pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(7), pool.WithInlineSweep(),
		pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, BaseCooldown: 10 * time.Second, Jitter: -1}),
		pool.WithGroups(pool.GroupSettings{MinBans: 2}),
	}
	p, err := pool.New(append(all, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p, clk
}

const groupOrigin = "shop.example"

// pickExit picks exit label for the origin at the clock's now (Request.Exit).
func pickExit(p *pool.Pool, clk *clock.Fake, label string) (pool.Lease, error) {
	return p.PickAt(context.Background(), clk.Now(), pool.Request{Origin: groupOrigin, Exit: label})
}

// ban sends one attempt through label at t0+at and reports a ban page.
func ban(t *testing.T, p *pool.Pool, clk *clock.Fake, at time.Duration, label string) {
	t.Helper()
	clk.Set(syncT0.Add(at))
	l, err := pickExit(p, clk, label)
	if err != nil {
		t.Fatalf("at %v: pick %s: %v", at, label, err)
	}
	l.ReportAt(clk.Now(), challenge)
}

func holds(p *pool.Pool) []pool.GroupHold { return p.Snapshot().Groups }

// TestGroupHoldsAfterKBans: two members banned within the window hold the other two to one
// attempt at a time for that origin; other exits and other origins are not held; one served
// member releases the hold.
func TestGroupHoldsAfterKBans(t *testing.T) {
	p, clk := newGroupPool(t)
	ban(t, p, clk, 0, "s0")
	if h := holds(p); len(h) != 0 {
		t.Fatalf("after one ban: holds %+v, want none", h)
	}
	ban(t, p, clk, 5*time.Second, "s1")
	h := holds(p)
	if len(h) != 1 || h[0].Group != "203.0.113.0/24" || h[0].Origin != groupOrigin ||
		!slices.Equal(h[0].Banned, []string{"s0", "s1"}) || !slices.Equal(h[0].Held, []string{"s2", "s3"}) || h[0].Probing {
		t.Fatalf("after two bans: holds %+v, want 203.0.113.0/24 for %s, banned [s0 s1], held [s2 s3], no probe", h, groupOrigin)
	}

	probe, err := pickExit(p, clk, "s2")
	if err != nil {
		t.Fatalf("first held pick: %v", err)
	}
	if h := holds(p); !h[0].Probing {
		t.Errorf("with s2's attempt out: Probing = false, want true")
	}
	var nh *pool.NoHealthyExitError
	if _, err := pickExit(p, clk, "s3"); !errors.As(err, &nh) {
		t.Errorf("pick s3 while s2's probe is out: err = %v, want a *NoHealthyExitError", err)
	}
	if _, err := pickExit(p, clk, "s2"); err == nil {
		t.Errorf("pick s2 again while its probe is out: err = nil, want a refusal")
	}
	// Unpinned picks go to the exits outside the group meanwhile.
	for i := range 40 {
		l, err := p.PickAt(context.Background(), clk.Now(), pool.Request{Origin: groupOrigin})
		if err != nil {
			t.Fatalf("unpinned pick %d: %v", i, err)
		}
		if g := l.Exit().Label(); g != "o0" && g != "o1" {
			t.Fatalf("unpinned pick %d went through %s, want o0 or o1 (s0, s1 banned; s2, s3 held)", i, g)
		}
		l.ReportAt(clk.Now(), pageVerdict)
	}
	// Another origin knows nothing of the hold.
	other, err := p.PickAt(context.Background(), clk.Now(), pool.Request{Origin: "other.example", Exit: "s3"})
	if err != nil {
		t.Fatalf("pick s3 for another origin: %v", err)
	}
	other.ReportAt(clk.Now(), pageVerdict)

	probe.ReportAt(clk.Now(), pageVerdict)
	if h := holds(p); len(h) != 0 {
		t.Fatalf("after s2 was served: holds %+v, want none", h)
	}
	a, errA := pickExit(p, clk, "s2")
	b, errB := pickExit(p, clk, "s3")
	if errA != nil || errB != nil {
		t.Fatalf("after the release, concurrent picks of s2 and s3: %v, %v; want both admitted", errA, errB)
	}
	a.ReportAt(clk.Now(), pageVerdict)
	b.ReportAt(clk.Now(), pageVerdict)
}

// TestGroupBannedProbeKeepsHold: a held member's banned attempt frees the slot for the next
// member, and the hold stays; a released lease frees it too.
func TestGroupBannedProbeKeepsHold(t *testing.T) {
	p, clk := newGroupPool(t)
	ban(t, p, clk, 0, "s0")
	ban(t, p, clk, time.Second, "s1")
	ban(t, p, clk, 2*time.Second, "s2") // the held s2's probe meets the ban too
	if h := holds(p); len(h) != 1 || h[0].Probing {
		t.Fatalf("after s2's banned probe: holds %+v, want the hold, no probe out", h)
	}
	l, err := pickExit(p, clk, "s3")
	if err != nil {
		t.Fatalf("pick s3 after s2's probe ended: %v", err)
	}
	l.Release()
	l, err = pickExit(p, clk, "s3")
	if err != nil {
		t.Fatalf("pick s3 after its released lease: %v", err)
	}
	if _, err := pickExit(p, clk, "s3"); err == nil {
		t.Error("a second concurrent pick of s3: err = nil, want a refusal")
	}
	// A probe that never reports frees the slot once the probe lease has passed.
	clk.Set(syncT0.Add(2*time.Second + breaker.DefaultProbeLease + time.Second))
	l2, err := pickExit(p, clk, "s3")
	if err != nil {
		t.Fatalf("pick s3 after the lost probe's lease: %v", err)
	}
	l2.ReportAt(clk.Now(), pageVerdict)
	l.ReportAt(clk.Now(), pageVerdict) // late: changes nothing more
	if h := holds(p); len(h) != 0 {
		t.Fatalf("after s3 was served: holds %+v, want none", h)
	}
}

// TestGroupBansOutsideWindow: bans further apart than the window hold nothing.
func TestGroupBansOutsideWindow(t *testing.T) {
	p, clk := newGroupPool(t, pool.WithGroups(pool.GroupSettings{MinBans: 2, Window: time.Minute}))
	ban(t, p, clk, 0, "s0")
	ban(t, p, clk, time.Minute+time.Second, "s1")
	if h := holds(p); len(h) != 0 {
		t.Fatalf("bans 61 s apart with a 1 min window: holds %+v, want none", h)
	}
	a, errA := pickExit(p, clk, "s2")
	b, errB := pickExit(p, clk, "s2")
	if errA != nil || errB != nil {
		t.Fatalf("two concurrent picks of s2: %v, %v; want both admitted", errA, errB)
	}
	a.Release()
	b.Release()
	// A third ban within the window of the second holds the last member.
	ban(t, p, clk, time.Minute+30*time.Second, "s2")
	if h := holds(p); len(h) != 1 || !slices.Equal(h[0].Held, []string{"s0", "s3"}) {
		t.Fatalf("after s1 and s2 banned 29 s apart: holds %+v, want s0 and s3 held", h)
	}
}

// TestGroupMinBans: with MinBans 3, two bans hold nothing; and Disabled holds nothing at all.
func TestGroupMinBans(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    pool.GroupSettings
		bans []string
		want int
	}{
		{"k=3, two bans", pool.GroupSettings{MinBans: 3}, []string{"s0", "s1"}, 0},
		{"k=3, three bans", pool.GroupSettings{MinBans: 3}, []string{"s0", "s1", "s2"}, 1},
		{"defaults, two bans", pool.GroupSettings{}, []string{"s0", "s1"}, 0},
		{"defaults, three bans", pool.GroupSettings{}, []string{"s0", "s1", "s2"}, 1},
		{"disabled", pool.GroupSettings{Disabled: true}, []string{"s0", "s1", "s2"}, 0},
		{"other subnets", pool.GroupSettings{}, []string{"o0", "o1"}, 0},
	} {
		p, clk := newGroupPool(t, pool.WithGroups(tc.s))
		for i, l := range tc.bans {
			ban(t, p, clk, time.Duration(i)*time.Second, l)
		}
		if h := holds(p); len(h) != tc.want {
			t.Errorf("%s: bans of %v hold %+v, want %d holds", tc.name, tc.bans, h, tc.want)
		}
	}
}

// TestExitGroup: which exits group by themselves, and the group attribute.
func TestExitGroup(t *testing.T) {
	for _, tc := range []struct {
		raw, group, want string
	}{
		{"203.0.113.7:8080", "", "203.0.113.0/24"},
		{"http://u:p@203.0.113.200:8080", "", "203.0.113.0/24"},
		{"10.1.2.3:3128", "", "10.1.2.0/24"},
		{"proxy.example:8080", "", ""},
		{"http://[2001:db8::1]:8080", "", ""},
		{"http://[::ffff:203.0.113.7]:8080", "", ""},
		{"127.0.0.2:8080", "", ""},
		{"proxy.example:8080", "ISP-A", "isp-a"},
		{"http://[2001:db8::1]:8080", "v6-pool", "v6-pool"},
		{"203.0.113.7:8080", "none", ""},
		{"203.0.113.7:8080", "isp-b", "isp-b"},
	} {
		e := pool.MustParseExit(tc.raw)
		if tc.group != "" {
			e = e.WithAttr(pool.GroupAttr, tc.group)
		}
		if got := e.Group(); got != tc.want {
			t.Errorf("ParseExit(%q) with group=%q: Group() = %q, want %q", e.Label(), tc.group, got, tc.want)
		}
	}
}

// TestGroupAttribute: hostnames hold nothing by themselves; the group attribute groups them, and
// a list line's group= is that attribute.
func TestGroupAttribute(t *testing.T) {
	for _, tc := range []struct {
		name string
		list string
		want []string // held, or nil for no hold
	}{
		{"hostnames", "h0.example:1\nh1.example:1\nh2.example:1\n", nil},
		{"group=", "h0.example:1 group=isp-a\nh1.example:1 group=isp-a\nh2.example:1 group=isp-a\nh3.example:1 group=isp-b\n", []string{"http://h2.example:1"}},
		{"group=none", "203.0.113.1:1 group=none\n203.0.113.2:1\n203.0.113.3:1\n", nil},
		{"IPv6", "[2001:db8::1]:1\n[2001:db8::2]:1\n[2001:db8::3]:1\n", nil},
	} {
		exits, err := pool.ReadExits(strings.NewReader(tc.list))
		if err != nil {
			t.Fatalf("%s: ReadExits: %v", tc.name, err)
		}
		clk := clock.NewFake(syncT0)
		p, err := pool.New(pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(1), pool.WithGroups(pool.GroupSettings{MinBans: 2}))
		if err != nil {
			t.Fatal(err)
		}
		ban(t, p, clk, 0, exits[0].Label())
		ban(t, p, clk, time.Second, exits[1].Label())
		var got []string
		if h := holds(p); len(h) == 1 {
			got = h[0].Held
		} else if len(h) > 1 {
			t.Fatalf("%s: holds %+v, want at most one", tc.name, h)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: after bans of %s and %s, held %v, want %v", tc.name, exits[0].Label(), exits[1].Label(), got, tc.want)
		}
	}
}

// groupEvents records GroupChanged events.
type groupEvents struct {
	pool.NopObserver
	mu  sync.Mutex
	got []pool.GroupHold
}

func (g *groupEvents) GroupChanged(h pool.GroupHold) {
	g.mu.Lock()
	g.got = append(g.got, h)
	g.mu.Unlock()
}

// TestGroupObserver: a GroupObserver hears the hold start and end.
func TestGroupObserver(t *testing.T) {
	var ev groupEvents
	p, clk := newGroupPool(t, pool.WithObserver(&ev))
	ban(t, p, clk, 0, "s0")
	ban(t, p, clk, time.Second, "s1")
	clk.Set(syncT0.Add(5 * time.Second))
	l, err := pickExit(p, clk, "s3")
	if err != nil {
		t.Fatal(err)
	}
	l.ReportAt(clk.Now(), pageVerdict)
	if len(ev.got) != 2 {
		t.Fatalf("events %+v, want 2 (held, released)", ev.got)
	}
	start, end := ev.got[0], ev.got[1]
	if !start.Since.Equal(syncT0.Add(time.Second)) || !start.Released.IsZero() || !slices.Equal(start.Held, []string{"s2", "s3"}) {
		t.Errorf("start event %+v, want since t0+1s, not released, held [s2 s3]", start)
	}
	if !end.Released.Equal(syncT0.Add(5*time.Second)) || end.ServedBy != "s3" || end.Group != "203.0.113.0/24" {
		t.Errorf("end event %+v, want released at t0+5s, served by s3", end)
	}
}

// TestGroupSettingsErrors: bad settings are errors naming the field.
func TestGroupSettingsErrors(t *testing.T) {
	for _, s := range []pool.GroupSettings{{MinBans: 1}, {MinBans: 17}, {MinBans: -1}, {Window: -time.Second}} {
		_, err := pool.New(pool.WithGroups(s))
		if err == nil || !strings.Contains(err.Error(), "GroupSettings.") {
			t.Errorf("New(WithGroups(%+v)) = %v, want an error naming the field", s, err)
		}
	}
}

// TestGroupPickAllocs: a pick stays free of allocations while a group is held, for a held
// member (taking and giving back the probe slot) and for the others.
func TestGroupPickAllocs(t *testing.T) {
	p, clk := newGroupPool(t)
	ban(t, p, clk, 0, "s0")
	ban(t, p, clk, time.Second, "s1")
	if len(holds(p)) != 1 {
		t.Fatal("no hold")
	}
	ctx := context.Background()
	pick := func(want ...string) func() {
		return func() {
			l, err := p.PickAt(ctx, clk.Now(), pool.Request{Origin: groupOrigin})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(want, l.Exit().Label()) {
				t.Fatalf("picked %s, want one of %v", l.Exit().Label(), want)
			}
			l.ReleaseAt(clk.Now())
		}
	}
	if n := testing.AllocsPerRun(200, pick("o0", "o1", "s2", "s3")); n != 0 {
		t.Errorf("a pick among held and other exits: %v allocations, want 0", n)
	}
	ban(t, p, clk, time.Second, "o0")
	ban(t, p, clk, time.Second, "o1")
	if n := testing.AllocsPerRun(200, pick("s2", "s3")); n != 0 {
		t.Errorf("a pick of a held member: %v allocations, want 0", n)
	}
}

// TestGroupHoldForgottenBySweep: an origin the idle sweep forgets takes its holds with it, and a
// GroupObserver hears the hold end with no member served.
func TestGroupHoldForgottenBySweep(t *testing.T) {
	var ev groupEvents
	p, clk := newGroupPool(t, pool.WithObserver(&ev))
	ban(t, p, clk, 0, "s0")
	ban(t, p, clk, time.Second, "s1")
	later := syncT0.Add(2 * time.Hour)
	p.Sweep(later)
	if h := p.SnapshotAt(later).Groups; len(h) != 0 {
		t.Fatalf("after the origin was swept: holds %+v, want none", h)
	}
	if len(ev.got) != 2 || !ev.got[1].Released.Equal(later) || ev.got[1].ServedBy != "" {
		t.Fatalf("events %+v, want the hold, then its end at the sweep with no member served", ev.got)
	}
	// The origin starts afresh: s2 and s3 are not held.
	clk.Set(later)
	a, errA := pickExit(p, clk, "s2")
	b, errB := pickExit(p, clk, "s2")
	if errA != nil || errB != nil {
		t.Fatalf("two concurrent picks of s2 after the sweep: %v, %v; want both admitted", errA, errB)
	}
	a.Release()
	b.Release()
}

// TestGroupHoldBoundsConcurrentAttempts: with every other exit banned, eight concurrent picks
// (none reported yet) put eight attempts on the group's two unbanned members without groups, and
// one with them: the spreading ban costs one attempt at a time.
func TestGroupHoldBoundsConcurrentAttempts(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    pool.GroupSettings
		want int
	}{
		{"groups off", pool.GroupSettings{Disabled: true}, 8},
		{"groups on", pool.GroupSettings{MinBans: 2}, 1},
	} {
		p, clk := newGroupPool(t, pool.WithGroups(tc.s))
		for i, l := range []string{"s0", "s1", "o0", "o1"} {
			ban(t, p, clk, time.Duration(i)*time.Second, l)
		}
		var out []pool.Lease
		for range 8 {
			l, err := p.PickAt(context.Background(), clk.Now(), pool.Request{Origin: groupOrigin})
			if err == nil {
				out = append(out, l)
			}
		}
		if len(out) != tc.want {
			t.Errorf("%s: %d of 8 concurrent picks admitted through s2 and s3, want %d", tc.name, len(out), tc.want)
		}
		for _, l := range out {
			l.ReportAt(clk.Now(), challenge)
		}
	}
}

// TestGroupHoldMovesSession: a sticky session on a held member whose group's attempt is out
// moves to a ready exit rather than waiting on the hold.
func TestGroupHoldMovesSession(t *testing.T) {
	p, clk := newGroupPool(t)
	ctx := context.Background()
	// s0 and s1 banned: s2 and s3 held. o0 and o1 out by hand: only held members are left.
	ban(t, p, clk, 0, "s0")
	ban(t, p, clk, time.Second, "s1")
	if err := p.Ban("o0", groupOrigin, time.Hour, "test"); err != nil {
		t.Fatal(err)
	}
	if err := p.Ban("o1", groupOrigin, time.Hour, "test"); err != nil {
		t.Fatal(err)
	}
	first, err := p.PickAt(ctx, clk.Now(), pool.Request{Origin: groupOrigin, Session: "u", Exit: "s2"})
	if err != nil {
		t.Fatal(err)
	}
	first.Release()
	sess, err := p.PickAt(ctx, clk.Now(), pool.Request{Origin: groupOrigin, Session: "u"})
	if err != nil || sess.Exit().Label() != "s2" {
		t.Fatalf("session pick = %v, %v; want s2 (its pin, the group's probe slot free)", sess.Exit(), err)
	}
	// s2's attempt holds the group's slot: a second pick of the session goes to s3 ... which is
	// held too, so it is refused rather than sent through the group twice.
	if l, err := p.PickAt(ctx, clk.Now(), pool.Request{Origin: groupOrigin, Session: "u"}); err == nil {
		t.Errorf("second session pick while the group's attempt is out went through %s, want a refusal", l.Exit().Label())
	}
	if err := p.Release("o0", groupOrigin); err != nil {
		t.Fatal(err)
	}
	moved, err := p.PickAt(ctx, clk.Now(), pool.Request{Origin: groupOrigin, Session: "u"})
	if err != nil || moved.Exit().Label() != "o0" {
		t.Fatalf("session pick with o0 back = %v, %v; want o0", moved.Exit(), err)
	}
	moved.ReportAt(clk.Now(), pageVerdict)
	sess.ReportAt(clk.Now(), pageVerdict)
}
