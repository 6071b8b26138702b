package breaker

import (
	"testing"
	"time"
)

// TestMaxWindowCapsTheLadder: a failure with a MaxWindow trips for the ladder's window up to that
// cap (never below BaseCooldown), the level still climbs, and a Retry-After is not shortened.
func TestMaxWindowCapsTheLadder(t *testing.T) {
	b, err := New(Settings{FailureThreshold: 1, Jitter: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := Failure{Reason: "blocked", MaxWindow: 70 * unit}
	now := t0
	failNow(t, b, now, f)
	want := []time.Duration{20 * unit, 40 * unit, 70 * unit, 70 * unit, 70 * unit}
	for i, w := range want {
		got, s := openFor(t, b, now)
		if got != w || s.Level != i+1 {
			t.Fatalf("trip %d: OPEN for %v at level %d, want %v at level %d", i, got, s.Level, w, i+1)
		}
		now = now.Add(got)
		failNow(t, b, now, f) // the probe fails
	}

	c, _ := New(Settings{FailureThreshold: 1, Jitter: -1}, nil)
	failNow(t, c, t0, Failure{MaxWindow: unit}) // below BaseCooldown
	if got, _ := openFor(t, c, t0); got != DefaultBaseCooldown {
		t.Errorf("MaxWindow 1s: OPEN for %v, want BaseCooldown %v", got, DefaultBaseCooldown)
	}
	d, _ := New(Settings{FailureThreshold: 1, Jitter: -1}, nil)
	failNow(t, d, t0, Failure{RetryAfter: 300 * unit, MaxWindow: 30 * unit})
	if got, _ := openFor(t, d, t0); got != 300*unit {
		t.Errorf("Retry-After 300s with MaxWindow 30s: OPEN for %v, want 300s", got)
	}
}

// TestDecisiveTripsAtOnce: a Decisive failure opens a CLOSED breaker whatever FailureThreshold
// says, for its level's window, and says so in the transition's cause; an ordinary one still
// waits for the count.
func TestDecisiveTripsAtOnce(t *testing.T) {
	var causes []Cause
	b, err := New(Settings{Jitter: -1}, func(tr Transition) { causes = append(causes, tr.Cause) })
	if err != nil {
		t.Fatal(err)
	}
	failNow(t, b, t0, Failure{Reason: "timeout"})
	if s := b.State(t0); s != Closed {
		t.Fatalf("after one ordinary failure of %d: %v, want closed", DefaultFailureThreshold, s)
	}
	failNow(t, b, t0, Failure{Reason: "blocked", Decisive: true})
	got, s := openFor(t, b, t0)
	if got != DefaultBaseCooldown || s.Level != 1 || len(causes) != 1 || causes[0] != CauseDecisive {
		t.Errorf("after a decisive failure: OPEN for %v at level %d, causes %v; want %v at level 1, [%s]",
			got, s.Level, causes, DefaultBaseCooldown, CauseDecisive)
	}
}

// TestResting: a breaker rests while OPEN for a transient failure, and while HALF_OPEN with its
// probe out; not while CLOSED, parked, or HALF_OPEN with a probe slot free.
func TestResting(t *testing.T) {
	b, err := New(Settings{FailureThreshold: 1, Jitter: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Resting(t0) {
		t.Errorf("CLOSED: resting")
	}
	failNow(t, b, t0, Failure{Reason: "timeout"})
	if !b.Resting(t0) {
		t.Errorf("OPEN on a timeout: not resting")
	}
	half := t0.Add(DefaultBaseCooldown)
	if b.Resting(half) {
		t.Errorf("HALF_OPEN with its probe slot free: resting")
	}
	if _, ok := b.Acquire(half); !ok {
		t.Fatal("no probe in HALF_OPEN")
	}
	if !b.Resting(half) {
		t.Errorf("HALF_OPEN with its probe out: not resting")
	}
	c, _ := New(Settings{FailureThreshold: 1, Jitter: -1}, nil)
	failNow(t, c, t0, Failure{Permanent: true, Reason: "proxy_refused"})
	if c.Resting(t0) {
		t.Errorf("parked: resting")
	}
}

// TestStretchReadsHigherRungs: a failure with a Stretch trips for the window that many rungs up
// the ladder (each doubling it, up to MaxCooldown) without raising the level any further; a
// MaxWindow still caps it, a Retry-After ignores it, and a negative or huge one is taken as 0 or
// the top of the ladder.
func TestStretchReadsHigherRungs(t *testing.T) {
	for i, c := range []struct {
		f    Failure
		want time.Duration
	}{
		{Failure{Stretch: 0}, 20 * unit},
		{Failure{Stretch: 1}, 40 * unit},
		{Failure{Stretch: 3}, 160 * unit},
		{Failure{Stretch: 3, MaxWindow: 100 * unit}, 100 * unit},
		{Failure{Stretch: 2, RetryAfter: 30 * unit}, 30 * unit},
		{Failure{Stretch: -5}, 20 * unit},
		{Failure{Stretch: 1 << 40}, DefaultMaxCooldown},
	} {
		b, err := New(Settings{FailureThreshold: 1, Jitter: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		failNow(t, b, t0, c.f)
		if got, s := openFor(t, b, t0); got != c.want || s.Level != 1 && c.f.RetryAfter == 0 {
			t.Errorf("%d: Failure%+v: OPEN for %v at level %d, want %v at level 1", i, c.f, got, s.Level, c.want)
		}
	}
	// On the ladder: each trip one level up, each read Stretch rungs higher.
	b, _ := New(Settings{FailureThreshold: 1, Jitter: -1}, nil)
	now := t0
	failNow(t, b, now, Failure{Stretch: 1})
	for i, w := range []time.Duration{40 * unit, 80 * unit, 160 * unit} {
		got, s := openFor(t, b, now)
		if got != w || s.Level != i+1 {
			t.Fatalf("trip %d: OPEN for %v at level %d, want %v at level %d", i, got, s.Level, w, i+1)
		}
		now = now.Add(got)
		failNow(t, b, now, Failure{Stretch: 1}) // the probe fails
	}
}
