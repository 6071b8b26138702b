package pool_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

var limT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// expiries records SessionExpiry events.
type expiries struct {
	pool.NopObserver
	events[pool.SessionExpiry]
}

func (e *expiries) SessionExpired(x pool.SessionExpiry) { e.add(x) }

// limitPool is a pool of n exits on a fake clock with session limits and an expiry recorder.
func limitPool(t *testing.T, n int, opts ...pool.Option) (*pool.Pool, *clock.Fake, *expiries) {
	t.Helper()
	clk := clock.NewFake(limT0)
	exits := make([]*pool.Exit, n)
	for i := range exits {
		exits[i] = pool.MustParseExit("http://user:secret@127.0.0." + string(rune('1'+i)) + ":3128").WithLabel("ex-" + string(rune('a'+i)))
	}
	rec := &expiries{}
	base := []pool.Option{pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(7), pool.WithObserver(rec),
		pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, Jitter: -1})}
	p, err := pool.New(append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p, clk, rec
}

// sessionPick picks once for session s on shop.example, reports a success and returns the info.
func sessionPick(t *testing.T, p *pool.Pool, s string) pool.LeaseInfo {
	t.Helper()
	l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Session: s})
	if err != nil {
		t.Fatalf("Pick(session %s) = %v", s, err)
	}
	info := l.Info()
	l.Report(pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK})
	return info
}

func TestWithSessionLimitsRejectsBadValues(t *testing.T) {
	for _, tc := range []struct {
		age  time.Duration
		uses int
		want string
	}{
		{-time.Second, 3, "maxAge must not be negative"},
		{time.Minute, -1, "maxUses must not be negative"},
		{0, 0, "sets no limit"},
		{0, math.MaxUint32 + 1, "maxUses must be at most 4294967295"},
	} {
		_, err := pool.New(pool.WithSessionLimits(tc.age, tc.uses))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "WithSessionLimits") {
			t.Errorf("New(WithSessionLimits(%v, %d)) = %v, want an error saying %q", tc.age, tc.uses, err, tc.want)
		}
	}
	for _, ok := range [][2]int{{0, 1}, {int(time.Minute), 0}, {int(time.Second), 10}} {
		if _, err := pool.New(pool.WithSessionLimits(time.Duration(ok[0]), ok[1])); err != nil {
			t.Errorf("New(WithSessionLimits(%v, %d)) = %v, want no error", time.Duration(ok[0]), ok[1], err)
		}
	}
}

// TestSessionMaxUsesRepins: three picks through the first exit, the fourth on another, said
// MovedMaxUses on the lease and to the observer with the three uses; then three more there.
func TestSessionMaxUsesRepins(t *testing.T) {
	p, clk, rec := limitPool(t, 3, pool.WithSessionLimits(0, 3))
	first := sessionPick(t, p, "login-1")
	if first.SessionMoved {
		t.Fatalf("first pick: SessionMoved, want a fresh pin")
	}
	for i := 2; i <= 3; i++ {
		clk.Advance(time.Second)
		if got := sessionPick(t, p, "login-1"); got.Exit != first.Exit || got.SessionMoved {
			t.Fatalf("pick %d: exit %s moved %v, want %s unmoved", i, got.Exit.Label(), got.SessionMoved, first.Exit.Label())
		}
	}
	clk.Advance(time.Second)
	fourth := sessionPick(t, p, "login-1")
	if fourth.Exit == first.Exit || !fourth.SessionMoved || fourth.SessionMove != pool.MovedMaxUses {
		t.Fatalf("pick 4: exit %s moved %v (%v), want another exit than %s, moved for max_uses",
			fourth.Exit.Label(), fourth.SessionMoved, fourth.SessionMove, first.Exit.Label())
	}
	got := rec.list()
	if len(got) != 1 {
		t.Fatalf("expiries = %+v, want 1", got)
	}
	e := got[0]
	if e.Reason != pool.MovedMaxUses || e.Uses != 3 || e.Old != first.Exit || e.New != fourth.Exit || e.Age != 3*time.Second || e.Origin != "shop.example" {
		t.Errorf("expiry = %+v, want max_uses after 3 uses over 3s, %s → %s", e, first.Exit.Label(), fourth.Exit.Label())
	}
	for i := 5; i <= 6; i++ {
		if got := sessionPick(t, p, "login-1"); got.Exit != fourth.Exit || got.SessionMoved {
			t.Fatalf("pick %d: exit %s moved %v, want %s unmoved", i, got.Exit.Label(), got.SessionMoved, fourth.Exit.Label())
		}
	}
	if other := sessionPick(t, p, "login-2"); other.SessionMoved {
		t.Errorf("another session's first pick says moved")
	}
}

// TestSessionMaxAgeOnPoolClock: the pin's age runs on the pool's clock from its first pick.
func TestSessionMaxAgeOnPoolClock(t *testing.T) {
	p, clk, rec := limitPool(t, 2, pool.WithSessionLimits(time.Minute, 0))
	first := sessionPick(t, p, "cart")
	clk.Advance(59 * time.Second)
	if got := sessionPick(t, p, "cart"); got.Exit != first.Exit || got.SessionMoved {
		t.Fatalf("at 59s: exit %s moved %v, want %s unmoved", got.Exit.Label(), got.SessionMoved, first.Exit.Label())
	}
	clk.Advance(time.Second)
	got := sessionPick(t, p, "cart")
	if got.Exit == first.Exit || got.SessionMove != pool.MovedMaxAge {
		t.Fatalf("at 60s: exit %s move %v, want the other exit, max_age", got.Exit.Label(), got.SessionMove)
	}
	if e := rec.list(); len(e) != 1 || e[0].Age != time.Minute || e[0].Uses != 2 || e[0].Reason != pool.MovedMaxAge {
		t.Errorf("expiries = %+v, want one max_age after 1m and 2 uses", e)
	}
}

