package otelbreaker

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

func TestSplitOrigin(t *testing.T) {
	for _, tc := range []struct {
		origin string
		def    int
		host   string
		port   int
	}{
		{"shop.example", 443, "shop.example", 443},
		{"shop.example", 0, "shop.example", 0},
		{"shop.example:8443", 443, "shop.example", 8443},
		{"127.0.0.1:8080", 443, "127.0.0.1", 8080},
		{"[::1]:8080", 443, "::1", 8080},
		{"[::1]", 443, "::1", 443},
		{"shop.example:99999", 443, "shop.example", 443}, // not a port: the default
		{"shop.example:", 80, "shop.example", 80},
		{"", 443, "", 443},
	} {
		host, port := splitOrigin(tc.origin, tc.def)
		if host != tc.host || port != tc.port {
			t.Errorf("splitOrigin(%q, %d) = %q, %d, want %q, %d", tc.origin, tc.def, host, port, tc.host, tc.port)
		}
	}
}

func TestSplitOriginDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { splitOrigin("shop.example:8443", 443) }); n != 0 {
		t.Errorf("splitOrigin allocates %v times, want 0", n)
	}
}

// TestLabelerCap: exactly max distinct pairs keep their labels, under concurrent first use.
func TestLabelerCap(t *testing.T) {
	l := newLabeler(nil, 10)
	var wg sync.WaitGroup
	var mu sync.Mutex
	kept := map[string]bool{}
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				e, o := l.labels(fmt.Sprintf("e%d", (g+i)%7), fmt.Sprintf("o%d", i%5))
				if e != OverflowLabel {
					mu.Lock()
					kept[e+"/"+o] = true
					mu.Unlock()
				} else if o != OverflowLabel {
					t.Errorf("labels overflowed the exit but not the origin: %q", o)
				}
			}
		}()
	}
	wg.Wait()
	if len(kept) != 10 {
		t.Errorf("%d pairs kept their labels, want 10: %v", len(kept), kept)
	}
	// A pair admitted once keeps its labels.
	for k := range kept {
		e, o, _ := strings.Cut(k, "/")
		if ge, gotO := l.labels(e, o); ge != e || gotO != o {
			t.Errorf("labels(%q, %q) after admission = %q, %q", e, o, ge, gotO)
		}
	}
	unlimited := newLabeler(func(string) string { return "b" }, -1)
	if e, o := unlimited.labels("x", "shop"); e != "x" || o != "b" {
		t.Errorf("labels with no cap = %q, %q, want x, b", e, o)
	}
	if e, o := unlimited.labels("x", ""); e != "x" || o != "" {
		t.Errorf("labels of an exit-wide key = %q, %q, want x and no origin", e, o)
	}
}

var (
	exitA = pool.MustParseExit("http://10.0.0.1:3128").WithLabel("a")
	exitB = pool.MustParseExit("http://10.0.0.2:3128").WithLabel("b")
	t0    = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
)

func change(scope pool.Scope, e *pool.Exit, origin string, cause breaker.Cause, at time.Time) pool.StateChange {
	return pool.StateChange{Scope: scope, Exit: e, Origin: origin, Transition: breaker.Transition{Cause: cause, At: at}}
}

// TestPendingClaim: an attempt claims its own breakers' transitions at its instant, and nothing
// else; claimed and expired entries are gone.
func TestPendingClaim(t *testing.T) {
	var p pendingTransitions
	a := &pool.LeaseInfo{Exit: exitA, Origin: "shop", At: t0}
	p.add(change(pool.ScopePair, exitA, "shop", breaker.CauseCooldown, t0))              // a's probe slot
	p.add(change(pool.ScopePair, exitB, "shop", breaker.CauseCooldown, t0))              // another exit's
	p.add(change(pool.ScopePair, exitA, "news", breaker.CauseCooldown, t0))              // another origin's
	p.add(change(pool.ScopeExit, exitA, "", breaker.CauseFailures, t0.Add(time.Second))) // a's exit, at the end
	p.add(change(pool.ScopeOrigin, nil, "shop", breaker.CauseFailures, t0.Add(time.Second)))
	p.add(change(pool.ScopePair, exitA, "shop", breaker.CauseLeaseExpired, t0.Add(-time.Minute))) // stale

	var got []string
	collect := func(c pool.StateChange) { got = append(got, fmt.Sprintf("%s/%s", c.Scope, c.Cause)) }
	p.claim(a, t0, 0, true, collect)
	if fmt.Sprint(got) != "[pair/cooldown]" {
		t.Errorf("claim at the start = %v, want [pair/cooldown]", got)
	}
	got = nil
	p.claim(a, t0.Add(time.Second+time.Microsecond), finishSlack, false, collect)
	if fmt.Sprint(got) != "[exit/failures origin/failures]" {
		t.Errorf("claim at the end = %v, want [exit/failures origin/failures]", got)
	}
	if n := p.n.Load(); n != 2 {
		t.Errorf("%d entries left, want 2 (the other exit's and the other origin's; the stale one dropped)", n)
	}
	got = nil
	p.claim(a, t0.Add(time.Second), finishSlack, false, collect)
	if len(got) != 0 {
		t.Errorf("a second claim = %v, want nothing", got)
	}
}

// TestPendingBounded: the ring keeps the newest pendingSize transitions.
func TestPendingBounded(t *testing.T) {
	var p pendingTransitions
	for i := range 3 * pendingSize {
		p.add(change(pool.ScopeExit, exitA, "", breaker.CauseFailures, t0.Add(time.Duration(i)*time.Nanosecond)))
	}
	if n := p.n.Load(); n != pendingSize {
		t.Errorf("%d entries, want %d", n, pendingSize)
	}
}
