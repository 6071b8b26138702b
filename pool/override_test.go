package pool_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// newOverridePool is newSyncPool with more options: breakers trip on one failure and wait exactly
// 10 s unless an override says otherwise; no origin guard.
func newOverridePool(t *testing.T, rec *syncRecorder, exits []*pool.Exit, opts ...pool.Option) (*pool.Pool, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(syncT0)
	s := breaker.Settings{FailureThreshold: 1, BaseCooldown: 10 * time.Second, Jitter: -1}
	all := []pool.Option{
		pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(3), pool.WithInlineSweep(),
		pool.WithPairSettings(s), pool.WithExitSettings(s),
		pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}),
	}
	if rec != nil {
		all = append(all, pool.WithObserver(rec))
	}
	p, err := pool.New(append(all, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p, clk
}

// tripPair fails one pick of origin through label at the fake clock's now and returns how long the
// pair then stays OPEN (0 if it did not open).
func tripPair(t *testing.T, p *pool.Pool, clk *clock.Fake, label, origin string) time.Duration {
	t.Helper()
	pickVia(t, p, label, origin).Report(failVerdict)
	ps, ok := pairStatus(p, label, origin)
	if !ok || ps.Breaker.State != breaker.Open {
		return 0
	}
	return ps.Breaker.NextProbe.Sub(clk.Now())
}

// TestOriginAndExitPairSettings: the cooldown a pair trips into, for each layering of the pool's
// pair settings, an exit's own and an origin pattern's: origin patterns win field by field over
// the exit's, which win over the pool's; an exit's exit settings govern its own breaker only.
func TestOriginAndExitPairSettings(t *testing.T) {
	exits := []*pool.Exit{
		syncExit("plain", 1, 0, 1),
		syncExit("tuned", 2, 0, 1).WithPairSettings(breaker.Settings{BaseCooldown: time.Minute, FailureThreshold: 2}),
		syncExit("wide", 3, 0, 1).WithExitSettings(breaker.Settings{BaseCooldown: 3 * time.Minute}),
	}
	p, clk := newOverridePool(t, nil, exits,
		pool.WithOriginSettings("slow.example", pool.OriginSettings{Pair: breaker.Settings{BaseCooldown: 5 * time.Minute}}),
		pool.WithOriginSettings("*.strict.example", pool.OriginSettings{Pair: breaker.Settings{FailureThreshold: 1}}),
	)
	tests := []struct {
		exit, origin string
		fails        int // failures reported before the pair opens
		want         time.Duration
	}{
		{"plain", "news.example", 1, 10 * time.Second},       // the pool's
		{"plain", "slow.example", 1, 5 * time.Minute},        // the origin's
		{"tuned", "news.example", 2, time.Minute},            // the exit's, both fields
		{"tuned", "slow.example", 2, 5 * time.Minute},        // the origin's cooldown, the exit's threshold
		{"tuned", "www.strict.example", 1, time.Minute},      // the origin's threshold, the exit's cooldown
		{"wide", "slow.example", 1, 5 * time.Minute},         // exit settings leave pairs alone
		{"plain", "slow.example:8443", 1, 5 * time.Minute},   // a host pattern covers every port
		{"plain", "strict.example", 1, 10 * time.Second},     // *.strict.example is subdomains only
		{"tuned", "a.b.strict.example", 1, time.Minute},      // at any depth
		{"wide", "news.example", 1, 10 * time.Second},        // the pool's
		{"plain", "other.slow.example", 1, 10 * time.Second}, // not a subdomain pattern
	}
	for i, tt := range tests {
		var got time.Duration
		for range tt.fails {
			got = tripPair(t, p, clk, tt.exit, tt.origin)
		}
		if got != tt.want {
			t.Errorf("%d: pair (%s, %s) after %d failures is OPEN for %v, want %v", i, tt.exit, tt.origin, tt.fails, got, tt.want)
		}
	}

	// The exit's own breaker: "wide" waits 3 min, the others the pool's 10 s.
	for _, c := range []struct {
		exit string
		want time.Duration
	}{{"wide", 3 * time.Minute}, {"plain", 10 * time.Second}} {
		pickVia(t, p, c.exit, "fresh.example").Report(exitDown)
		if got := exitStatus(t, p, c.exit).Breaker.NextProbe.Sub(clk.Now()); got != c.want {
			t.Errorf("exit %s tripped: OPEN for %v, want %v", c.exit, got, c.want)
		}
	}
}

// TestExitSettingsErrorsNameTheExit: settings that cannot be, for the pool's settings or under an
// origin pattern, are an error from New, Add and Sync naming the exit, and nothing changes.
func TestExitSettingsErrorsNameTheExit(t *testing.T) {
	bad := syncExit("bad", 1, 0, 1).WithPairSettings(breaker.Settings{MaxCooldown: 5 * time.Second}) // < the pool's 10 s
	_, err := pool.New(pool.WithExits(bad), pool.WithPairSettings(breaker.Settings{BaseCooldown: 10 * time.Second}))
	if err == nil || !strings.Contains(err.Error(), "exit bad: pair settings") || !strings.Contains(err.Error(), "MaxCooldown") {
		t.Errorf("New(exit with MaxCooldown under the pool's BaseCooldown) = %v, want an error naming exit bad", err)
	}

	p, _ := newOverridePool(t, nil, []*pool.Exit{syncExit("ok", 1, 0, 1)},
		pool.WithOriginSettings("*.slow.example", pool.OriginSettings{Pair: breaker.Settings{BaseCooldown: time.Hour}}))
	under := syncExit("under", 2, 0, 1).WithPairSettings(breaker.Settings{MaxCooldown: 30 * time.Minute})
	wide := syncExit("wide", 3, 0, 1).WithExitSettings(breaker.Settings{HalfOpenProbes: 100})
	err = p.Add(under, wide)
	for _, w := range []string{`exit under: pair settings under WithOriginSettings("*.slow.example")`, "exit wide: exit settings", "HalfOpenProbes"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Add(bad exits) = %v, want it to contain %q", err, w)
		}
	}
	if _, err := p.Sync([]*pool.Exit{syncExit("ok", 1, 0, 1), wide}); err == nil || !strings.Contains(err.Error(), "exit wide") {
		t.Errorf("Sync(bad exit) = %v, want an error naming exit wide", err)
	}
	if got := labels(p.Exits()); len(got) != 1 || got[0] != "ok" {
		t.Errorf("after failed Add and Sync, exits = %v, want [ok]", got)
	}
}

