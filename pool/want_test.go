package pool_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// geoExits returns n exits labelled g0…, every tenth in the US (country=us), every tenth from the
// fifth in Canada, the rest in Germany; all residential.
func geoExits(n int) []*pool.Exit {
	var out []*pool.Exit
	for i := range n {
		c := "de"
		switch i % 10 {
		case 0:
			c = "us"
		case 5:
			c = "ca"
		}
		e := pool.MustParseExit(fmt.Sprintf("10.1.%d.%d:3128", i/250, i%250)).WithLabel(fmt.Sprintf("g%d", i))
		out = append(out, e.WithAttr("country", c).WithAttr("kind", "residential"))
	}
	return out
}

func newGeoPool(t *testing.T, n int, opts ...pool.Option) (*pool.Pool, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(leaseT0)
	p, err := pool.New(append([]pool.Option{pool.WithExits(geoExits(n)...), pool.WithClock(clk), pool.WithSeed(5),
		pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p, clk
}

func TestExitAttrs(t *testing.T) {
	e := pool.MustParseExit("a.example:80").WithAttr("kind", "dc").WithAttr("country", "us").WithAttr("kind", "residential")
	if got := fmt.Sprint(e.Attrs()); got != "[country=us kind=residential]" {
		t.Errorf("Attrs() = %s, want [country=us kind=residential] (sorted, the later kind replacing the earlier)", got)
	}
	if v, ok := e.Attr("country"); !ok || v != "us" {
		t.Errorf(`Attr("country") = %q, %v; want "us", true`, v, ok)
	}
	if _, ok := e.WithAttr("country", "").Attr("country"); ok {
		t.Error(`WithAttr("country", "") kept the attribute, want it removed`)
	}
	if _, ok := e.Attr("city"); ok {
		t.Error(`Attr("city") found an attribute the exit does not have`)
	}
	for _, c := range []struct{ key, value, want string }{
		{"Country", "us", "want a lower-case letter first"},
		{"tier", "1", "a proxy-list field of its own"},
		{"city", "new york", `byte 4 (' ')`},
		{"city", strings.Repeat("x", 65), "value of 65 bytes, want 1 to 64"},
		{strings.Repeat("k", 33), "x", "33 bytes, want 1 to 32"},
	} {
		_, err := pool.New(pool.WithExits(pool.MustParseExit("u:secret@a.example:80").WithAttr(c.key, c.value)))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "secret") {
			t.Errorf("New with attribute %s=%q: %v, want an error containing %q and no password", c.key, c.value, err, c.want)
		}
	}
}

func TestReadExitsAttributes(t *testing.T) {
	exits, err := pool.ReadExits(strings.NewReader("a.example:80 country=us city=nyc asn=7922 kind=residential tier=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := exits[0]
	if got := fmt.Sprint(e.Attrs()); got != "[asn=7922 city=nyc country=us kind=residential]" || e.Tier() != 1 {
		t.Errorf("attributes %s, tier %d; want [asn=7922 city=nyc country=us kind=residential], tier 1", got, e.Tier())
	}
}

func TestParseWant(t *testing.T) {
	w, err := pool.ParseWant("kind=residential country=US,ca")
	if err != nil {
		t.Fatal(err)
	}
	if got := w.String(); got != "country=ca,us kind=residential" {
		t.Errorf("String() = %q, want the canonical form", got)
	}
	if again := pool.MustParseWant("country=us,ca  kind=residential"); again != w {
		t.Error("an equal Want parsed again is another value, want the interned one")
	}
	for _, c := range []struct{ in, want string }{
		{"country", `"country": want key=value`},
		{"country=us country=ca", "attribute country twice"},
		{"country=", "value of 0 bytes"},
		{"Country=us", "want a lower-case letter first"},
	} {
		if _, err := pool.ParseWant(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseWant(%q) = %v, want an error containing %q", c.in, err, c.want)
		}
	}
	if w, err := pool.ParseWant(""); w != nil || err != nil {
		t.Errorf(`ParseWant("") = %v, %v; want the nil Want`, w, err)
	}
}

// TestWantPicksOnlyMatchingExits: under concurrency, a pick constrained to country=us (or to
// us,ca) only ever gets an exit that has it, among all the matching ones.
func TestWantPicksOnlyMatchingExits(t *testing.T) {
	p, _ := newGeoPool(t, 200)
	for _, c := range []struct {
		want    string
		matches int
	}{{"country=us", 20}, {"country=ca,us", 40}, {"country=us kind=residential", 20}} {
		w := pool.MustParseWant(c.want)
		var mu sync.Mutex
		seen := map[string]bool{}
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for range 400 {
					l, err := p.Pick(context.Background(), pool.Request{Origin: fmt.Sprintf("o%d.test", g), Want: w})
					if err != nil {
						t.Error(err)
						return
					}
					e := l.Exit()
					if !w.Admits(e) {
						t.Errorf("Want %s: picked %s with %v", w, e.Label(), e.Attrs())
					}
					mu.Lock()
					seen[e.Label()] = true
					mu.Unlock()
					l.Release()
				}
			})
		}
		wg.Wait()
		if len(seen) != c.matches {
			t.Errorf("Want %s: %d distinct exits picked, want all %d that match", w, len(seen), c.matches)
		}
	}
}

// TestWantNoMatchIsNotCooling: a Want no exit has fails with *NoMatchingExitError (a
// configuration fault), apart from a Want whose exits are all cooling (*NoHealthyExitError,
// with RetryIn); a pinned exit that does not match is refused by name.
func TestWantNoMatchIsNotCooling(t *testing.T) {
	s := breaker.Settings{FailureThreshold: 1, BaseCooldown: 10 * time.Second, Jitter: -1}
	p, clk := newGeoPool(t, 20, pool.WithPairSettings(s))
	_, err := p.Pick(context.Background(), pool.Request{Origin: "shop.test", Want: pool.MustParseWant("country=fr")})
	var nm *pool.NoMatchingExitError
	if !errors.As(err, &nm) || !errors.Is(err, pool.ErrNoMatchingExit) || nm.Want != "country=fr" || nm.Exits != 20 {
		t.Fatalf("Want country=fr of a pool without: %v, want a *NoMatchingExitError for country=fr, 20 exits", err)
	}
	us := pool.MustParseWant("country=us")
	for range 2 { // g0 and g10, the US exits: each fails once and its pair opens for 10 s
		l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.test", Want: us})
		if err != nil {
			t.Fatal(err)
		}
		l.Report(timeoutVerdict)
	}
	clk.Advance(time.Second)
	_, err = p.Pick(context.Background(), pool.Request{Origin: "shop.test", Want: us})
	var nh *pool.NoHealthyExitError
	if !errors.As(err, &nh) || errors.Is(err, pool.ErrNoMatchingExit) || nh.Exits != 2 || nh.Want != "country=us" || nh.RetryIn != 9*time.Second {
		t.Fatalf("Want country=us with both US exits cooling: %v, want a *NoHealthyExitError, 2 exits matching, retry in 9s", err)
	}
	if _, err := p.Pick(context.Background(), pool.Request{Origin: "shop.test", Want: pool.MustParseWant("country=de")}); err != nil {
		t.Errorf("Want country=de meanwhile: %v, want a pick (the constraint narrows, it does not split state)", err)
	}
	_, err = p.Pick(context.Background(), pool.Request{Origin: "shop.test", Exit: "g1", Want: us})
	if !errors.As(err, &nm) || nm.Exit != "g1" {
		t.Errorf("Request.Exit g1 (de) with Want country=us: %v, want a *NoMatchingExitError naming g1", err)
	}
}

// TestWantFollowsSync: a Sync that changes an exit's attributes re-indexes the pool, and a
// session pinned to an exit that no longer matches moves to one that does.
func TestWantFollowsSync(t *testing.T) {
	p, _ := newGeoPool(t, 20)
	fr := pool.MustParseWant("country=fr")
	exits := geoExits(20)
	exits[3] = exits[3].WithAttr("country", "fr")
	res, err := p.Sync(exits)
	if err != nil || res.Updated != 1 {
		t.Fatalf("Sync with g3's country changed = %v, %v; want 1 updated", res, err)
	}
	for range 20 {
		l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.test", Want: fr})
		if err != nil || l.Exit().Label() != "g3" {
			t.Fatalf("Want country=fr after the Sync: %v, %v; want g3", l.Exit(), err)
		}
		l.Release()
	}
	l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.test", Session: "cart", Exit: ""})
	if err != nil {
		t.Fatal(err)
	}
	pinned := l.Exit()
	l.Release()
	want := pool.MustParseWant("country=us")
	if want.Admits(pinned) {
		want = pool.MustParseWant("country=de")
	}
	l, err = p.Pick(context.Background(), pool.Request{Origin: "shop.test", Session: "cart", Want: want})
	if err != nil || !want.Admits(l.Exit()) {
		t.Errorf("session pinned to %s (%v), then Want %s: picked %v, %v; want an exit that matches", pinned, pinned.Attrs(), want, l.Exit(), err)
	}
	l.Release()
}

// TestWantPickAllocatesNothing: a constrained pick allocates nothing once its index is built.
func TestWantPickAllocatesNothing(t *testing.T) {
	p, clk := newGeoPool(t, 1000)
	w := pool.MustParseWant("country=us,ca")
	ctx, now := context.Background(), clk.Now()
	pick := func() {
		l, err := p.PickAt(ctx, now, pool.Request{Origin: "shop.test", Want: w})
		if err != nil {
			t.Fatal(err)
		}
		l.ReleaseAt(now)
	}
	for range 100 {
		pick()
	}
	if a := testing.AllocsPerRun(1000, pick); a != 0 {
		t.Errorf("a pick with a Want allocated %.1f times, want 0", a)
	}
}

// TestWantTier: "tier=N" (WantTier) wants exits of that tier, which is no attribute; a tier that
// is not a number is an error.
func TestWantTier(t *testing.T) {
	exits := []*pool.Exit{
		pool.MustParseExit("10.9.0.1:3128").WithLabel("t0"),
		pool.MustParseExit("10.9.0.2:3128").WithLabel("t1a").WithTier(1),
		pool.MustParseExit("10.9.0.3:3128").WithLabel("t1b").WithTier(1),
	}
	p, err := pool.New(pool.WithExits(exits...), pool.WithSeed(3))
	if err != nil {
		t.Fatal(err)
	}
	w := pool.MustParseWant("tier=1")
	seen := map[string]bool{}
	for range 50 {
		l, err := p.Pick(context.Background(), pool.Request{Origin: "a.test", Want: w})
		if err != nil {
			t.Fatal(err)
		}
		seen[l.Exit().Label()] = true
		l.Release()
	}
	if len(seen) != 2 || !seen["t1a"] || !seen["t1b"] {
		t.Errorf("Want tier=1 picked %v, want exactly t1a and t1b", seen)
	}
	if _, err := p.Pick(context.Background(), pool.Request{Origin: "a.test", Want: pool.MustParseWant("tier=7")}); !errors.Is(err, pool.ErrNoMatchingExit) {
		t.Errorf("Want tier=7: %v, want ErrNoMatchingExit", err)
	}
	if _, err := pool.ParseWant("tier=x"); err == nil || !strings.Contains(err.Error(), "want a decimal integer") {
		t.Errorf(`ParseWant("tier=x") = %v, want an error naming a decimal integer`, err)
	}
}
