package pool_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/pool"
)

// benchList returns n exits labelled e0…; every 100th has weight w, so that lists built with
// different w differ in 1% of their exits.
func benchList(n int, w float64) []*pool.Exit {
	out := make([]*pool.Exit, n)
	for i := range out {
		e := pool.MustParseExit(fmt.Sprintf("http://u:pw@10.%d.%d.%d:3128", i>>16, (i>>8)&255, i&255)).WithLabel(fmt.Sprintf("e%d", i))
		if i%100 == 0 {
			e = e.WithWeight(w)
		}
		out[i] = e
	}
	return out
}

// BenchmarkSync: the cost of one Sync of a 10,000-exit pool with a list that reweights 1% of its
// exits ("updated") and one that changes nothing ("same").
func BenchmarkSync(b *testing.B) {
	const n = 10_000
	lists := [2][]*pool.Exit{benchList(n, 1), benchList(n, 2)}
	b.Run("updated", func(b *testing.B) {
		p, err := pool.New(pool.WithExits(benchList(n, 1)...))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := p.Sync(lists[(i+1)%2]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("same", func(b *testing.B) {
		p, err := pool.New(pool.WithExits(benchList(n, 1)...))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Sync(lists[0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReload: a forced Reload of a 10,000-line list file that does not change: read, parse,
// Sync.
func BenchmarkReload(b *testing.B) {
	const n = 10_000
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "http://u:pw@10.%d.%d.%d:3128 label=e%d\n", i>>16, (i>>8)&255, i&255, i)
	}
	path := filepath.Join(b.TempDir(), "proxies.txt")
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	p, err := pool.New()
	if err != nil {
		b.Fatal(err)
	}
	r, err := pool.NewReloader(p, path, pool.ReloadSettings{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.Reload(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Reload(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "exits")
}
