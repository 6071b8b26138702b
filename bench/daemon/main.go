// Command daemon measures proxybreakerd's proxy (package proxyd) on loopback against a bare Go
// forward proxy and against the upstream alone: requests per second and p50/p99 latency at 1, 16
// and 128 connections, for plain HTTP (wrk, from Debian, sending absolute-URI requests through a
// Lua script) and for CONNECT (a Go load generator: one tunnel per request, which wrk cannot
// make); then the memory an idle tunnel costs, and how many concurrent tunnels one daemon holds.
//
//	cd bench && go run ./daemon                       # every figure, ~2 minutes
//	cd bench && go run ./daemon -d 3s -conns 16       # a quick look
//
// The daemon runs over a pool with one direct exit, so what it adds over the bare proxy is its
// own work: the pick, the judgement, the report, Proxy-Status. The origins, the proxies and the
// load generators run in separate processes (this command starts them), each under the box's
// descriptor limit. docs/daemon-bench.md holds the figures and how they were taken.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	role := flag.String("role", "", "internal: run as the origin or proxies child")
	d := flag.Duration("d", 5*time.Second, "length of each load run")
	connList := flag.String("conns", "1,16,128", "comma-separated connection counts")
	idle := flag.Int("idle", 2000, "idle tunnels opened to measure their memory; 0 skips")
	hold := flag.Int("hold", 10000, "concurrent tunnels to try to hold; 0 skips")
	wrk := flag.String("wrk", "/usr/bin/wrk", "wrk binary")
	cpuprofile := flag.String("cpuprofile", "", "write the proxies process's CPU profile to this file")
	rounds := flag.Int("rounds", 1, "load runs per target and connection count; the median is shown")
	loads := flag.Bool("loads", true, "run the load runs (false: only the tunnel measurements)")
	flag.Parse()
	log.SetFlags(0)
	switch *role {
	case "origin":
		if err := serveOrigin(); err != nil {
			log.Fatal(err)
		}
		return
	case "proxies":
		if err := serveProxies(*cpuprofile); err != nil {
			log.Fatal(err)
		}
		return
	case "":
	default:
		log.Fatalf("daemon: unknown -role %q", *role)
	}
	var conns []int
	for _, f := range strings.Split(*connList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			log.Fatalf("daemon: -conns %q: want positive integers", *connList)
		}
		conns = append(conns, n)
	}
	if !*loads {
		conns = nil
	}
	if *rounds < 1 {
		log.Fatalf("daemon: -rounds %d: want at least 1", *rounds)
	}
	if err := run(*d, *rounds, conns, *idle, *hold, *wrk, *cpuprofile); err != nil {
		log.Fatal(err)
	}
}

