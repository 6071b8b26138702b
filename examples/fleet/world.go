package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// The example's exits: forward proxies on 127.0.0.1. bad-auth demands credentials its exit gets
// wrong; the shop bans res-2 with 429s until it is told to forgive it.
var exitNames = []string{"dc-1", "dc-2", "res-1", "res-2", "bad-auth"}

const (
	bannedExit = "res-2"
	badExit    = "bad-auth"
	retryAfter = 2 // seconds, in the shop's 429s
)

// world is the proxies and the shop.
type world struct {
	reg     *proxytest.Registry
	proxies []*proxytest.Proxy
	exits   []*pool.Exit
	shop    *httptest.Server
	shopURL string

	banned  atomic.Bool
	slow    atomic.Bool // the shop takes its time over requests through res-2: a probe stays out a while
	mu      sync.Mutex
	byProxy map[string]int // requests the shop served (any status), by the proxy that carried them
	arrived []time.Time    // when each request through res-2 arrived, while slow
}

func startWorld() (w *world, err error) {
	w = &world{reg: &proxytest.Registry{}, byProxy: map[string]int{}}
	defer func() {
		if err != nil {
			w.close()
		}
	}()
	for _, name := range exitNames {
		cfg := proxytest.Config{Name: name, Registry: w.reg}
		if name == badExit {
			cfg.User, cfg.Pass = "fleet", "right-password"
		}
		p, err := proxytest.Start(cfg)
		if err != nil {
			return nil, err
		}
		w.proxies = append(w.proxies, p)
		u := p.URL()
		if name == badExit {
			u = p.URLWithCredentials("fleet", "wrong-password")
		}
		e, err := pool.NewExit(u)
		if err != nil {
			return nil, err
		}
		w.exits = append(w.exits, e.WithLabel(name))
	}
	w.banned.Store(true)
	w.shop = httptest.NewServer(w)
	w.shopURL = w.shop.URL + "/items"
	return w, nil
}

// ServeHTTP is the shop: 429 with Retry-After for res-2 while it is banned, 200 otherwise.
func (w *world) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	via, _ := w.reg.Lookup(r)
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
func (w *world) served(proxy string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.byProxy[proxy]
}

// arrivedBefore returns how many requests through res-2 arrived, while the shop was slow, before t.
func (w *world) arrivedBefore(t time.Time) int {
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

func (w *world) close() error {
	if w.shop != nil {
		w.shop.Close()
	}
	var errs []error
	for _, p := range w.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}

// shopHost is the shop's origin key, as the transport names it.
func (w *world) shopHost() string {
	u, _ := url.Parse(w.shopURL)
	return transport.OriginHost(u)
}
