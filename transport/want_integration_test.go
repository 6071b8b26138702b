package transport_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

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
	origin, count := countingOrigin(t, reg)
	countries := map[string]string{"us-1": "us", "de-1": "de", "de-2": "de", "us-2": "us", "fr-1": "fr", "fr-2": "fr"}
	var exits []*pool.Exit
	for name, c := range countries {
		exits = append(exits, registeredExits(t, reg, name)[0].WithAttr("country", c))
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
	got := count()
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
	if seen := count(); seen["us-1"]+seen["us-2"] != 320 || len(seen) != 2 {
		t.Errorf("after the refused request the origin saw %v, want nothing more", seen)
	}

	// Both US exits cooling for the origin: the same Want now fails as "every matching exit is
	// cooling" (with the time until the soonest comes back), not as a configuration fault, and
	// nothing leaves through the other countries' exits.
	for _, l := range []string{"us-1", "us-2"} {
		if err := tr.Pool().Ban(l, integOriginKey(origin), 10*time.Minute, "test"); err != nil {
			t.Fatal(err)
		}
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, origin.URL, nil)
	resp, err = client.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	var nh *pool.NoHealthyExitError
	if !errors.As(err, &nh) || errors.Is(err, pool.ErrNoMatchingExit) || nh.RetryIn <= 0 || nh.RetryIn > 10*time.Minute {
		t.Errorf("Want country=us with both US exits banned: %v, want a *pool.NoHealthyExitError with RetryIn in (0, 10m], not ErrNoMatchingExit", err)
	}
	if seen := count(); seen["us-1"]+seen["us-2"] != 320 || len(seen) != 2 {
		t.Errorf("after the cooling refusal the origin saw %v, want nothing more", seen)
	}
}