// TestRestoreClampsToEffectiveSettings: a saved state is clamped to what the pair's (or exit's)
// own settings could produce, not the pool's.
func TestRestoreClampsToEffectiveSettings(t *testing.T) {
	short := breaker.Settings{MaxCooldown: time.Minute, ParkFor: time.Minute, MaxRetryAfter: time.Minute}
	exits := []*pool.Exit{
		syncExit("plain", 1, 0, 1),
		syncExit("short", 2, 0, 1).WithPairSettings(short).WithExitSettings(short),
	}
	p, clk := newOverridePool(t, nil, exits,
		pool.WithOriginSettings("brief.example", pool.OriginSettings{Pair: short}))
	now := clk.Now()
	far := breaker.Saved{State: breaker.Open, NextProbe: now.Add(24 * time.Hour), Changed: now}
	pair := func(exit, origin string) pool.SavedBreaker {
		return pool.SavedBreaker{Scope: pool.ScopePair, Exit: exit, Origin: origin, Saved: far}
	}
	st := pool.SavedState{Version: pool.SavedStateVersion, Saved: now, Breakers: []pool.SavedBreaker{
		pair("plain", "news.example"), pair("plain", "brief.example"), pair("short", "news.example"),
		{Scope: pool.ScopeExit, Exit: "short", Saved: far}, {Scope: pool.ScopeExit, Exit: "plain", Saved: far},
	}}
	if applied, skipped, err := p.Restore(now, st); applied != 5 || skipped != 0 || err != nil {
		t.Fatalf("Restore = %d, %d, %v; want 5, 0, nil", applied, skipped, err)
	}
	// The pool's longest window: MaxRetryAfter's default hour (Jitter off).
	for _, c := range []struct {
		exit, origin string
		want         time.Duration
	}{
		{"plain", "news.example", breaker.DefaultMaxRetryAfter},
		{"plain", "brief.example", time.Minute},
		{"short", "news.example", time.Minute},
	} {
		ps, ok := pairStatus(p, c.exit, c.origin)
		if got := ps.Breaker.NextProbe.Sub(now); !ok || got != c.want {
			t.Errorf("restored pair (%s, %s): OPEN for %v (found %v), want %v", c.exit, c.origin, got, ok, c.want)
		}
	}
	for _, c := range []struct {
		exit string
		want time.Duration
	}{{"short", time.Minute}, {"plain", breaker.DefaultMaxRetryAfter}} {
		if got := exitStatus(t, p, c.exit).Breaker.NextProbe.Sub(now); got != c.want {
			t.Errorf("restored exit %s: OPEN for %v, want %v", c.exit, got, c.want)
		}
	}
}