// child starts this command in role and decodes the addresses it prints into v. Closing the
// returned writer stops it.
func child(role string, v any, args ...string) (io.Closer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, append([]string{"-role", role}, args...)...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadBytes('\n')
	if err != nil {
		cmd.Process.Kill()
		return nil, fmt.Errorf("daemon: %s child: %v", role, err)
	}
	if err := json.Unmarshal(line, v); err != nil {
		cmd.Process.Kill()
		return nil, err
	}
	return closerFunc(func() error { in.Close(); return cmd.Wait() }), nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

func run(d time.Duration, rounds int, conns []int, idle, hold int, wrk, cpuprofile string) error {
	var oa originAddrs
	oc, err := child("origin", &oa)
	if err != nil {
		return err
	}
	defer oc.Close()
	var pa proxyAddrs
	pc, err := child("proxies", &pa, "-cpuprofile", cpuprofile)
	if err != nil {
		return err
	}
	defer pc.Close()
	dir, err := os.MkdirTemp("", "daemonbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	targets := []struct {
		name, addr string
	}{{"upstream", ""}, {"bare", pa.Bare}, {"daemon", pa.Daemon}}
	fmt.Printf("%s, %d CPUs; each run %v, median of %d rounds\n\n", time.Now().UTC().Format(time.RFC3339), numCPU(), d, rounds)
	for _, load := range []string{"http (wrk)", "connect (Go, a tunnel per request)"} {
		if len(conns) == 0 {
			break
		}
		fmt.Printf("### %s\n\n| conns | target | req/s | p50 | p99 | added p50 | added p99 | errors |\n|---:|---|---:|---:|---:|---:|---:|---:|\n", load)
		for _, c := range conns {
			// Rounds interleave the targets, so that a burst of load from elsewhere on the box
			// falls on all three; each figure is the median of its rounds.
			runs := make([][]result, len(targets))
			for range rounds {
				for i, tg := range targets {
					var r result
					if strings.HasPrefix(load, "http") {
						addr, via := tg.addr, true
						if addr == "" {
							addr, via = oa.HTTP, false
						}
						runWrk(wrk, addr, oa.HTTP, via, c, time.Second, dir) // warm-up
						if r, err = runWrk(wrk, addr, oa.HTTP, via, c, d, dir); err != nil {
							return err
						}
					} else {
						runConnect(tg.addr, oa.HTTP, c, time.Second/2) // warm-up
						r = runConnect(tg.addr, oa.HTTP, c, d)
					}
					runs[i] = append(runs[i], r)
				}
			}
			base, bare := median(runs[0]), median(runs[1])
			for i, tg := range targets {
				r := median(runs[i])
				added := func(v, b time.Duration) string {
					if i == 0 {
						return "—"
					}
					return ms(v - b)
				}
				ratio := ""
				if tg.name == "daemon" && bare.RPS > 0 {
					ratio = fmt.Sprintf(" (%.2f× bare)", r.RPS/bare.RPS)
				}
				fmt.Printf("| %d | %s | %.0f%s | %s | %s | %s | %s | %d |\n", c, tg.name, r.RPS, ratio, ms(r.P50), ms(r.P99),
					added(r.P50, base.P50), added(r.P99, base.P99), r.Errors)
			}
		}
		fmt.Println()
	}

	if idle > 0 {
		fmt.Printf("### idle tunnels (%d each)\n\n| proxy | RSS per tunnel | Go heap+stacks per tunnel | descriptors per tunnel |\n|---|---:|---:|---:|\n", idle)
		for _, tg := range targets[1:] {
			ic, err := measureIdle(pa.Ctl, tg.addr, oa.Hold, idle)
			if err != nil {
				return err
			}
			fmt.Printf("| %s | %.1f KiB | %.1f KiB | %.2f |\n", tg.name, ic.RSS/1024, ic.HeapStack/1024, ic.FDsPerTunnel)
			if tg.name == "daemon" {
				waitTunnels(pa.Ctl, 0)
			}
			time.Sleep(500 * time.Millisecond)
		}
		fmt.Println()
	}
	if hold > 0 {
		var before mem
		getJSON(pa.Ctl, "/mem", &before)
		t0 := time.Now()
		cs, failed := openIdle(pa.Daemon, oa.Hold, hold)
		took := time.Since(t0)
		open := waitTunnels(pa.Ctl, int64(len(cs)))
		time.Sleep(2 * time.Second) // held, not just opened
		still := tunnelsOpen(pa.Ctl)
		var after mem
		getJSON(pa.Ctl, "/mem", &after)
		fmt.Printf("### concurrent tunnels\n\nasked %d, opened %d in %v (%d failed in a row at the end); the daemon counted %d open, "+
			"and %d two seconds later; proxies process: %d descriptors open (limit %s), RSS %.0f MiB → %.0f MiB\n",
			hold, len(cs), took.Round(time.Millisecond), failed, open, still, after.FDs, fdLimit(), float64(before.RSS)/(1<<20), float64(after.RSS)/(1<<20))
		closeAll(cs)
		waitTunnels(pa.Ctl, 0)
	}
	return nil
}

// median returns the run with the median rate, with the median p50 and p99 of the runs (each
// taken on its own) and the errors summed.
func median(rs []result) result {
	by := func(key func(result) float64) result {
		s := slices.Clone(rs)
		slices.SortFunc(s, func(a, b result) int { return cmp.Compare(key(a), key(b)) })
		return s[len(s)/2]
	}
	m := by(func(r result) float64 { return r.RPS })
	m.P50 = by(func(r result) float64 { return float64(r.P50) }).P50
	m.P99 = by(func(r result) float64 { return float64(r.P99) }).P99
	m.Errors = 0
	for _, r := range rs {
		m.Errors += r.Errors
	}
	return m
}

// ms formats a duration in milliseconds with two decimals.
func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }
