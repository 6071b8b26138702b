package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// throttleLog prints the pool's Throttled events.
type throttleLog struct{ pool.NopObserver }

func (throttleLog) Throttled(_ context.Context, t pool.Throttle) {
	if t.Refused {
		fmt.Printf("throttled: %s refused, no token in its %s bucket\n", t.Origin, t.Scope)
		return
	}
	fmt.Printf("throttled: %s waited %v for a token of its %s bucket, then went through %s\n", t.Origin, t.Waited, t.Scope, t.Exit)
}

// Limits in a pool: one request a second through the exit. A pick that finds the bucket empty
// waits on the pool's clock for the next token (here a fake clock, moved by hand), holding
// nothing while it waits; other exits with a token would have been picked instead.
func Example() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := pool.New(
		pool.WithExits(pool.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("dc-1")),
		pool.WithClock(clk),
		pool.WithRateLimits(ratelimit.Limits{PerExit: ratelimit.Every(time.Second)}),
		pool.WithObserver(throttleLog{}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	first, err := p.Pick(ctx, pool.Request{Origin: "shop.example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first pick at", first.Info().At.Format("15:04:05.000"))
	first.Release()

	done := make(chan pool.Lease)
	go func() {
		l, err := p.Pick(ctx, pool.Request{Origin: "shop.example"})
		if err != nil {
			fmt.Println(err)
		}
		done <- l
	}()
	for i := 0; clk.Timers() == 0; i++ { // until the second pick waits for its token
		if i == 10_000_000 {
			fmt.Println("the second pick never waited")
			return
		}
		runtime.Gosched()
	}
	clk.Advance(time.Second)
	second := <-done
	fmt.Println("second pick at", second.Info().At.Format("15:04:05.000"))
	second.Release()
	// Output:
	// first pick at 00:00:00.000
	// throttled: shop.example waited 1s for a token of its exit bucket, then went through dc-1
	// second pick at 00:00:01.000
}

// With FailFast a pick that finds no token is refused at once with a *ThrottledError saying how
// long until the next one: for callers that would rather do something else than wait.
func Example_failFast() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := pool.New(
		pool.WithExits(pool.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("dc-1")),
		pool.WithClock(clk),
		pool.WithRateLimits(ratelimit.Limits{
			PerExit:   ratelimit.PerSecond(2, 2),    // two a second, two at once
			PerOrigin: ratelimit.Every(time.Minute), // and shop.example once a minute, across exits
			Origins:   map[string]ratelimit.Limit{"api.example": ratelimit.PerSecond(10, 10)},
			FailFast:  true,
		}),
		pool.WithObserver(throttleLog{}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	pick := func(origin string) {
		l, err := p.Pick(ctx, pool.Request{Origin: origin})
		var te *pool.ThrottledError
		switch {
		case errors.As(err, &te):
			fmt.Println("refused:", err)
		case err != nil:
			fmt.Println(err)
		default:
			fmt.Println("picked", l.Exit(), "for", origin)
			l.Release()
		}
	}
	pick("shop.example")
	pick("shop.example") // the origin's bucket is empty for a minute
	pick("api.example")
	pick("api.example") // the exit's burst of two is spent
	clk.Advance(500 * time.Millisecond)
	pick("api.example")
	// Output:
	// picked dc-1 for shop.example
	// throttled: shop.example refused, no token in its origin bucket
	// refused: pool: throttled: no origin token for shop.example, next in 1m0s
	// picked dc-1 for api.example
	// throttled: api.example refused, no token in its exit bucket
	// refused: pool: throttled: no exit token for api.example, next in 500ms
	// picked dc-1 for api.example
}
