package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/proxyd"
)

// openIdle opens up to n tunnels through proxy to hold (a silent origin), 64 at a time, and
// returns them open; it stops early after 100 failures in a row (the proxy out of descriptors,
// say) and returns what it had.
func openIdle(proxy, hold string, n int) ([]net.Conn, int) {
	var (
		mu     sync.Mutex
		conns  []net.Conn
		failed atomic.Int64
		next   atomic.Int64
		wg     sync.WaitGroup
	)
	for range 64 {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && failed.Load() < 100 {
				c, err := net.DialTimeout("tcp", proxy, 5*time.Second)
				if err != nil {
					failed.Add(1)
					continue
				}
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if err := connect(c, bufio.NewReader(c), hold); err != nil {
					c.Close()
					failed.Add(1)
					continue
				}
				c.SetDeadline(time.Time{})
				failed.Store(0)
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return conns, int(failed.Load())
}

func closeAll(cs []net.Conn) {
	for _, c := range cs {
		c.Close()
	}
}

// getJSON fetches ctl's path into v.
func getJSON(ctl, path string, v any) error {
	resp, err := http.Get("http://" + ctl + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

// tunnelsOpen returns the daemon's live tunnels.
func tunnelsOpen(ctl string) int64 {
	var st proxyd.Stats
	if getJSON(ctl, "/stats", &st) != nil {
		return -1
	}
	return st.TunnelsOpen
}

// waitTunnels waits, at most 10 s, until the daemon holds want tunnels.
func waitTunnels(ctl string, want int64) int64 {
	var got int64
	for range 200 {
		if got = tunnelsOpen(ctl); got == want {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return got
}

// idleCost is the memory n idle tunnels add to the proxies' process, per tunnel.
type idleCost struct {
	N              int
	RSS, HeapStack float64 // bytes per tunnel
	FDsPerTunnel   float64
}

// measureIdle opens n idle tunnels through proxy and reports what each costs the proxies' process.
func measureIdle(ctl, proxy, hold string, n int) (idleCost, error) {
	before, err := settled(ctl)
	if err != nil {
		return idleCost{}, err
	}
	cs, _ := openIdle(proxy, hold, n)
	defer closeAll(cs)
	after, err := settled(ctl)
	if err != nil {
		return idleCost{}, err
	}
	k := float64(len(cs))
	return idleCost{
		N:            len(cs),
		RSS:          (float64(after.RSS) - float64(before.RSS)) / k,
		HeapStack:    (float64(after.Heap+after.Stack) - float64(before.Heap+before.Stack)) / k,
		FDsPerTunnel: float64(after.FDs-before.FDs) / k,
	}, nil
}

// settled reads the proxies' memory once their descriptor count has stopped moving (connections
// of an earlier run closing, tunnels being set up), at most 5 s.
func settled(ctl string) (mem, error) {
	var prev mem
	if err := getJSON(ctl, "/mem", &prev); err != nil {
		return prev, err
	}
	for range 20 {
		time.Sleep(250 * time.Millisecond)
		var m mem
		if err := getJSON(ctl, "/mem", &m); err != nil {
			return m, err
		}
		if m.FDs == prev.FDs {
			return m, nil
		}
		prev = m
	}
	return prev, nil
}
