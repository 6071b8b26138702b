package pool_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestIntegSessionMaxUsesNewSourceAddress sends one caller session through three real forward
// proxies whose upstream connections leave from 127.0.0.2, .3 and .4, with WithSessionLimits(0,
// 3): the origin sees each run of three requests come from one address, and every fourth from
// another one than the three before.
func TestIntegSessionMaxUsesNewSourceAddress(t *testing.T) {
	var mu sync.Mutex
	var seen []netip.Addr
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, proxytest.ClientAddr(r))
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	defer origin.Close()
	var exits []*pool.Exit
	for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		px, err := proxytest.Start(proxytest.Config{Name: ip, SourceAddr: ip})
		if err != nil {
			t.Fatal(err)
		}
		defer px.Close()
		e, err := pool.NewExit(px.URL())
		if err != nil {
			t.Fatal(err)
		}
		exits = append(exits, e.WithLabel("via-"+ip))
	}
	rec := &expiries{}
	p, err := pool.New(pool.WithExits(exits...), pool.WithSeed(3), pool.WithSessionLimits(0, 3), pool.WithObserver(rec))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}
	ctx := transport.ContextWithSession(context.Background(), "login-7")

	const requests = 12
	for i := range requests {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != requests {
		t.Fatalf("the origin saw %d requests, want %d", len(seen), requests)
	}
	for i, a := range seen {
		if !a.IsLoopback() || a == netip.MustParseAddr("127.0.0.1") {
			t.Fatalf("request %d came from %v, want one of the proxies' source addresses", i+1, a)
		}
		switch {
		case i%3 != 0 && a != seen[i-1]:
			t.Errorf("request %d came from %v, request %d from %v: want one address for 3 uses", i+1, a, i, seen[i-1])
		case i > 0 && i%3 == 0 && a == seen[i-1]:
			t.Errorf("request %d came from %v, as the 3 before: want a new source address after maxUses", i+1, a)
		}
	}
	if got := rec.list(); len(got) != requests/3-1 {
		t.Errorf("%d expiries, want %d", len(got), requests/3-1)
	}
	for _, e := range rec.list() {
		if e.Uses != 3 || e.Reason != pool.MovedMaxUses || e.New == nil || e.New == e.Old {
			t.Errorf("expiry %+v: want 3 uses, max_uses, a new exit", e)
		}
	}
}
