package transport_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// nginxForbidden is nginx's own 403 page: no challenge, no vendor marker.
const nginxForbidden = "<html>\r\n<head><title>403 Forbidden</title></head>\r\n<body>\r\n<center><h1>403 Forbidden</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"

// TestIntegPlain403ByEvidence is issue 12's plain-403 case through real forward proxies on
// 127.0.0.1: origin "banned" answers nginx's plain 403 to requests through X and serves them
// through Y and Z, so X's 403s are a block of the (X, banned) pair from the second in a row (the
// first may be a page the site forbids everyone), which opens at once; origin "closed" answers 403 to every exit — the site's answer — and no pair of it opens.
func TestIntegPlain403ByEvidence(t *testing.T) {
	reg := &proxytest.Registry{}
	forbid := func(w http.ResponseWriter) {
		w.Header().Set("Server", "nginx")
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, nginxForbidden)
	}
	banned := integOrigin(t, false, func(w http.ResponseWriter, r *http.Request, _ string) bool {
		if name, _ := reg.Lookup(r); name == "X" {
			forbid(w)
			return true
		}
		return false
	})
	closed := integOrigin(t, false, func(w http.ResponseWriter, r *http.Request, _ string) bool {
		forbid(w)
		return true
	})
	var exits []*pool.Exit
	for _, name := range []string{"X", "Y", "Z"} {
		px, err := proxytest.Start(proxytest.Config{Name: name, Registry: reg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { px.Close() })
		exits = append(exits, integExit(t, px.URL(), name))
	}
	tr, c := integNew(t, []*httptest.Server{banned, closed}, pool.WithExits(exits...), pool.WithClock(newIntegClock()),
		pool.WithPairSettings(breaker.Settings{Rand: integHalf}))
	get := func(u, exit string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(transport.ContextWithExit(context.Background(), exit), http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("Get(%s) via %s: %v", u, exit, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	// The site's answer: every exit gets 403 from closed, and nothing opens.
	for range 3 {
		for _, x := range []string{"X", "Y", "Z"} {
			if got := get(closed.URL, x); got != http.StatusForbidden {
				t.Fatalf("Get(closed) via %s = %d, want 403", x, got)
			}
		}
	}
	for _, x := range []string{"X", "Y", "Z"} {
		if s, ok := integPairState(tr.Pool().Snapshot(), x, integOriginKey(closed)); ok && s.State != breaker.Closed {
			t.Errorf("pair (%s, closed) = %v, want closed: a 403 every exit gets is the site's answer", x, s.State)
		}
	}

	// A block of one exit: Y and Z are served by banned, X gets 403s and its pair opens.
	for _, x := range []string{"Y", "Z", "Y", "Z"} {
		if got := get(banned.URL, x); got != http.StatusOK {
			t.Fatalf("Get(banned) via %s = %d, want 200", x, got)
		}
	}
	const inRow = 2 // the first is the site's answer, the second a block, and a block trips at once
	for i := range inRow {
		if got := get(banned.URL, "X"); got != http.StatusForbidden {
			t.Fatalf("step %d: Get(banned) via X = %d, want 403", i, got)
		}
	}
	xb, _ := integPairState(tr.Pool().Snapshot(), "X", integOriginKey(banned))
	if xb.State != breaker.Open || xb.LastFailure != string(pool.ClassBlocked) {
		t.Errorf("pair (X, banned) after %d plain 403s while Y and Z were served = %v, last failure %q; want open, %s",
			inRow, xb.State, xb.LastFailure, pool.ClassBlocked)
	}
	for _, x := range []string{"Y", "Z"} {
		if s, ok := integPairState(tr.Pool().Snapshot(), x, integOriginKey(banned)); ok && s.State != breaker.Closed {
			t.Errorf("pair (%s, banned) = %v, want closed", x, s.State)
		}
	}
	if es := integExitStatus(t, tr.Pool().Snapshot(), "X"); es.Breaker.State != breaker.Closed {
		t.Errorf("exit X = %v, want closed: a ban judges the pair, not the exit", es.Breaker.State)
	}
}
