package probe_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
)

// BenchmarkProbeDeadline100k runs the probe over 100,000 exits with a 3 s deadline and reports
// what the deadline costs: overshoot_ms, the time from the deadline to Run returning (the target
// is at most 100 ms); write_ms and report_bytes, streaming the JSON report (Report.WriteJSON) to
// a counting writer; peak_rss_MB, the process's peak resident set (VmHWM, reset before each run
// through /proc/self/clear_refs where the kernel allows it); peak_heap_MB, the largest
// heap objects' bytes sampled every 10 ms.
//
// The exits are distinct (a label and credentials each) but share five loopback proxies: a
// quarter go through two healthy proxies to a plain-HTTP origin, the rest through three that
// accept TCP and never answer. Hanging probes end at a 1 s header timeout, so the 256 workers get
// through about a thousand probes before the deadline, and the deadline cuts the other 99,000:
// the worst case of issue 14, where every exit of a large list hangs.
//
//	go test -run '^$' -bench BenchmarkProbeDeadline100k -benchtime 1x ./probe
func BenchmarkProbeDeadline100k(b *testing.B) {
	const (
		nExits   = 100_000
		deadline = 3 * time.Second
	)
	origin := startOrigin(b, false, nil, nil)
	var good, hang []*proxytest.Proxy
	for range 2 {
		good = append(good, startProxy(b, proxytest.Config{}))
	}
	for range 3 {
		hang = append(hang, startProxy(b, proxytest.Config{Hang: true}))
	}
	exits := make([]*pool.Exit, nExits)
	for i := range exits {
		var u *url.URL
		if i%4 == 0 {
			u = good[i%len(good)].URL()
		} else {
			u = hang[i%len(hang)].URL()
		}
		u.User = url.UserPassword(fmt.Sprintf("user%06d", i), fmt.Sprintf("pass%06d", i))
		exits[i] = exitVia(b, u, fmt.Sprintf("exit-%06d", i))
	}
	p, err := probe.New(probe.Config{
		Exits:         exits,
		Targets:       []string{origin.URL + "/robots.txt"},
		Deadline:      deadline,
		HeaderTimeout: time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var overshoot, write time.Duration
	var bytes, peakRSS, peakHeap int64
	var cut int
	for range b.N {
		runtime.GC()
		resetPeakRSS()
		stop := sampleHeap()
		start := time.Now()
		rep := p.Run(context.Background())
		overshoot += time.Since(start.Add(deadline))
		cw := &countingWriter{}
		w0 := time.Now()
		if err := rep.WriteJSON(cw); err != nil {
			b.Fatal(err)
		}
		write += time.Since(w0)
		bytes += cw.n
		peakHeap = max(peakHeap, stop())
		peakRSS = max(peakRSS, vmHWM(b))
		cut = rep.Overall.Cut
		if rep.Overall.Probes != nExits || !rep.CutByDeadline {
			b.Fatalf("report: %d probes, cut_by_deadline %v; want %d, true", rep.Overall.Probes, rep.CutByDeadline, nExits)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(overshoot.Microseconds())/1000/n, "overshoot_ms")
	b.ReportMetric(float64(write.Microseconds())/1000/n, "write_ms")
	b.ReportMetric(float64(bytes)/n, "report_bytes")
	b.ReportMetric(float64(peakRSS)/(1<<20), "peak_rss_MB")
	b.ReportMetric(float64(peakHeap)/(1<<20), "peak_heap_MB")
	b.ReportMetric(float64(cut), "cut")
}

// countingWriter counts what is written to it and discards it.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

var _ io.Writer = (*countingWriter)(nil)

// resetPeakRSS resets the kernel's peak resident set of this process (VmHWM), where allowed.
func resetPeakRSS() {
	_ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// vmHWM is the process's peak resident set in bytes, from /proc/self/status.
func vmHWM(b *testing.B) int64 {
	b.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		b.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:")); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte("kB")))), 10, 64)
			if err != nil {
				b.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}

// sampleHeap samples the bytes of live and unswept heap objects every 10 ms until the returned func is called, which
// returns the largest sample.
func sampleHeap() func() int64 {
	done, peak := make(chan struct{}), make(chan int64)
	go func() {
		// runtime/metrics, unlike runtime.ReadMemStats, does not stop the world.
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var hi int64
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			hi = max(hi, int64(s[0].Value.Uint64()))
			select {
			case <-done:
				peak <- hi
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		return <-peak
	}
}
