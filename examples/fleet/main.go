// Command fleet shows two pools sharing their breakers through Redis, as two members of a
// crawler fleet would: a trip on one opens the pair on the other within milliseconds, a parked
// exit is parked everywhere, the fleet sends one probe when a window ends, an exit's rate limit
// is the fleet's budget, and an outage of Redis stops none of it from serving requests.
//
//	member a: http.Client → transport.Transport ─┐                 ┌→ proxytest proxies → shop
//	member b: http.Client → transport.Transport ─┤ store/redis ↔ Redis (pub/sub, probe claims,
//	                                             │                    fleet token buckets)
//
// Everything runs on 127.0.0.1: in-process forward proxies, a small web shop, and a redis-server
// the example starts for itself (or the one -redis names). It takes about ten seconds:
//
//	go run ./examples/fleet
//	go run ./examples/fleet -redis 127.0.0.1:6379
package main

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/proxybreaker/proxybreaker/examples/internal/cli"
)

const about = `Starts a redis-server, in-process proxies and a small shop on 127.0.0.1 (nothing leaves the
machine) and runs two pools sharing their breakers through Redis, as two members of a crawler
fleet: a trip or a park on one reaches the other within milliseconds, the fleet sends one probe
when a window ends, an exit's rate limit is the fleet's budget, and a Redis outage stops none of
it from serving.`

func main() {
	var cfg config
	cli.Main(command(&cfg), func(ctx context.Context) error { return run(ctx, cfg, os.Stdout) })
}

// command is the example's command line, its flags bound to cfg.
func command(cfg *config) *cli.Command { return cli.New("fleet", about, cfg.flags) }

// config is what the flags set.
type config struct {
	Redis string // "": start a redis-server
}

// flags defines the flags that set cfg.
func (cfg *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&cfg.Redis, "redis", "", "use the Redis at HOST:PORT instead of starting a redis-server on 127.0.0.1 (the outage step is then skipped)")
}

// run runs the whole example, printing to out.
func run(ctx context.Context, cfg config, out io.Writer) error {
	p := &printer{w: out}
	var srv *redisServer
	addr := cfg.Redis
	if addr == "" {
		var err error
		if srv, err = startRedis(); err != nil {
			return err
		}
		defer srv.close()
		addr = srv.Addr()
		p.say("started redis-server on %s", addr)
	} else {
		p.say("using the Redis at %s", addr)
	}
	w, err := startShop()
	if err != nil {
		return err
	}
	defer w.Close()

	f, err := newFleet(addr, w, p)
	if err != nil {
		return err
	}
	defer f.close()
	steps := []func(context.Context) error{f.park, f.trip, f.probe, f.rate}
	if srv != nil {
		steps = append(steps, func(ctx context.Context) error { return f.outage(ctx, srv) })
	}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := step(ctx); err != nil {
			return err
		}
	}
	p.say("done")
	return nil
}
