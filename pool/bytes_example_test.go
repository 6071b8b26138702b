package pool_test

import (
	"context"
	"fmt"

	"github.com/proxybreaker/proxybreaker/pool"
)

// A client of its own (a headless browser, a WebSocket) reports the bytes an attempt moved with
// its verdict; the snapshot keeps the totals per exit and per origin.
func ExampleLease_ReportTrafficAt() {
	p, err := pool.New(pool.WithExits(pool.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("dc-1")))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	for _, origin := range []string{"shop.example", "shop.example", "news.example"} {
		lease, err := p.Pick(context.Background(), pool.Request{Origin: origin})
		if err != nil {
			fmt.Println(err)
			return
		}
		// … send through lease.Exit().ProxyURL(), counting what crossed the wire …
		lease.ReportTrafficAt(p.Clock().Now(), pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK},
			pool.Traffic{Sent: 400, Received: 12_000})
	}
	s := p.Snapshot()
	fmt.Printf("%s: %d sent, %d received\n", s.Exits[0].Exit, s.Exits[0].Bytes.Sent, s.Exits[0].Bytes.Received)
	for _, o := range s.Traffic {
		fmt.Printf("%s: %d sent, %d received\n", o.Origin, o.Bytes.Sent, o.Bytes.Received)
	}
	// Output:
	// dc-1: 1200 sent, 36000 received
	// news.example: 400 sent, 12000 received
	// shop.example: 800 sent, 24000 received
}
