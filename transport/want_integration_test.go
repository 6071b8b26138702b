package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestIntegWantOnlyMatchingExits: through six real forward proxies, two of them in the US,
// requests constrained to country=us from eight workers reach the origin only through the US
// proxies — as the origin attributes each request to the proxy that relayed it (the proxies'
// registry), not as the transport says — and both serve; a Want no exit has fails before anything
// is sent.
func TestIntegWantOnlyMatchingExits(t *testing.T) {
	reg := &proxytest.Registry{}
	var mu sync.Mutex
	seen := map[string]int{}
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, _ := reg.Lookup(r)
		mu.Lock()
		seen[name]++
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(origin.Close)
	countries := map[string]string{"us-1": "us", "de-1": "de", "de-2": "de", "us-2": "us", "fr-1": "fr", "fr-2": "fr"}
	var exits []*pool.Exit
	for name, c := range countries {
		p, err := proxytest.Start(proxytest.Config{Name: name, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		e, err := pool.NewExit(p.URL())
		if err != nil {
			t.Fatal(err)
		}
		exits = append(exits, e.WithLabel(name).WithAttr("country", c))
	}
	tr, err := build(pool.WithExits(exits...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	client := &http.Client{Transport: tr}
	ctx := transport.ContextWithWant(context.Background(), pool.MustParseWant("country=us"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 40 {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, origin.URL, nil)
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	mu.Lock()
	got := map[string]int{}
	for k, v := range seen {
		got[k] = v
	}
	mu.Unlock()
	if len(got) != 2 || got["us-1"] == 0 || got["us-2"] == 0 || got["us-1"]+got["us-2"] != 320 {
		t.Errorf("the origin saw %v, want all 320 requests through us-1 and us-2, both", got)
	}

	req, _ := http.NewRequestWithContext(transport.ContextWithWant(context.Background(), pool.MustParseWant("country=jp")), http.MethodGet, origin.URL, nil)
	resp, err := client.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	if !errors.Is(err, pool.ErrNoMatchingExit) {
		t.Errorf("Want country=jp: %v, want an error matching pool.ErrNoMatchingExit", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := seen["us-1"] + seen["us-2"]; len(seen) != 2 || n != 320 {
		t.Errorf("after the refused request the origin saw %v, want nothing more", seen)
	}
}
