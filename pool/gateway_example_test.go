package pool_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// A provider's gateway written once: the pool mints the session ids, keeps two sessions, and
// replaces one the site bans instead of waiting for it. Labels never show the minted ids.
func Example_gateway() {
	exits, err := pool.ReadExits(strings.NewReader(
		"http://acct-session-{session}-country-{country}:secret@gate.example:7777  label=res sessions=2 session-ttl=10m country=us\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := pool.New(pool.WithExits(exits...), pool.WithClock(clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("sessions:", p.Exits())

	l, _ := p.Pick(context.Background(), pool.Request{Origin: "shop.example", Exit: "res#1"})
	l.Report(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked}) // banned by the site
	fmt.Println("after the ban:", p.Exits())
	g := p.Snapshot().Gateways[0]
	fmt.Println(g.Gateway, g.Breaker.State, g.Sessions, g.Rotations)
	// Output:
	// sessions: [res#1 res#2]
	// after the ban: [res#3 res#2]
	// res closed [res#3 res#2] map[blocked:1]
}
