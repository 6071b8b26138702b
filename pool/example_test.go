package pool_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// The engine without net/http: pick an exit, send through it however you like (here, nothing is
// sent), report what happened. A 429 with Retry-After rests that (exit, origin) pair; the next
// pick for the origin goes to the other exit, and when none is left the refusal says when to
// come back. Everything runs on a fake clock with one seed, so the output is always the same.
func Example() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := pool.New(
		pool.WithExits(
			pool.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("dc-1"),
			pool.MustParseExit("http://user:secret@10.0.0.2:3128").WithLabel("dc-2"),
		),
		pool.WithClock(clk),
		pool.WithSeed(1),
		pool.WithPairSettings(breaker.Settings{Jitter: -1}), // exact windows, for the output
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	rateLimited := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: time.Minute}

	first, err := p.Pick(ctx, pool.Request{Origin: "shop.example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	after := first.Report(rateLimited)
	fmt.Println(first.Exit(), "got a 429: pair", after.PairState)

	second, _ := p.Pick(ctx, pool.Request{Origin: "shop.example"})
	fmt.Println("next pick avoids it:", second.Exit() != first.Exit())
	second.Report(rateLimited)

	clk.Advance(20 * time.Second)
	_, err = p.Pick(ctx, pool.Request{Origin: "shop.example"})
	var nh *pool.NoHealthyExitError
	fmt.Println(errors.As(err, &nh), "retry in", nh.RetryIn)

	other, _ := p.Pick(ctx, pool.Request{Origin: "news.example"})
	fmt.Println("another origin is served:", other.Exit() != nil)
	other.Report(pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK})
	// Output:
	// dc-1 got a 429: pair open
	// next pick avoids it: true
	// true retry in 40s
	// another origin is served: true
}

// A lease whose attempt never went out is released: its permits come back, nothing is counted.
func ExampleLease_Release() {
	p, err := pool.New(pool.WithExits(pool.MustParseExit("10.0.0.3:8080").WithLabel("res-3")))
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, err := p.Pick(context.Background(), pool.Request{Origin: "shop.example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(lease.Info().Exit, p.Snapshot().Exits[0].InFlight)
	lease.Release()
	fmt.Println(p.Snapshot().Exits[0].InFlight)
	// Output:
	// res-3 1
	// 0
}
