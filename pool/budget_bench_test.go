package pool_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// BenchmarkPickBudget: a pick and its report (0 bytes) among 1,000 exits in two tiers, without
// prices or budgets ("none"), with a price and a budget on tier 0 that is never spent ("budget"),
// and with tier 0's budget spent, so every pick passes over it to tier 1 ("spent").
func BenchmarkPickBudget(b *testing.B) {
	for _, mode := range []string{"none", "budget", "spent"} {
		b.Run("mode="+mode, func(b *testing.B) {
			clk := clock.NewFake(leaseT0)
			var exits []*pool.Exit
			for i := range 1000 {
				exits = append(exits, pool.MustParseExit(fmt.Sprintf("10.0.%d.%d:3128", i/250, i%250)).WithTier(i%2))
			}
			opts := []pool.Option{pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(1)}
			switch mode {
			case "budget":
				opts = append(opts, pool.WithTierCost(0, pool.Cost{PerRequest: 1e-9}), pool.WithTierBudget(0, pool.Budget{Spend: 1e9, Period: time.Hour}))
			case "spent":
				opts = append(opts, pool.WithTierCost(0, pool.Cost{PerRequest: 1}), pool.WithTierBudget(0, pool.Budget{Spend: 1, Period: time.Hour}))
			}
			p, err := pool.New(opts...)
			if err != nil {
				b.Fatal(err)
			}
			req := pool.Request{Origin: "a.example"}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				l, err := p.PickAt(ctx, clk.Now(), req)
				if err != nil {
					b.Fatal(err)
				}
				l.ReportTrafficAt(clk.Now(), okVerdict, pool.Traffic{})
			}
		})
	}
}
