package pool_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// BenchmarkPickWant measures a pick constrained by a Want against the same pick without one, in
// one run: pools of 10, 1,000 and 100,000 exits of which 1 % or 50 % carry tag=a (at least one),
// 100 origins, every pair CLOSED, PickAt then ReleaseAt at one instant. Issue 25's target: 0
// allocations, and a constrained pick flat in the number of exits while most are ready, like an
// unconstrained one.
func BenchmarkPickWant(b *testing.B) {
	want := pool.MustParseWant("tag=a")
	for _, n := range []int{10, 1000, 100000} {
		for _, share := range []int{1, 50} {
			exits := make([]*pool.Exit, n)
			every := 100 / share
			for i := range exits {
				e := pool.MustParseExit(fmt.Sprintf("10.%d.%d.%d:3128", i>>16&255, i>>8&255, i&255))
				if i%every == 0 {
					e = e.WithAttr("tag", "a")
				} else {
					e = e.WithAttr("tag", "b")
				}
				exits[i] = e
			}
			p, err := pool.New(pool.WithExits(exits...))
			if err != nil {
				b.Fatal(err)
			}
			origins := make([]string, 100)
			for i := range origins {
				origins[i] = fmt.Sprintf("o%03d.bench.example", i)
			}
			for _, c := range []struct {
				name string
				want *pool.Want
			}{{"none", nil}, {"tag=a", want}} {
				b.Run(fmt.Sprintf("exits=%d/match=%d%%/want=%s", n, share, c.name), func(b *testing.B) {
					ctx, now := context.Background(), time.Now()
					i := 0
					b.ReportAllocs()
					for b.Loop() {
						i++
						l, err := p.PickAt(ctx, now, pool.Request{Origin: origins[i%len(origins)], Want: c.want})
						if err != nil {
							b.Fatal(err)
						}
						l.ReleaseAt(now)
					}
				})
			}
		}
	}
}
