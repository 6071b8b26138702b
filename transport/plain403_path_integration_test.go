package transport_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestIntegPlain403ForAServedPath: through real forward proxies (V is refused "/"), a plain 403
// for a path the site
// served moments before is a ban, on its first: when it served that path to two other exits (it
// forbids it to nobody), and in a wave of bans — every exit refused at once, so that no exit is
// being served — when it served that path to this very exit. A 403 for a path it never served
// stays the site's answer.
func TestIntegPlain403ForAServedPath(t *testing.T) {
	reg := &proxytest.Registry{}
	var wave atomic.Bool // while set, the site refuses every exit
	origin := integOrigin(t, false, func(w http.ResponseWriter, r *http.Request, _ string) bool {
		name, _ := reg.Lookup(r)
		if wave.Load() || (name == "V" && r.URL.Path == "/") || r.URL.Path == "/forbidden" {
			nginxForbid(w)
			return true
		}
		return false
	})
	exits := registeredExits(t, reg, "X", "Y", "Z", "W", "V")
	tr, c := integNew(t, []*httptest.Server{origin}, pool.WithExits(exits...), pool.WithClock(newIntegClock()),
		pool.WithPairSettings(breaker.Settings{Rand: integHalf}))
	get := func(path, exit string) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(transport.ContextWithExit(context.Background(), exit), http.MethodGet, origin.URL+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("Get(%s) via %s: %v", path, exit, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	state := func(exit string) breaker.State {
		s, _ := integPairState(tr.Pool().Snapshot(), exit, integOriginKey(origin))
		return s.State
	}

	// A path nobody is served: the site's answer, for X as for the others.
	for _, x := range []string{"Y", "Z", "X"} {
		if got := get("/forbidden", x); got != http.StatusForbidden {
			t.Fatalf("Get(/forbidden) via %s = %d, want 403", x, got)
		}
	}
	if s := state("X"); s != breaker.Closed {
		t.Errorf("pair X after one 403 for a path the site serves nobody = %v, want closed", s)
	}
	// "/" served to Y and Z: V's first 403 for it (V's first answer at all) is a ban.
	get("/", "Y")
	get("/", "Z")
	if got := get("/", "V"); got != http.StatusForbidden {
		t.Fatalf("Get(/) via V = %d, want 403", got)
	}
	if s := state("V"); s != breaker.Open {
		t.Errorf("pair V after its first 403 for the path Y and Z were just served = %v, want open", s)
	}
	// A wave: W is served a path, then the site refuses everyone; W's first 403 for that path,
	// with no exit being served, is a ban.
	if got := get("/page", "W"); got != http.StatusOK {
		t.Fatalf("Get(/page) via W = %d, want 200", got)
	}
	wave.Store(true)
	get("/other", "Y")
	get("/other", "Z")
	if got := get("/page", "W"); got != http.StatusForbidden {
		t.Fatalf("Get(/page) via W in the wave = %d, want 403", got)
	}
	if s := state("W"); s != breaker.Open {
		t.Errorf("pair W after a 403 for the path it was served a moment before, in a wave = %v, want open", s)
	}
}
