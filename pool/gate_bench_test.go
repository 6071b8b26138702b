package pool

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// BenchmarkPickGate measures what rate limits add to a pick: the same pool of 1,000 exits (all
// CLOSED, one origin) without a gate, with a bucket per exit, and with a bucket per exit and one
// for the origin. Buckets are generous (a billion tokens a second), so every pick peeks at and
// takes real tokens without ever waiting: the difference is the gate's own cost.
func BenchmarkPickGate(b *testing.B) {
	const exits = 1000
	generous := ratelimit.PerSecond(1e9, 1e9)
	for _, c := range []struct {
		name   string
		limits *ratelimit.Limits
	}{
		{"gate=none", nil},
		{"gate=exit", &ratelimit.Limits{PerExit: generous}},
		{"gate=exit+origin", &ratelimit.Limits{PerExit: generous, PerOrigin: generous}},
	} {
		opts := []Option{WithExits(benchGateExits(exits)...)}
		if c.limits != nil {
			opts = append(opts, WithRateLimits(*c.limits))
		}
		p, err := New(opts...)
		if err != nil {
			b.Fatal(err)
		}
		now, ctx := time.Now(), context.Background()
		b.Run(c.name+"/mode=serial", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				t, err := p.PickAt(ctx, now, Request{Origin: "shop.example"})
				if err != nil {
					b.Fatal(err)
				}
				t.ReleaseAt(now)
			}
		})
		b.Run(c.name+"/mode=parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					t, err := p.PickAt(ctx, now, Request{Origin: "shop.example"})
					if err != nil {
						panic(err) // cannot happen: buckets never run dry
					}
					t.ReleaseAt(now)
				}
			})
		})
	}
}

func benchGateExits(n int) []*Exit {
	out := make([]*Exit, n)
	for i := range out {
		out[i] = MustParseExit(fmt.Sprintf("10.2.%d.%d:3128", i/250, i%250+1))
	}
	return out
}
