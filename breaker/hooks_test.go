package breaker

import "testing"

// TestMirrorFollowsEveryChange: the mirror sees each move out of and back into CLOSED, in order,
// and nothing else.
func TestMirrorFollowsEveryChange(t *testing.T) {
	var seen []bool
	p := mustPolicy(t, fixed(Settings{}))
	b := p.NewBreakerWith(Hooks{Mirror: func(v bool) { seen = append(seen, v) }})
	for i := range 3 {
		pm, _ := b.Acquire(at(i))
		pm.Failure(at(i), Failure{Reason: "timeout"}) // trips on the third
	}
	pm, ok := b.Acquire(at(100)) // HALF_OPEN: already out of CLOSED, no new call
	if !ok || !pm.Probe() {
		t.Fatalf("Acquire(t100) = %v, probe %v, want a probe", ok, pm.Probe())
	}
	pm.Success(at(101))
	if got, want := seen, []bool{true, false}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("mirror calls = %v, want %v", got, want)
	}
}

// TestPermitForGenerations: PermitFor(gen) and ClosedPermit count while the breaker is CLOSED in
// the permit's generation; neither counts against OPEN or HALF_OPEN, nor in a later CLOSED generation.
func TestPermitForGenerations(t *testing.T) {
	b := mustPolicy(t, fixed(Settings{})).NewBreaker(nil)
	for i := range 3 {
		b.PermitFor(0).Failure(at(i), Failure{Reason: "x"})
	}
	if st := b.State(at(3)); st != Open {
		t.Fatalf("three PermitFor(0) failures: State = %v, want open", st)
	}
	if _, ok := b.ClosedPermit(); ok {
		t.Fatalf("ClosedPermit() of an OPEN breaker: ok = true, want false")
	}
	b.PermitFor(0).Failure(at(4), Failure{Permanent: true})
	if s := b.Snapshot(at(4)); s.Parked {
		t.Errorf("a CLOSED permit parked an OPEN breaker")
	}
	pm, _ := b.Acquire(at(100))
	pm.Success(at(100)) // closes: generation 3
	gen := b.Snapshot(at(100)).Generation
	b.PermitFor(0).Failure(at(101), Failure{Reason: "stale"})
	if n := b.Snapshot(at(101)).FailuresInWindow; n != 0 {
		t.Errorf("PermitFor(0) after the breaker re-closed in generation %d counted: %d failures", gen, n)
	}
	now, ok := b.ClosedPermit()
	if !ok || now.Generation() != gen {
		t.Fatalf("ClosedPermit() = generation %d, %v; want %d, true", now.Generation(), ok, gen)
	}
	now.Failure(at(102), Failure{Reason: "now"})
	b.PermitFor(gen).Failure(at(103), Failure{Reason: "now"})
	if n := b.Snapshot(at(103)).FailuresInWindow; n != 2 {
		t.Errorf("FailuresInWindow = %d after a ClosedPermit and a PermitFor(%d) failure, want 2", n, gen)
	}
}

// TestStaleClosedPermitCannotRetrip: a permit taken without the lock while the breaker was CLOSED,
// whose failure arrives after the breaker tripped and closed again, is dropped: a slow request from
// before a trip neither re-trips nor counts against the re-closed breaker.
func TestStaleClosedPermitCannotRetrip(t *testing.T) {
	b := mustPolicy(t, fixed(Settings{FailureThreshold: 1})).NewBreaker(nil)
	slow, ok := b.ClosedPermit()
	if !ok {
		t.Fatal("ClosedPermit() of a fresh breaker: ok = false")
	}
	fast, _ := b.ClosedPermit()
	fast.Failure(at(0), Failure{Reason: "trip"})
	probe, ok := b.Acquire(at(100))
	if !ok || !probe.Probe() {
		t.Fatalf("Acquire(t100) = %v, %v; want a probe", probe, ok)
	}
	probe.Success(at(100))
	slow.Failure(at(101), Failure{Reason: "stale"})
	if s := b.Snapshot(at(101)); s.State != Closed || s.FailuresInWindow != 0 || s.Trips != 1 {
		t.Errorf("after a stale failure: Snapshot = %v, %d failures, %d trips; want closed, 0, 1", s.State, s.FailuresInWindow, s.Trips)
	}
}

// TestNeutralClosedPermitIsFree: a neutral verdict of a CLOSED permit changes nothing — not even
// the breaker's last use, since it is answered without the breaker's lock.
func TestNeutralClosedPermitIsFree(t *testing.T) {
	b := mustPolicy(t, fixed(Settings{})).NewBreaker(nil)
	pm, _ := b.Acquire(at(0))
	pm.Neutral(at(100))
	cp, _ := b.ClosedPermit()
	cp.Release(at(100))
	if !b.Idle(at(100), 50*unit) {
		t.Errorf("Idle(t100, 50s) = false after neutral verdicts at t100, want true (last use t0)")
	}
	if s := b.Snapshot(at(100)); s.Generation != 0 || s.State != Closed || s.FailuresInWindow != 0 {
		t.Errorf("Snapshot(t100) = %+v, want CLOSED generation 0 with no failures", s)
	}
}