// TestSyncKeepsAndRetunesExitSettings: a proxy list reloaded with the same breaker attributes
// keeps the exit (*Exit, settings and state); one whose attributes changed keeps the exit's state
// but remakes its breakers with the new settings — an OPEN pair stays OPEN, clamped to the new
// settings' longest window — and observers hear only that the old *Exit left, no transition.
func TestSyncKeepsAndRetunesExitSettings(t *testing.T) {
	read := func(list string) []*pool.Exit {
		t.Helper()
		exits, err := pool.ReadExits(strings.NewReader(list))
		if err != nil {
			t.Fatal(err)
		}
		return exits
	}
	const before = `10.0.0.1:3128 label=a cooldown=5m
10.0.0.2:3128 label=b cooldown=5m exit-cooldown=1m
`
	rec := &syncRecorder{}
	p, clk := newOverridePool(t, rec, read(before))
	if got := tripPair(t, p, clk, "a", "shop.example"); got != 5*time.Minute {
		t.Fatalf("pair (a, shop) from the list's cooldown=5m: OPEN for %v, want 5m", got)
	}
	tripPair(t, p, clk, "b", "shop.example")
	pickVia(t, p, "b", "news.example").Report(exitDown)
	if got := exitStatus(t, p, "b").Breaker.NextProbe.Sub(clk.Now()); got != time.Minute {
		t.Fatalf("exit b from exit-cooldown=1m: OPEN for %v, want 1m", got)
	}
	kept := p.Exit("a")
	rec.take()

	clk.Advance(10 * time.Second)
	res, err := p.Sync(read(before))
	if err != nil || res != (pool.SyncResult{Kept: 2}) {
		t.Fatalf("Sync(same list) = %+v, %v; want kept 2", res, err)
	}
	if p.Exit("a") != kept {
		t.Errorf("Sync(same list) replaced exit a's *Exit")
	}
	if got := tripPair(t, p, clk, "a", "news.example"); got != 5*time.Minute {
		t.Errorf("after Sync(same list), a new pair of a: OPEN for %v, want the list's 5m", got)
	}

	// a: a shorter cooldown and a cap; b: only its exit settings change.
	const after = `10.0.0.1:3128 label=a cooldown=30s max-cooldown=1m park=1m
10.0.0.2:3128 label=b cooldown=5m exit-cooldown=2m
`
	res, err = p.Sync(read(after))
	if err != nil || res != (pool.SyncResult{Updated: 2}) {
		t.Fatalf("Sync(retuned list) = %+v, %v; want updated 2", res, err)
	}
	ps, _ := pairStatus(p, "a", "shop.example")
	// Tripped at t0 for 5 min, 10 s ago: the window is kept, as a restore keeps it — the new
	// settings' longest window (MaxRetryAfter's default hour) allows it; see
	// TestRestoreClampsToEffectiveSettings for one cut short.
	if ps.Breaker.State != breaker.Open || !ps.Breaker.NextProbe.Equal(syncT0.Add(5*time.Minute)) || ps.Breaker.Trips != 1 {
		t.Errorf("retuned pair (a, shop) = %v until %v, trips %d; want open until t0+5m, 1 trip", ps.Breaker.State, ps.Breaker.NextProbe, ps.Breaker.Trips)
	}
	if got := tripPair(t, p, clk, "a", "other.example"); got != 30*time.Second {
		t.Errorf("after the retune, a new pair of a: OPEN for %v, want 30s", got)
	}
	ps, _ = pairStatus(p, "b", "shop.example")
	if ps.Breaker.State != breaker.Open || ps.Breaker.NextProbe.Sub(syncT0) != 5*time.Minute {
		t.Errorf("pair (b, shop), pair settings unchanged = %v until %v, want open until t0+5m", ps.Breaker.State, ps.Breaker.NextProbe)
	}
	es := exitStatus(t, p, "b")
	if es.Breaker.State != breaker.Open || !es.Breaker.NextProbe.Equal(syncT0.Add(time.Minute)) {
		t.Errorf("retuned exit b = %v until %v, want open until its old window's end", es.Breaker.State, es.Breaker.NextProbe)
	}
	removed, changes := rec.take()
	if len(removed) != 2 {
		t.Errorf("Sync(retuned list): observers heard %d exits removed, want the 2 old *Exits", len(removed))
	}
	for _, c := range changes {
		if c.Cause == breaker.CauseRestored {
			t.Errorf("Sync(retuned list): observers heard %+v; a retune reports no transition", c)
		}
	}

	// The retuned pair works on: its failed probe reopens it with the new settings.
	clk.Set(syncT0.Add(5 * time.Minute))
	probe := pickVia(t, p, "a", "shop.example")
	if !probe.Info().Probe {
		t.Fatalf("pick of (a, shop) after its window = %+v, want a probe", probe.Info())
	}
	probe.Report(failVerdict)
	ps, _ = pairStatus(p, "a", "shop.example")
	if got := ps.Breaker.NextProbe.Sub(clk.Now()); got != time.Minute {
		t.Errorf("failed probe of the retuned pair (a, shop): OPEN for %v, want the new max-cooldown 1m", got)
	}
}

