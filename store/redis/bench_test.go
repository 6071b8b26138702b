package redisstore_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// roundTrips counts the client's round trips to Redis: each command sent alone, each pipeline.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *roundTrips) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *roundTrips) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// BenchmarkFleetRateLimit: two members send requests through the same exit, whose budget is a
// fleet budget in Redis. It reports the round trips to Redis per 1,000 requests: counted by a
// hook on both members' clients (every command and pipeline they send, the health checks
// included), and by Redis itself (INFO commandstats: the lease script's calls). "ample": the
// budget is far above the traffic, as an exit's budget usually is; "at-limit": the traffic asks
// for more than the budget (20,000/s, burst 2,000), so the benchmark runs at the budget's pace.
//
//	go test -run '^$' -bench '^BenchmarkFleetRateLimit$' -benchmem -count 6 ./store/redis
func BenchmarkFleetRateLimit(b *testing.B) {
	for _, tc := range []struct {
		name  string
		limit ratelimit.Limit
	}{
		{"ample", ratelimit.PerSecond(1e6, 10000)},
		{"at-limit", ratelimit.PerSecond(20000, 2000)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := servertest.StartRedis(b)
			cfg := memberConfig{exits: 1, real: true, limits: fleetLimits(tc.limit)}
			members := []*member{newMember(b, srv.Addr(), "a", cfg), newMember(b, srv.Addr(), "b", cfg)}
			var hook roundTrips
			for _, m := range members {
				m.waitHealthy(b)
				m.client.AddHook(&hook)
			}
			before := leaseCalls(b, srv.Addr())
			var turn atomic.Int64
			req, _ := http.NewRequest(http.MethodGet, urlA, nil)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				m := members[turn.Add(1)%2]
				for pb.Next() {
					resp, err := m.tr.RoundTrip(req)
					if err != nil {
						continue // at the limit a request may be refused after waiting: it made no round trip either
					}
					discard(resp.Body)
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(hook.n.Load())*1000/float64(b.N), "roundtrips/1000req")
			b.ReportMetric(float64(leaseCalls(b, srv.Addr())-before)*1000/float64(b.N), "leases/1000req")
		})
	}
}

// leaseCalls returns how many scripts Redis has run (INFO commandstats: evalsha and eval), read
// over a connection of its own.
func leaseCalls(b *testing.B, addr string) int64 {
	b.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, f := range strings.Split(strings.TrimSpace(line[strings.Index(line, ":")+1:]), ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				x, _ := strconv.ParseInt(v, 10, 64)
				n += x
			}
		}
	}
	return n
}
