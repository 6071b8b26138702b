package pool_test

import (
	"context"
	"fmt"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// Request.Session keeps a login or a cart on one IP: every pick of the session for an origin goes
// through the exit its first pick chose, until that exit's breaker for the origin trips. Then the
// session moves to another exit, and sticks to that one.
func ExampleRequest_session() {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p, err := pool.New(
		pool.WithExits(
			pool.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("res-1"),
			pool.MustParseExit("http://user:secret@10.0.0.2:3128").WithLabel("res-2"),
			pool.MustParseExit("http://user:secret@10.0.0.3:3128").WithLabel("res-3"),
		),
		pool.WithClock(clk),
		pool.WithSeed(1),
		pool.WithPairSettings(breaker.Settings{FailureThreshold: 1, Jitter: -1}),
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	cart := pool.Request{Origin: "shop.example", Session: "cart-42"}
	ok := pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}

	// pick sends one attempt of the session and reports v; it returns the exit it went through.
	pick := func(v pool.Verdict) *pool.Exit {
		l, err := p.Pick(ctx, cart)
		if err != nil {
			fmt.Println(err)
			return nil
		}
		l.Report(v)
		return l.Exit()
	}
	first := pick(ok)
	same := true
	for range 5 {
		same = same && pick(ok) == first
	}
	fmt.Println("five more picks through the first exit:", same)

	// The site blocks the session's exit: its pair trips, and the session moves.
	pick(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked})
	moved := pick(ok)
	fmt.Println("moved to another exit:", moved != nil && moved != first)
	same = true
	for range 5 {
		same = same && pick(ok) == moved
	}
	fmt.Println("five more picks through the new exit:", same)

	// Another session, or a request with none, is free to use any exit.
	other, _ := p.Pick(ctx, pool.Request{Origin: "shop.example", Session: "cart-43"})
	fmt.Println("another session got an exit:", other.Exit() != nil)
	other.Release()
	// Output:
	// five more picks through the first exit: true
	// moved to another exit: true
	// five more picks through the new exit: true
	// another session got an exit: true
}

// WithSessionLimits renews a caller session's IP every few requests: here each pin serves two
// picks, then the session moves to another exit, and its lease says why.
func ExampleWithSessionLimits() {
	p, err := pool.New(
		pool.WithExits(
			pool.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("res-1"),
			pool.MustParseExit("http://user:secret@10.0.0.2:3128").WithLabel("res-2"),
		),
		pool.WithClock(clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))),
		pool.WithSeed(1),
		pool.WithSessionLimits(10*time.Minute, 2), // at most 10 minutes, at most 2 picks
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	req := pool.Request{Origin: "shop.example", Session: "crawl-7"}
	var exits []*pool.Exit
	for range 5 {
		l, err := p.Pick(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		exits = append(exits, l.Exit())
		if info := l.Info(); info.SessionMoved {
			fmt.Println("moved:", info.SessionMove)
		}
		l.Report(pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK})
	}
	fmt.Println("picks 1-2 on one exit:", exits[0] == exits[1])
	fmt.Println("picks 3-4 on the other:", exits[2] == exits[3] && exits[2] != exits[1])
	fmt.Println("pick 5 back on the first:", exits[4] == exits[0])
	// Output:
	// moved: max_uses
	// moved: max_uses
	// picks 1-2 on one exit: true
	// picks 3-4 on the other: true
	// pick 5 back on the first: true
}