// TestRetunedExitComingBack: an exit removed and added back within retention with other settings
// keeps its state under the new settings.
func TestRetunedExitComingBack(t *testing.T) {
	e := syncExit("a", 1, 0, 1)
	p, clk := newOverridePool(t, nil, []*pool.Exit{e, syncExit("b", 2, 0, 1)})
	tripPair(t, p, clk, "a", "shop.example")
	if err := p.Remove("a"); err != nil {
		t.Fatal(err)
	}
	if err := p.Add(e.WithPairSettings(breaker.Settings{BaseCooldown: 2 * time.Minute})); err != nil {
		t.Fatal(err)
	}
	ps, ok := pairStatus(p, "a", "shop.example")
	if !ok || ps.Breaker.State != breaker.Open {
		t.Fatalf("pair (a, shop) after the exit came back = %+v, %v; want it still open", ps, ok)
	}
	if got := tripPair(t, p, clk, "a", "news.example"); got != 2*time.Minute {
		t.Errorf("a new pair of the exit back with new settings: OPEN for %v, want 2m", got)
	}
}

// TestFailureRatioOverrideMakesPairsEager: an exit or origin whose pair settings count successes
// (FailureRatio) gets a breaker for each pair on its first pick; others still only on a failure.
func TestFailureRatioOverrideMakesPairsEager(t *testing.T) {
	ratio := breaker.Settings{FailureRatio: 0.5}
	p, _ := newOverridePool(t, nil, []*pool.Exit{syncExit("lazy", 1, 0, 1), syncExit("eager", 2, 0, 1).WithPairSettings(ratio)},
		pool.WithOriginSettings("counted.example", pool.OriginSettings{Pair: ratio}))
	for _, c := range []struct {
		exit, origin string
		want         bool
	}{{"lazy", "news.example", false}, {"eager", "news.example", true}, {"lazy", "counted.example", true}} {
		pickVia(t, p, c.exit, c.origin).Report(okVerdict)
		if _, ok := pairStatus(p, c.exit, c.origin); ok != c.want {
			t.Errorf("after a success of (%s, %s): pair breaker made = %v, want %v", c.exit, c.origin, ok, c.want)
		}
	}
}

