package transport_test

import (
	"testing"
	"time"
)

// BenchmarkSlowExit measures what one slow exit costs a pool's throughput: eight workers
// through four exits, one of which answers in 1.5 s (always 200), against the same pool's three
// fast exits alone, in one run. ns/op is wall time per request served (8 in parallel), so the
// ratio of the two sub-benchmarks is the throughput lost to the slow exit (issue 28's target:
// within 2×; latency-blind least-loaded picks lost 3.7–6.7×). Run it with a fixed count, e.g.
// -benchtime 2000x: each op is a real request through a real proxy.
func BenchmarkSlowExit(b *testing.B) {
	slowA := func(_ int, exit string) time.Duration {
		if exit == "a" {
			return 1500 * time.Millisecond
		}
		return 0
	}
	for _, c := range []struct {
		name  string
		exits []string
	}{{"without-slow", []string{"b", "c", "d"}}, {"with-slow", []string{"a", "b", "c", "d"}}} {
		b.Run(c.name, func(b *testing.B) {
			w := newSlowWorld(b, 1, slowA, c.exits...)
			w.run(0, 8, 50, 10*time.Second) // warm: connections up, first answers in
			b.ReportAllocs()
			b.ResetTimer()
			served := w.run(0, 8, b.N, time.Duration(b.N)*time.Second)
			b.StopTimer()
			b.ReportMetric(float64(w.counts(0)["a"])/float64(max(served+50, 1))*100, "%slow")
		})
	}
}