// TestSessionExpiryApartFromLostExit: a pin whose pair trips moves with MovedExitLost, not a limit.
func TestSessionExpiryApartFromLostExit(t *testing.T) {
	p, _, rec := limitPool(t, 3, pool.WithSessionLimits(0, 100))
	first := sessionPick(t, p, "s")
	l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	l.Report(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked})
	got := sessionPick(t, p, "s")
	if got.Exit == first.Exit || got.SessionMove != pool.MovedExitLost || got.SessionMove.Expired() {
		t.Errorf("after a block: exit %s move %v, want another exit, exit_lost", got.Exit.Label(), got.SessionMove)
	}
	if e := rec.list(); len(e) != 0 {
		t.Errorf("expiries = %+v, want none for a lost exit", e)
	}
}

// TestStrictSessionExpiryIsAnError: in a strict pool the pick that finds its pin expired fails
// once with ErrSessionExpired, sends nothing, and the next pick starts a fresh pin.
func TestStrictSessionExpiryIsAnError(t *testing.T) {
	p, _, rec := limitPool(t, 2, pool.WithSessionLimits(0, 2), pool.WithStrictSessions())
	first := sessionPick(t, p, "login")
	sessionPick(t, p, "login")
	_, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Session: "login"})
	var lost *pool.SessionLostError
	if !errors.Is(err, pool.ErrSessionExpired) || !errors.Is(err, pool.ErrSessionLost) || !errors.As(err, &lost) || lost.Reason != pool.MovedMaxUses {
		t.Fatalf("third pick = %v, want a *SessionLostError for max_uses matching ErrSessionExpired", err)
	}
	if strings.Contains(err.Error(), "login") || strings.Contains(err.Error(), "secret") {
		t.Errorf("error %q names the session or a password", err)
	}
	if e := rec.list(); len(e) != 1 || e[0].New != nil || e[0].Old != first.Exit || e[0].Uses != 2 {
		t.Errorf("expiries = %+v, want one of %s after 2 uses, no new exit", e, first.Exit.Label())
	}
	if got := sessionPick(t, p, "login"); got.SessionMoved {
		t.Errorf("the pick after the error says moved (%v), want a fresh start", got.SessionMove)
	}
}

// TestSessionMaxUsesExactUnderConcurrency: 8 goroutines pick one session 50 times each with
// maxUses 5. Every pin reports exactly 5 uses when it expires, and the uses add up to every pick:
// no pick went through a pin uncounted or past its limit.
func TestSessionMaxUsesExactUnderConcurrency(t *testing.T) {
	const goroutines, each, k = 8, 50, 5
	p, _, rec := limitPool(t, 2, pool.WithSessionLimits(0, k))
	var wg sync.WaitGroup
	var mu sync.Mutex
	moved := 0
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Session: "hot"})
				if err != nil {
					t.Error(err)
					return
				}
				if l.Info().SessionMove == pool.MovedMaxUses {
					mu.Lock()
					moved++
					mu.Unlock()
				}
				l.Report(pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK})
			}
		}()
	}
	wg.Wait()
	sessionPick(t, p, "hot") // expires the last full pin
	got := rec.list()
	if want := goroutines * each / k; len(got) != want {
		t.Fatalf("%d expiries, want %d (one per %d picks)", len(got), want, k)
	}
	total, repinned := 0, 0
	for i, e := range got {
		if e.Uses != k || e.Reason != pool.MovedMaxUses {
			t.Errorf("expiry %d: %d uses (%v), want exactly %d", i, e.Uses, e.Reason, k)
		}
		total += e.Uses
		if e.New != nil && i < len(got)-1 { // the last one was the pick after the goroutines
			repinned++
		}
	}
	if total != goroutines*each {
		t.Errorf("the pins served %d picks, want %d", total, goroutines*each)
	}
	// The pick that re-pinned on a new exit says so, and so does each concurrent pick that found
	// the same pin expired and joined the new one: at least one lease per such expiry.
	if moved < repinned || repinned == 0 {
		t.Errorf("%d leases said max_uses for %d pins re-pinned on a new exit, want at least as many", moved, repinned)
	}
}

// BenchmarkPickSession: a sticky pick through a live pin takes the session table's lock once
// (claim); with maxUses 100 one pick in 100 pins afresh (a second lock, and a copy of what the
// request avoids so that the new pin leaves from another exit).
func BenchmarkPickSession(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts []pool.Option
	}{
		{"limits=none", nil},
		{"limits=uses100", []pool.Option{pool.WithSessionLimits(0, 100)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			exits := make([]*pool.Exit, 10)
			for i := range exits {
				exits[i] = pool.MustParseExit(fmt.Sprintf("http://127.0.0.1:%d", 3000+i))
			}
			p, err := pool.New(append([]pool.Option{pool.WithExits(exits...), pool.WithSeed(1)}, bc.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			ctx, r := context.Background(), pool.Request{Origin: "shop.example", Session: "s-1"}
			ok := pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}
			b.ReportAllocs()
			for b.Loop() {
				l, err := p.Pick(ctx, r)
				if err != nil {
					b.Fatal(err)
				}
				l.Report(ok)
			}
		})
	}
}
