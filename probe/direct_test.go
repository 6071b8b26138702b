package probe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
)

// TestProbeDirectExit: a direct exit is probed with no proxy, as live traffic would go: a target
// that answers is a success, and one where nothing listens is the target's trouble (upstream, the
// pair), not a refused proxy, with an error that reads as the origin's.
func TestProbeDirectExit(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.RemoteAddr)
	}))
	t.Cleanup(origin.Close)
	closed, err := proxytest.ClosedAddr()
	if err != nil {
		t.Fatal(err)
	}
	p, err := probe.New(probe.Config{Exits: []*pool.Exit{pool.DirectExit()}, Targets: []string{origin.URL, "http://" + closed + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	rep := p.Run(context.Background())
	if len(rep.Results) != 2 {
		t.Fatalf("Run = %d results, want 2", len(rep.Results))
	}
	ok, refused := rep.Results[0], rep.Results[1]
	if !ok.Success() || ok.Exit != "direct" || ok.Status != http.StatusOK {
		t.Errorf("direct probe of a live origin = %+v, want 200 ok via direct", ok)
	}
	if refused.Success() || refused.Class != pool.ClassUpstream || refused.Scope != pool.ScopePair || refused.Error == "" {
		t.Errorf("direct probe of a closed port = %+v, want a failure of class %s on the pair, with its error", refused, pool.ClassUpstream)
	}
}