// TestReadExitsBreakerAttributes: the breaker attributes of a list line, and their errors.
func TestReadExitsBreakerAttributes(t *testing.T) {
	exits, err := pool.ReadExits(strings.NewReader(
		"a.example:80 label=a failures=5 window=2m cooldown=30s max-cooldown=10m park=1h exit-failures=9 exit-cooldown=1m\n" +
			"b.example:80 label=b tier=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	wantPair := breaker.Settings{FailureThreshold: 5, Window: 2 * time.Minute, BaseCooldown: 30 * time.Second, MaxCooldown: 10 * time.Minute, ParkFor: time.Hour}
	wantExit := breaker.Settings{FailureThreshold: 9, BaseCooldown: time.Minute}
	if got := exits[0].PairSettings(); got.FailureThreshold != wantPair.FailureThreshold || got.Window != wantPair.Window ||
		got.BaseCooldown != wantPair.BaseCooldown || got.MaxCooldown != wantPair.MaxCooldown || got.ParkFor != wantPair.ParkFor {
		t.Errorf("PairSettings() = %+v, want %+v", got, wantPair)
	}
	if got := exits[0].ExitSettings(); got.FailureThreshold != wantExit.FailureThreshold || got.BaseCooldown != wantExit.BaseCooldown || got.Window != 0 {
		t.Errorf("ExitSettings() = %+v, want %+v", got, wantExit)
	}
	if got := exits[1].PairSettings(); got.FailureThreshold != 0 || got.BaseCooldown != 0 {
		t.Errorf("a line without breaker attributes: PairSettings() = %+v, want zero", got)
	}

	for i, tt := range []struct{ line, want string }{
		{"a.example:80 failures=0", `failures "0": want an integer from 1 to 1024`},
		{"a.example:80 failures=2000", `failures "2000"`},
		{"a.example:80 exit-failures=x", `exit-failures "x"`},
		{"a.example:80 cooldown=0s", `cooldown "0s": want a positive duration`},
		{"a.example:80 window=-1m", `window "-1m"`},
		{"a.example:80 park=soon", `park "soon"`},
		{"a.example:80 cooldown=5m max-cooldown=1m", "max-cooldown 1m0s is shorter than cooldown 5m0s"},
		{"a.example:80 exit-cooldown=5m exit-max-cooldown=1m", "exit-max-cooldown 1m0s is shorter than exit-cooldown"},
		{"a.example:80 exit-label=x", "a proxy-list field of its own"},
	} {
		_, err := pool.ReadExits(strings.NewReader(tt.line))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "line 1: proxy http://a.example:80") {
			t.Errorf("%d: ReadExits(%q) = %v, want an error naming line 1 and the proxy, containing %q", i, tt.line, err, tt.want)
		}
	}
}

// TestExitSettingsCopies: the With methods copy, the zero Settings removes an override, and an
// exit with settings still never shows its password.
func TestExitSettingsCopies(t *testing.T) {
	e := pool.MustParseExit("http://u:s3cr3t@a.example:80")
	tuned := e.WithPairSettings(breaker.Settings{FailureThreshold: 4}).WithExitSettings(breaker.Settings{BaseCooldown: time.Minute})
	if e.PairSettings().FailureThreshold != 0 || tuned.PairSettings().FailureThreshold != 4 || tuned.ExitSettings().BaseCooldown != time.Minute {
		t.Errorf("WithPairSettings/WithExitSettings: original %+v, copy %+v / %+v", e.PairSettings(), tuned.PairSettings(), tuned.ExitSettings())
	}
	back := tuned.WithPairSettings(breaker.Settings{}).WithExitSettings(breaker.Settings{})
	if back.PairSettings().FailureThreshold != 0 || back.ExitSettings().BaseCooldown != 0 {
		t.Errorf("zero settings did not remove the overrides: %+v, %+v", back.PairSettings(), back.ExitSettings())
	}
	// The same proxy without overrides again: Sync keeps it as it keeps an unchanged exit.
	p, _ := newOverridePool(t, nil, []*pool.Exit{e})
	if res, err := p.Sync([]*pool.Exit{back}); err != nil || res != (pool.SyncResult{Kept: 1}) {
		t.Errorf("Sync(the exit with its overrides removed again) = %+v, %v; want kept 1", res, err)
	}
	if _, err := p.Pick(context.Background(), pool.Request{Origin: "x"}); err != nil {
		t.Fatal(err)
	}
}

// TestRetuneDuringProbe: a pair retuned while its probe is out admits no second probe until that
// probe's lease (30 s by default) could have ended; the old probe's verdict no longer counts, and
// the retuned pair probes and closes afterwards.
func TestRetuneDuringProbe(t *testing.T) {
	e := syncExit("a", 1, 0, 1)
	p, clk := newOverridePool(t, nil, []*pool.Exit{e})
	tripPair(t, p, clk, "a", "shop.example")
	clk.Advance(10 * time.Second)
	old := pickVia(t, p, "a", "shop.example")
	if !old.Info().Probe {
		t.Fatalf("pick after the cooldown = %+v, want a probe", old.Info())
	}
	if res, err := p.Sync([]*pool.Exit{e.WithPairSettings(breaker.Settings{BaseCooldown: time.Minute})}); err != nil || res.Updated != 1 {
		t.Fatalf("Sync(new pair settings) = %+v, %v; want 1 updated", res, err)
	}
	_, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Exit: "a"})
	var nh *pool.NoHealthyExitError
	if !errors.As(err, &nh) || nh.RetryIn != breaker.DefaultProbeLease {
		t.Fatalf("Pick while the old probe is out = %v, want a NoHealthyExitError with RetryIn %v", err, breaker.DefaultProbeLease)
	}
	if st := old.Report(okVerdict).PairState; st == breaker.Closed {
		t.Errorf("the old probe's success closed the retuned pair")
	}
	clk.Advance(breaker.DefaultProbeLease)
	probe := pickVia(t, p, "a", "shop.example")
	if !probe.Info().Probe {
		t.Fatalf("pick a lease later = %+v, want a probe", probe.Info())
	}
	if st := probe.Report(okVerdict).PairState; st != breaker.Closed {
		t.Errorf("the retuned pair's own probe succeeded: pair %v, want closed", st)
	}
}
