package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// groupHolds records the pool's GroupChanged events.
type groupHolds struct {
	pool.NopObserver
	mu  sync.Mutex
	got []pool.GroupHold
}

func (g *groupHolds) GroupChanged(h pool.GroupHold) {
	g.mu.Lock()
	g.got = append(g.got, h)
	g.mu.Unlock()
}

func (g *groupHolds) events() []pool.GroupHold {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.got)
}

// TestIntegGroupHold is issue 27's group case through real forward proxies on 127.0.0.1: six
// exits, four of them in group=subnet-a; the origin bans the whole group (Cloudflare's 1020 page
// to every request through g0…g3) and serves o0 and o1. Once g0 and g1 are banned, g2 and g3 are
// held: while eight workers send concurrently, each sees at most one request, and the hold stays
// while every attempt of the group is banned. When the ban lifts and the pairs come back,
// one served member releases the hold.
func TestIntegGroupHold(t *testing.T) {
	reg := &proxytest.Registry{}
	ban := challengeFixture(t, "cloudflare/access-denied-1020-403")
	var lifted atomic.Bool
	var mu sync.Mutex
	seen := map[string]int{}
	srv := integOrigin(t, false, func(w http.ResponseWriter, r *http.Request, _ string) bool {
		name, _ := reg.Lookup(r)
		mu.Lock()
		seen[name]++
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // an origin's think time: the workers' attempts overlap
		if strings.HasPrefix(name, "g") && !lifted.Load() {
			ban.serve(w)
			return true
		}
		return false
	})
	exits := registeredExits(t, reg, "g0", "g1", "g2", "g3", "o0", "o1")
	for i := range 4 {
		exits[i] = exits[i].WithAttr(pool.GroupAttr, "subnet-a")
	}
	var ev groupHolds
	clk := newIntegClock()
	tr, c := integNew(t, []*httptest.Server{srv}, pool.WithExits(exits...), pool.WithClock(clk),
		pool.WithPairSettings(breaker.Settings{Rand: integHalf}), pool.WithObserver(&ev),
		pool.WithGroups(pool.GroupSettings{MinBans: 2}))

	get := func(exit string) (int, error) {
		ctx := context.Background()
		if exit != "" {
			ctx = transport.ContextWithExit(ctx, exit)
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Two members are banned, one after the other: the hold starts with nothing in flight.
	for _, x := range []string{"g0", "g1"} {
		if code, err := get(x); err != nil || code != http.StatusForbidden {
			t.Fatalf("Get via %s = %d, %v; want the ban page (403)", x, code, err)
		}
	}
	evs := ev.events()
	if len(evs) != 1 || evs[0].Group != "subnet-a" || !slices.Equal(evs[0].Banned, []string{"g0", "g1"}) ||
		!slices.Equal(evs[0].Held, []string{"g2", "g3"}) {
		t.Fatalf("group events %+v, want one hold of subnet-a: g0, g1 banned; g2, g3 held", evs)
	}

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 12 {
				if _, err := get(""); err != nil {
					var nh *pool.NoHealthyExitError
					if !errors.As(err, &nh) {
						t.Errorf("Get: %v", err)
					}
				}
			}
		}()
	}
	wg.Wait()

	// The held members were tried one at a time; each met the ban and its pair opened: each saw
	// at most one request, while o0 and o1 served the rest.
	if evs := ev.events(); len(evs) != 1 {
		t.Fatalf("group events %+v, want the one hold", evs)
	}
	mu.Lock()
	for _, m := range []string{"g2", "g3"} {
		if seen[m] > 1 {
			t.Errorf("held member %s saw %d requests, want at most 1", m, seen[m])
		}
	}
	if seen["o0"]+seen["o1"] == 0 {
		t.Error("o0 and o1 served nothing")
	}
	mu.Unlock()
	if h := tr.Pool().Snapshot().Groups; len(h) != 1 || h[0].Group != "subnet-a" {
		t.Fatalf("Snapshot().Groups = %+v, want subnet-a held while the whole group is banned", h)
	}

	// The ban lifts; once the pairs are probeable again, one served member releases the hold.
	lifted.Store(true)
	for step := 0; step < 8 && len(ev.events()) < 2; step++ {
		clk.Advance(time.Minute) // within the idle TTL: a sweep would forget the origin, hold and all
		for i := 0; i < 10 && len(ev.events()) < 2; i++ {
			if _, err := get(""); err != nil {
				var nh *pool.NoHealthyExitError
				if !errors.As(err, &nh) {
					t.Fatalf("Get after the ban lifted: %v", err)
				}
			}
		}
	}
	if h := tr.Pool().Snapshot().Groups; len(h) != 0 {
		t.Fatalf("Snapshot().Groups = %+v after the ban lifted, want none", h)
	}
	evs = ev.events()
	if len(evs) != 2 || evs[1].Released.IsZero() || !strings.HasPrefix(evs[1].ServedBy, "g") {
		mu.Lock()
		t.Errorf("group events %+v, want the hold, then its release by a served member; seen %v; snapshot %+v", evs, seen, tr.Pool().Snapshot())
		mu.Unlock()
	}
}
