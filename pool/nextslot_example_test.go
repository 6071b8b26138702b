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

// A crawler that schedules a site instead of idling on it: when a pick for the site is refused,
// the refusal says when the site has room next through any exit (RoomIn), and NextSlot answers
// the same between picks. Here both exits met a 429 (Retry-After 30 s and 10 s); the site has room
// again when the shorter rest ends (10 s, and the breaker's jitter: a draw of one half makes it
// 11.25 s).
func ExamplePool_NextSlot() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := pool.New(
		pool.WithExits(pool.MustParseExit("10.0.0.1:3128").WithLabel("dc-1"), pool.MustParseExit("10.0.0.2:3128").WithLabel("dc-2")),
		pool.WithClock(clk),
		pool.WithPairSettings(breaker.Settings{Rand: func() float64 { return 0.5 }}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for exit, ra := range map[string]time.Duration{"dc-1": 30 * time.Second, "dc-2": 10 * time.Second} {
		l, err := p.Pick(ctx, pool.Request{Origin: "shop.example", Exit: exit})
		if err != nil {
			fmt.Println(err)
			return
		}
		l.Report(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: ra})
	}
	_, err = p.Pick(ctx, pool.Request{Origin: "shop.example"})
	var nh *pool.NoHealthyExitError
	if errors.As(err, &nh) {
		fmt.Println("refused; room again in", nh.RoomIn)
	}
	fmt.Println("next slot in", p.NextSlot("shop.example").Sub(clk.Now()))
	clk.Advance(nh.RoomIn)
	if l, err := p.Pick(ctx, pool.Request{Origin: "shop.example"}); err == nil {
		fmt.Println("then through", l.Exit().Label())
		l.Release()
	}
	// Output:
	// refused; room again in 11.25s
	// next slot in 11.25s
	// then through dc-2
}
