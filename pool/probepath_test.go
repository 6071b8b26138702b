package pool_test

import (
	"context"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// forbiddenProbe is how the pool counts a banned pair's probe answered with the site's own 403
// for a path it refuses everyone: neutral.
var forbiddenProbe = pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassOrigin4xx, Suspect: true}

// banE4 is e4 banned on shop.example at 5 s (its 403 for "/", which e0…e2 were served), open for
// 10 s; at 15–16 s the others are served "/" again and e3 is refused "/private/" (a path the site
// forbids everyone).
var banE4 = []suspectStep{
	{at: 0, exit: "e0", path: "/", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
	{at: 1 * time.Second, exit: "e1", path: "/", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
	{at: 2 * time.Second, exit: "e2", path: "/", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
	{at: 5 * time.Second, exit: "e4", path: "/", v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
	{at: 15 * time.Second, exit: "e0", path: "/", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
	{at: 15 * time.Second, exit: "e1", path: "/", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
	{at: 16 * time.Second, exit: "e3", path: "/private/", v: plain403Verdict, want: plain403Verdict, pair: breaker.Closed},
}

// TestBanProbeForForbiddenPathIsNeutral: a banned pair's probe that asks for a path nobody was
// served within the guard's window while another exit was refused it gets the site's own 403,
// which says nothing of the ban: the probe is neutral, the pair stays HALF_OPEN with its probe
// slot free, and the next request probes it at once (before: the ban going on, the pair parked
// again on the ban's cadence, and a ban that ended in the meantime went unseen).
func TestBanProbeForForbiddenPathIsNeutral(t *testing.T) {
	p, clk := newSuspectPool(t, 6)
	runSuspect(t, p, clk, append(banE4,
		suspectStep{at: 17 * time.Second, exit: "e4", path: "/private/", v: plain403Verdict, want: forbiddenProbe, pair: breaker.HalfOpen},
		// Probed again at once, for an ordinary page: the ban is over.
		suspectStep{at: 17*time.Second + time.Millisecond, exit: "e4", path: "/", v: pageVerdict, want: pageVerdict, pair: breaker.Closed},
	))
}

// TestBanProbeForServedPathMeetsTheBan: a probe whose 403 is for a path the site served others
// moments before, or for one nobody else was refused, is the ban going on, as before.
func TestBanProbeForServedPathMeetsTheBan(t *testing.T) {
	for _, path := range []string{"/", "/new-page"} {
		t.Run(path, func(t *testing.T) {
			p, clk := newSuspectPool(t, 6)
			runSuspect(t, p, clk, append(banE4,
				suspectStep{at: 17 * time.Second, exit: "e4", path: path, v: plain403Verdict, want: judgedBlock, pair: breaker.Open},
			))
			clk.Set(syncT0.Add(17*time.Second + time.Millisecond))
			if l, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Exit: "e4"}); err == nil {
				l.Release()
				t.Errorf("Pick via e4 just after its probe met the ban: admitted, want refused")
			}
		})
	}
}
