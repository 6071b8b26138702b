package breaker

import "testing"

// TestOverride: an operator's ban opens the breaker until the instant given, whatever the policy
// would do, and admits a probe only then; a release closes it, fresh; each is one transition with
// CauseOverride, and a release of a closed breaker changes nothing.
func TestOverride(t *testing.T) {
	p := mustPolicy(t, fixed(Settings{}))
	var seen []Transition
	b := p.NewBreaker(func(tr Transition) { seen = append(seen, tr) })
	if b.Override(at(0), at(0), "") {
		t.Error("Override(release) of a closed breaker = true, want nothing changed")
	}
	if !b.Override(at(1), at(100), "operator") {
		t.Fatal("Override(ban until t100) = false")
	}
	if ok, next := b.Ready(at(99)); ok || !next.Equal(at(100)) {
		t.Errorf("banned Ready(t99) = %v, %v; want false until t100", ok, next)
	}
	if s := b.Snapshot(at(2)); !s.Parked || s.LastFailure != "operator" {
		t.Errorf("banned Snapshot = %+v, want parked, last failure \"operator\"", s)
	}
	if pm, ok := b.Acquire(at(100)); !ok || !pm.Probe() {
		t.Errorf("Acquire(t100) = %v, %v; want a probe once the ban ends", pm, ok)
	} else {
		pm.Release(at(100))
	}
	if !b.Override(at(101), at(0), "") {
		t.Fatal("Override(release) of a banned breaker = false")
	}
	if st := b.State(at(101)); st != Closed {
		t.Errorf("released State = %v, want closed", st)
	}
	if len(seen) < 2 || seen[0].Cause != CauseOverride || seen[0].To != Open || seen[len(seen)-1].Cause != CauseOverride || seen[len(seen)-1].To != Closed {
		t.Errorf("transitions = %+v, want an override to open, then (after the probe's) an override to closed", seen)
	}
}
