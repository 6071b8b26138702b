package breaker

import (
	"encoding/json"
	"testing"
)

func TestSaveRestore(t *testing.T) {
	p := mustPolicy(t, fixed(Settings{}))
	a := p.NewBreaker(nil)
	for i := range 3 {
		pm, _ := a.Acquire(at(i))
		pm.Failure(at(i), Failure{Reason: "timeout"})
	}
	saved := a.Save(at(5))
	if saved.State != Open || !saved.NextProbe.Equal(at(22)) || saved.Trips != 1 || saved.Level != 1 || saved.LastFailure != "timeout" {
		t.Fatalf("Save(t5) = %+v, want OPEN until t22, 1 trip, level 1", saved)
	}
	data, _ := json.Marshal(saved)
	var back Saved
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	var seen []Transition
	b := p.NewBreaker(func(tr Transition) { seen = append(seen, tr) })
	if !b.Restore(at(6), back) {
		t.Fatal("Restore into a fresh breaker = false")
	}
	if ok, next := b.Ready(at(21)); ok || !next.Equal(at(22)) {
		t.Errorf("restored Ready(t21) = %v, %v; want false until t22", ok, next)
	}
	if len(seen) != 1 || seen[0].Cause != CauseRestored || seen[0].To != Open {
		t.Errorf("transitions = %+v, want one restored → open", seen)
	}
	// Past the window it probes; the next failure climbs from the restored level.
	pm, ok := b.Acquire(at(22))
	if !ok || !pm.Probe() {
		t.Fatal("restored breaker did not admit a probe at t22")
	}
	pm.Failure(at(22), Failure{Reason: "timeout"})
	if s := b.Snapshot(at(22)); s.Level != 2 || !s.NextProbe.Equal(at(62)) || s.Trips != 2 {
		t.Errorf("after a failed probe: %+v, want level 2, next t62, 2 trips", s)
	}

	// Older news does not overwrite newer state.
	stale := saved
	stale.State, stale.Changed = Closed, at(1)
	if b.Restore(at(23), stale) {
		t.Error("Restore of an older Saved changed the breaker")
	}

	// A parked breaker stays parked; a HALF_OPEN one is saved as due.
	c := p.NewBreaker(nil)
	pm, _ = c.Acquire(at(0))
	pm.Failure(at(0), Failure{Permanent: true})
	if s := c.Save(at(1)); !s.Parked || s.State != Open {
		t.Errorf("parked Save = %+v", s)
	}
	pm, _ = c.Acquire(at(2000))
	if s := c.Save(at(2000)); s.State != Open || !s.NextProbe.Equal(at(2000)) {
		t.Errorf("HALF_OPEN Save = %+v, want OPEN and due at t2000", s)
	}
	pm.Release(at(2000))
	if (Saved{}).Worth() || !saved.Worth() {
		t.Error("Worth: want false for a fresh CLOSED breaker, true for an OPEN one")
	}
}

// Regression: an OPEN breaker whose key was never asked for again stayed forever (a pool's pairs of
// origins seen once grew without bound). Once its cooldown has been over for the idle TTL, it is
// idle.
func TestIdleForgetsAnAbandonedOpenBreaker(t *testing.T) {
	b := mustPolicy(t, fixed(Settings{})).NewBreaker(nil)
	pm, _ := b.Acquire(at(0))
	pm.Failure(at(0), Failure{RetryAfter: 30 * unit})
	if b.Idle(at(30), 60*unit) || b.Idle(at(89), 60*unit) {
		t.Error("Idle before the cooldown had been over for the TTL")
	}
	if !b.Idle(at(90), 60*unit) {
		t.Error("Idle(t90, 60s) = false for an OPEN breaker probeable since t30 and unused since t0")
	}
	pm, ok := b.Acquire(at(90))
	if !ok || b.Idle(at(500), 60*unit) {
		t.Errorf("a breaker with a probe out must not be idle (acquired %v)", ok)
	}
	pm.Release(at(500))
}
