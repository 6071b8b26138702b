package transport_test

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestIntegOverrideBansAndReleases: through three real forward proxies, an operator bans exit a
// for one site by hand (Pool.Ban): the site sees no request through a while a second site still
// gets a's share; observers hear the ban and the release as override transitions; after Release
// the site sees requests through a again. A ban of the exit itself (origin "") takes it out of
// both sites. Which proxy carried each request is the origins' word, not the library's.
func TestIntegOverrideBansAndReleases(t *testing.T) {
	reg := &proxytest.Registry{}
	siteA, countA := countingOrigin(t, reg)
	siteB, countB := countingOrigin(t, reg)
	exits := registeredExits(t, reg, "a", "b", "c")
	obs := &integObserver{}
	p, err := pool.New(pool.WithExits(exits...), pool.WithClock(newIntegClock()), pool.WithSeed(3), pool.WithInlineSweep())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.New(p, transport.WithObserver(obs))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	client := &http.Client{Transport: tr}
	send := func(url string, n int) {
		t.Helper()
		for range n {
			resp, err := client.Get(url)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	overrides := func() (opened, closed int) {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		for _, c := range obs.changes {
			if c.Cause != breaker.CauseOverride || c.Exit == nil || c.Exit.Label() != "a" {
				continue
			}
			switch c.To {
			case breaker.Open:
				opened++
			case breaker.Closed:
				closed++
			}
		}
		return opened, closed
	}
	keyA := integOriginKey(siteA)

	send(siteA.URL, 60)
	if n := countA()["a"]; n == 0 {
		t.Fatalf("before any ban site A saw no request through a: %v", countA())
	}

	if err := p.Ban("a", keyA, 10*time.Minute, "site asked us to stop"); err != nil {
		t.Fatalf("Ban(a, %s) = %v", keyA, err)
	}
	if opened, _ := overrides(); opened != 1 {
		t.Fatalf("after Ban: %d override openings of a heard, want 1", opened)
	}
	beforeA, beforeB := countA()["a"], countB()["a"]
	send(siteA.URL, 60)
	send(siteB.URL, 60)
	if got := countA()["a"] - beforeA; got != 0 {
		t.Errorf("site A saw %d requests through a while a was banned for it, want 0", got)
	}
	if got := countB()["a"] - beforeB; got == 0 {
		t.Errorf("site B saw no request through a of 60: a ban for site A took a out of site B (%v)", countB())
	}

	if err := p.Release("a", keyA); err != nil {
		t.Fatalf("Release(a, %s) = %v", keyA, err)
	}
	if _, closed := overrides(); closed != 1 {
		t.Fatalf("after Release: %d override closings of a heard, want 1", closed)
	}
	beforeA = countA()["a"]
	send(siteA.URL, 90)
	if got := countA()["a"] - beforeA; got == 0 {
		t.Errorf("site A saw no request through a of 90 after its release (%v)", countA())
	}

	if err := p.Ban("a", "", 10*time.Minute, ""); err != nil {
		t.Fatalf("Ban(a, every origin) = %v", err)
	}
	beforeA, beforeB = countA()["a"], countB()["a"]
	send(siteA.URL, 40)
	send(siteB.URL, 40)
	if gotA, gotB := countA()["a"]-beforeA, countB()["a"]-beforeB; gotA+gotB != 0 {
		t.Errorf("with exit a banned for every origin, sites A and B saw %d and %d requests through it, want 0", gotA, gotB)
	}
	if err := p.Ban("nosuch", keyA, time.Minute, ""); err == nil {
		t.Error("Ban of an unknown exit = nil error")
	}
}
