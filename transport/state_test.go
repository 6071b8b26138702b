package transport_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

const (
	stateURLA    = "http://a.example/"
	stateOriginA = "a.example"
)

// TestStateSurvivesARestart: a parked exit and an OPEN pair, saved from one pool and restored into
// a fresh one (as after a restart), keep their remaining windows and trip counts; the fresh pool
// sends nothing through them until then.
func TestStateSurvivesARestart(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 3))
	env.base.On("x0", "*", testkit.Reply{Status: 407})
	env.base.On("x1", stateOriginA, testkit.Reply{Status: 429, Header: testkit.RetryAfter(300)})
	for i := 0; i < 50 && (env.pairState("x1", stateOriginA) != breaker.Open || !exitParked(env, "x0")); i++ {
		env.get(t, nil, stateURLA)
	}
	if !exitParked(env, "x0") || env.pairState("x1", stateOriginA) != breaker.Open {
		t.Fatal("setup: x0 not parked or (x1, a.example) not open")
	}
	env.clock.Advance(time.Minute)
	saved := env.pool.Save(env.clock.Now())
	data, err := json.Marshal(saved)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "pw-") {
		t.Fatalf("saved state shows a password: %s", data)
	}
	var loaded pool.SavedState
	if err := json.Unmarshal(data, &loaded); err != nil {
		t.Fatal(err)
	}

	fresh := newTestPoolEnv(t, testkit.Exits("x", 3))
	fresh.clock.Set(env.clock.Now())
	applied, skipped, err := fresh.pool.Restore(fresh.clock.Now(), loaded)
	if err != nil || applied != 2 || skipped != 0 {
		t.Fatalf("RestoreState = %d applied, %d skipped, %v; want 2, 0, nil", applied, skipped, err)
	}
	before, _ := env.pair("x1", stateOriginA)
	after, _ := fresh.pair("x1", stateOriginA)
	if after.Breaker.State != breaker.Open || !after.Breaker.NextProbe.Equal(before.Breaker.NextProbe) || after.Breaker.Trips != before.Breaker.Trips {
		t.Errorf("restored pair = %+v, want OPEN until %v with %d trips", after.Breaker, before.Breaker.NextProbe, before.Breaker.Trips)
	}
	if !exitParked(fresh, "x0") {
		t.Error("restored x0 is not parked")
	}
	for range 20 {
		if label, _ := fresh.mustGet(t, nil, stateURLA); label != "x2" {
			t.Fatalf("after the restore a request went through %s", label)
		}
	}
	// Past the pair's window, it admits a probe: the restored window was the remaining one.
	fresh.clock.Set(before.Breaker.NextProbe)
	if due := fresh.pool.DueProbes(fresh.clock.Now()); !hasTarget(due, pool.ScopePair, "x1", stateOriginA) {
		t.Errorf("DueProbes at the pair's probe time = %+v, want (x1, a.example)", due)
	}

	// Another version is refused whole; unknown exits are skipped.
	if _, _, err := fresh.pool.Restore(fresh.clock.Now(), pool.SavedState{Version: 99}); err == nil {
		t.Error("RestoreState of version 99 = nil error")
	}
	_, skipped, _ = fresh.pool.Restore(fresh.clock.Now(), pool.SavedState{Version: pool.SavedStateVersion,
		Breakers: []pool.SavedBreaker{{Scope: pool.ScopeExit, Exit: "nope", Saved: breaker.Saved{State: breaker.Open}}}})
	if skipped != 1 {
		t.Errorf("skipped = %d for an unknown exit, want 1", skipped)
	}
}

func exitParked(env *scriptedEnv, label string) bool {
	for _, e := range env.pool.Snapshot().Exits {
		if e.Exit == label {
			return e.Breaker.Parked
		}
	}
	return false
}

func hasTarget(ts []pool.ProbeTarget, scope pool.Scope, exit, origin string) bool {
	for _, tg := range ts {
		l := ""
		if tg.Exit != nil {
			l = tg.Exit.Label()
		}
		if tg.Scope == scope && l == exit && tg.Origin == origin {
			return true
		}
	}
	return false
}

// TestPinExitProbesThroughThePermitPath: a request pinned to an exit goes through that exit only;
// when the exit's pair is OPEN it is refused rather than rerouted; once due, it takes the pair's
// single probe slot, which a second pinned request then cannot take.
func TestPinExitProbesThroughThePermitPath(t *testing.T) {
	env := newTestPoolEnv(t, testkit.Exits("x", 3))
	for range 10 {
		label, _ := env.mustGet(t, transport.ContextWithExit(context.Background(), "x2"), stateURLA)
		if label != "x2" {
			t.Fatalf("pinned request went through %s, want x2", label)
		}
	}
	env.base.On("x2", stateOriginA, testkit.Reply{Status: 429, Header: testkit.RetryAfter(60)})
	env.mustGet(t, transport.ContextWithExit(context.Background(), "x2"), stateURLA)
	env.base.Reset()
	_, _, err := env.get(t, transport.ContextWithExit(context.Background(), "x2"), stateURLA)
	if !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Fatalf("pinned request to an OPEN pair: err = %v, want ErrNoHealthyExit", err)
	}
	if _, _, err := env.get(t, transport.ContextWithExit(context.Background(), "nope"), stateURLA); err == nil || !strings.Contains(err.Error(), `no exit labelled "nope"`) {
		t.Errorf("pinned to an unknown exit: err = %v", err)
	}

	p, _ := env.pair("x2", stateOriginA)
	env.clock.Set(p.Breaker.NextProbe)
	hold := make(chan struct{})
	env.base.On("x2", stateOriginA, testkit.Reply{Hold: hold})
	calls := env.base.Count("x2", stateOriginA)
	held := make(chan string, 1)
	go func() {
		label, _, _ := env.get(t, transport.ContextWithExit(context.Background(), "x2"), stateURLA)
		held <- label
	}()
	for deadline := time.Now().Add(10 * time.Second); env.base.Count("x2", stateOriginA) == calls; {
		if time.Now().After(deadline) {
			t.Fatal("the probe never reached the base")
		}
		time.Sleep(time.Millisecond) // a hand-off between goroutines, not a wait for state
	}
	if due := env.pool.DueProbes(env.clock.Now()); hasTarget(due, pool.ScopePair, "x2", stateOriginA) {
		t.Errorf("DueProbes lists (x2, a.example) while its probe is out")
	}
	if _, _, err := env.get(t, transport.ContextWithExit(context.Background(), "x2"), stateURLA); !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Errorf("second pinned probe: err = %v, want ErrNoHealthyExit (the slot is taken)", err)
	}
	close(hold)
	if label := <-held; label != "x2" {
		t.Errorf("probe went through %q", label)
	}
	if st := env.pairState("x2", stateOriginA); st != breaker.Closed {
		t.Errorf("after the probe succeeded: pair %v, want closed", st)
	}
}
