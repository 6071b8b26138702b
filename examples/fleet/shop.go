package main

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/examples/internal/world"
)

// The example's exits: forward proxies on 127.0.0.1. bad-auth demands credentials its exit gets
// wrong; the shop bans res-2 with 429s until it is told to forgive it.
var exitNames = []string{"dc-1", "dc-2", "res-1", "res-2", "bad-auth"}

const (
	bannedExit = "res-2"
	badExit    = "bad-auth"
	retryAfter = 2 // seconds, in the shop's 429s
)

// exitSpecs are the exits of exitNames: open proxies, but for bad-auth's.
func exitSpecs() []world.ExitSpec {
	specs := make([]world.ExitSpec, len(exitNames))
	for i, name := range exitNames {
		specs[i] = world.ExitSpec{Name: name}
		if name == badExit {
			specs[i].User, specs[i].Pass, specs[i].WrongPass = "fleet", "right-password", "wrong-password"
		}
	}
	return specs
}

// secrets are the exits' passwords, none of which may be printed.
func secrets() []string { return world.Secrets(exitSpecs()) }

// shop is the example's world of proxies and a small shop, and what the shop saw.
type shop struct {
	*world.World
	site    *world.Site
	shopURL string

	banned  atomic.Bool
	slow    atomic.Bool // the shop takes its time over requests through res-2: a probe stays out a while
	mu      sync.Mutex
	byProxy map[string]int // requests the shop served (any status), by the proxy that carried them
	arrived []time.Time    // when each request through res-2 arrived, while slow
}

// startShop starts the shop and the proxies. On error it closes whatever it started.
func startShop() (w *shop, err error) {
	w = &shop{World: world.New(), byProxy: map[string]int{}}
	w.banned.Store(true)
	w.site = w.AddSite("shop", w)
	w.shopURL = w.site.URL + "/items"
	if _, err := w.StartExits(exitSpecs()...); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// ServeHTTP is the shop: 429 with Retry-After for res-2 while it is banned, 200 otherwise.
func (w *shop) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	via, _ := w.Registry.Lookup(r)
	slow := via == bannedExit && w.slow.Load()
	w.mu.Lock()
	w.byProxy[via]++
	if slow {
		w.arrived = append(w.arrived, time.Now())
	}
	w.mu.Unlock()
	if slow {
		time.Sleep(300 * time.Millisecond) // the shop is slow for res-2: its probe is out a while
	}
	if via == bannedExit && w.banned.Load() {
		rw.Header().Set("Retry-After", fmt.Sprint(retryAfter))
		http.Error(rw, "slow down", http.StatusTooManyRequests)
		return
	}
	fmt.Fprintln(rw, "items")
}

// served returns how many requests through proxy the shop has seen.
func (w *shop) served(proxy string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byProxy[proxy]
}

// arrivedBefore returns how many requests through res-2 arrived, while the shop was slow, before t.
func (w *shop) arrivedBefore(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, a := range w.arrived {
		if a.Before(t) {
			n++
		}
	}
	return n
}

// shopHost is the shop's origin key, as the transport names it.
func (w *shop) shopHost() string { return w.site.Key }
