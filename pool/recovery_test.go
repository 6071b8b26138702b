package pool_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"golang.org/x/time/rate"
)

var blockedVerdict = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked}

// TestBanProbesLearnTheOriginsBans: a pair banned by an origin is probed on the ladder but never
// less often than every DefaultRecoveryWindow while the origin's bans are unmeasured; once one ban
// has been seen to last L, the probes of the next one are at most L/10 apart.
func TestBanProbesLearnTheOriginsBans(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p, err := pool.New(
		pool.WithExits(pool.MustParseExit("10.0.0.1:3128").WithLabel("x")),
		pool.WithClock(clk), pool.WithSeed(3),
		pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, Jitter: -1}),
		pool.WithOriginGuard(pool.OriginGuardSettings{Disabled: true}),
	)
	if err != nil {
		t.Fatal(err)
	}
	// ban keeps the pair banned until end, probing whenever the pool lets it, and returns the
	// longest wait between probes.
	ban := func(end time.Time) time.Duration {
		var longest time.Duration
		l := mustPick(t, p, "shop")
		l.Report(blockedVerdict)
		for {
			ps, _ := pairOf(t, p, "shop")
			wait := ps.Breaker.NextProbe.Sub(clk.Now())
			longest = max(longest, wait)
			clk.Advance(wait)
			l := mustPick(t, p, "shop") // the probe
			if !clk.Now().Before(end) {
				l.Report(okVerdict)
				return longest
			}
			l.Report(blockedVerdict)
		}
	}
	start := clk.Now()
	if got := ban(start.Add(40 * time.Minute)); got != pool.DefaultRecoveryWindow {
		t.Errorf("first ban: longest wait between probes %v, want DefaultRecoveryWindow %v", got, pool.DefaultRecoveryWindow)
	}
	first := clk.Now().Sub(start)
	clk.Advance(time.Hour)
	if got, want := ban(clk.Now().Add(20*time.Minute)), first/10; got != want {
		t.Errorf("second ban, after one of %v: longest wait %v, want %v", first, got, want)
	}
}

// TestRequestFailFast: a pick that finds only exits waiting for a token fails at once with a
// *ThrottledError when the request says FailFast (the pool's limits do not).
func TestRequestFailFast(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	p, err := pool.New(
		pool.WithExits(pool.MustParseExit("10.0.0.1:3128").WithLabel("x")),
		pool.WithClock(clk), pool.WithSeed(3),
		pool.WithRateLimits(ratelimit.Limits{PerPair: ratelimit.Limit{Rate: rate.Every(time.Minute), Burst: 1}}),
	)
	if err != nil {
		t.Fatal(err)
	}
	l := mustPick(t, p, "shop")
	l.Report(okVerdict)
	_, err = p.Pick(context.Background(), pool.Request{Origin: "shop", FailFast: true})
	var te *pool.ThrottledError
	if !errors.As(err, &te) || te.RetryIn <= 0 || te.RetryIn > time.Minute {
		t.Fatalf("Pick(FailFast) without a token = %v, want a *ThrottledError within a minute", err)
	}
	if clk.Timers() != 0 {
		t.Errorf("Pick(FailFast) left %d timers on the clock, want none: it must not wait", clk.Timers())
	}
}
