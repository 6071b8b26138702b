package redisstore_test

import (
	"context"
	"log"
	"net/http"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"github.com/proxybreaker/proxybreaker/store"
	redisstore "github.com/proxybreaker/proxybreaker/store/redis"
	"github.com/proxybreaker/proxybreaker/transport"
)

// One member of a crawler fleet: its pool shares breakers with every process that uses the same
// Redis and namespace — a trip or a parked exit anywhere is seen everywhere within milliseconds,
// and the fleet sends one probe per key — and each exit's rate limit is the fleet's budget, not
// each process's. It needs a Redis server, so it has no output to check; the package's tests run
// the same wiring against a real one.
func Example() {
	rdb := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	st, err := redisstore.New(rdb, redisstore.Settings{Namespace: "shop-crawler"})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close() // after the transports built on the pool are done

	p, err := store.NewPool(st, // restores the fleet's state, claims probes with the fleet
		pool.WithExits(
			pool.MustParseExit("http://user:secret@10.0.0.1:3128").WithLabel("dc-1"),
			pool.MustParseExit("http://user:secret@10.0.0.2:3128").WithLabel("dc-2"),
		),
		pool.WithRateLimits(ratelimit.Limits{
			PerExit:    ratelimit.PerSecond(10, 10), // the provider's terms, per exit, fleet-wide
			ExitSource: st.ExitSource,
		}),
	)
	if err != nil {
		log.Fatal(err)
	}
	tr, err := transport.New(p)
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://shop.example/", nil)
	if err != nil {
		log.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		log.Print(err)
		return
	}
	resp.Body.Close()
	log.Print(resp.Status, " via the fleet's view of each exit; health: ", st.Health())
}
