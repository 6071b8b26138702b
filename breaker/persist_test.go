package breaker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
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

// TestRestoreClampsHostileState: a saved state from a bad row, a hostile message or a clock far
// ahead is clamped to what the policy could have produced before it is applied.
func TestRestoreClampsHostileState(t *testing.T) {
	p := mustPolicy(t, fixed(Settings{})) // no jitter: LongestOpen is exactly max(MaxCooldown, ParkFor, MaxRetryAfter)
	longest := p.LongestOpen()
	if want := DefaultMaxRetryAfter; longest != want {
		t.Fatalf("LongestOpen() = %v, want %v", longest, want)
	}
	now := at(0)
	year3000 := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, tt := range []struct {
		name      string
		in        Saved
		wantState State
		wantProbe time.Time // the zero time: not OPEN
		wantLevel int
	}{
		{"window years ahead", Saved{State: Open, NextProbe: now.Add(87671 * time.Hour), Level: 2}, Open, now.Add(longest), 2},
		{"window at 9e18 ns", Saved{State: Open, NextProbe: time.Unix(0, 9e18)}, Open, now.Add(longest), 0},
		{"window in the year 3000", Saved{State: Open, NextProbe: year3000, Parked: true}, Open, now.Add(longest), 0},
		{"window in the year 1", Saved{State: Open, NextProbe: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)}, HalfOpen, time.Time{}, 0},
		{"closed at level 1<<40", Saved{State: Closed, Level: 1 << 40}, Closed, time.Time{}, p.MaxLevel()},
		{"closed at level -7", Saved{State: Closed, Level: -7, Trips: 3}, Closed, time.Time{}, 0},
		{"open at level 1<<40", Saved{State: Open, NextProbe: now.Add(time.Minute), Level: 1 << 40}, Open, now.Add(time.Minute), p.MaxLevel()},
		{"half-open", Saved{State: HalfOpen, NextProbe: year3000}, HalfOpen, time.Time{}, 0},
	} {
		b := p.NewBreaker(nil)
		b.Restore(now, tt.in)
		s := b.Snapshot(now)
		if s.State != tt.wantState || !s.NextProbe.Equal(tt.wantProbe) || s.Level != tt.wantLevel {
			t.Errorf("%d %s: Restore then Snapshot = %v, next probe %v, level %d; want %v, %v, %d",
				i, tt.name, s.State, s.NextProbe, s.Level, tt.wantState, tt.wantProbe, tt.wantLevel)
		}
	}
	b := p.NewBreaker(nil)
	if b.Restore(now, Saved{State: State(99), NextProbe: year3000}) {
		t.Errorf("Restore(State 99) = true, want false: not a state")
	}
	// A member whose clock runs a day ahead does not win every later comparison.
	b.Restore(now, Saved{State: Open, NextProbe: now.Add(time.Minute), Changed: now.Add(24 * time.Hour)})
	if !b.Restore(at(1), Saved{State: Closed, Changed: at(1)}) {
		t.Errorf("a later local state lost to one stamped a day ahead")
	}
	long := Saved{State: Open, NextProbe: now.Add(time.Minute), LastFailure: strings.Repeat("x", 1<<20)}
	c := p.NewBreaker(nil)
	c.Restore(now, long)
	if n := len(c.Snapshot(now).LastFailure); n > 128 {
		t.Errorf("LastFailure kept %d bytes, want at most 128", n)
	}
}
