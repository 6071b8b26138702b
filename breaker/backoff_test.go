package breaker

import (
	"math"
	"strings"
	"testing"
	"time"
)

// ladder is the default OPEN window for consecutive trips, before jitter.
var ladder = []time.Duration{
	20 * unit, 40 * unit, 80 * unit, 160 * unit, 320 * unit, 640 * unit,
	15 * time.Minute, 15 * time.Minute, 15 * time.Minute,
}

// constRand returns a Settings.Rand that always returns r.
func constRand(r float64) func() float64 { return func() float64 { return r } }

// failNow acquires a permit at now, which must be admitted, and fails it.
func failNow(t *testing.T, b *Breaker, now time.Time, f Failure) {
	t.Helper()
	pm, ok := b.Acquire(now)
	if !ok {
		t.Fatalf("Acquire(%s) = false, want true", tname(now))
	}
	pm.Failure(now, f)
}

// succeedNow acquires a permit at now, which must be admitted, and reports success.
func succeedNow(t *testing.T, b *Breaker, now time.Time) {
	t.Helper()
	pm, ok := b.Acquire(now)
	if !ok {
		t.Fatalf("Acquire(%s) = false, want true", tname(now))
	}
	pm.Success(now)
}

// openFor returns how long b stays OPEN seen from since, and its Snapshot there.
func openFor(t *testing.T, b *Breaker, since time.Time) (time.Duration, Snapshot) {
	t.Helper()
	s := b.Snapshot(since)
	if s.State != Open {
		t.Fatalf("Snapshot(%s).State = %v, want open", tname(since), s.State)
	}
	return s.NextProbe.Sub(since), s
}

// windows trips b n times in a row and returns each OPEN window. route says how the breaker gets
// from one trip to the next: a failed probe, a probe that never reports back, or a successful probe
// followed at once by a failure (re-closing and re-tripping inside StablePeriod).
func windows(t *testing.T, b *Breaker, route string, n int) []time.Duration {
	t.Helper()
	lease := b.Policy().Settings().ProbeLease
	now := t0
	failNow(t, b, now, Failure{})
	var got []time.Duration
	for range n {
		w, _ := openFor(t, b, now)
		got = append(got, w)
		now = now.Add(w)
		switch route {
		case "probe_failed":
			failNow(t, b, now, Failure{})
		case "lease_expired":
			if _, ok := b.Acquire(now); !ok {
				t.Fatalf("Acquire(%s) = false, want a probe", tname(now))
			}
			now = now.Add(lease) // the re-opened window starts where the lease ends
		case "reclosed":
			succeedNow(t, b, now)
			failNow(t, b, now, Failure{})
		}
	}
	return got
}

func TestBackoffLadder(t *testing.T) {
	for _, route := range []string{"probe_failed", "lease_expired", "reclosed"} {
		t.Run(route, func(t *testing.T) {
			b := mustPolicy(t, Settings{Jitter: -1, FailureThreshold: 1}).NewBreaker(nil)
			got := windows(t, b, route, len(ladder))
			for i, want := range ladder {
				if got[i] != want {
					t.Errorf("trip %d: OPEN for %v, want %v", i+1, got[i], want)
				}
			}
			if s := b.Snapshot(t0); s.Level != b.Policy().MaxLevel() {
				t.Errorf("Snapshot().Level = %d after %d trips, want MaxLevel() = %d", s.Level, len(ladder), b.Policy().MaxLevel())
			}
		})
	}
}

// jit is the jittered window the policy computes for d, Jitter j and a draw r.
func jit(d time.Duration, j, r float64) time.Duration { return d + time.Duration(float64(d)*j*r) }

func TestJitter(t *testing.T) {
	for _, c := range []struct {
		name   string
		jitter float64
		r      float64
		broken bool // a broken source neither shortens nor explodes a window: no jitter
	}{
		{"r_0", 0.25, 0, false},
		{"r_half", 0.25, 0.5, false},
		{"r_almost_1", 0.25, 0.999, false},
		{"jitter_1", 1, 0.999, false},
		{"jitter_tiny", 0.01, 0.5, false},
		{"broken_1", 0.25, 1, true},
		{"broken_negative", 0.25, -0.5, true},
		{"broken_nan", 0.25, math.NaN(), true},
		{"broken_inf", 0.25, math.Inf(1), true},
	} {
		for _, route := range []string{"probe_failed", "lease_expired"} {
			t.Run(c.name+"/"+route, func(t *testing.T) {
				s := Settings{FailureThreshold: 1, Jitter: c.jitter, Rand: constRand(c.r)}
				b := mustPolicy(t, s).NewBreaker(nil)
				got := windows(t, b, route, len(ladder))
				for i, cd := range ladder {
					lo, hi := cd, cd+time.Duration(float64(cd)*c.jitter)
					want := cd
					if !c.broken {
						want = jit(cd, c.jitter, c.r)
					}
					if got[i] != want || got[i] < lo || got[i] >= max(hi, lo+1) {
						t.Errorf("trip %d: OPEN for %v, want %v, in [%v, %v)", i+1, got[i], want, lo, hi)
					}
				}
			})
		}
	}
}

func TestRetryAfterFloor(t *testing.T) {
	for _, c := range []struct {
		name       string
		s          Settings
		retryAfter time.Duration
		want       time.Duration
	}{
		{"longer_than_cooldown_sets_the_window", Settings{Jitter: -1}, 90 * unit, 90 * unit},
		{"shorter_than_cooldown_leaves_the_cooldown", Settings{Jitter: -1}, 5 * unit, 20 * unit},
		{"jitter_only_lengthens_r_0", Settings{Rand: constRand(0)}, 90 * unit, 90 * unit},
		{"jitter_only_lengthens_r_half", Settings{Rand: constRand(0.5)}, 90 * unit, 90*unit + 11250*time.Millisecond},
		{"jitter_only_lengthens_r_almost_1", Settings{Rand: constRand(0.999)}, 90 * unit, jit(90*unit, 0.25, 0.999)},
		{"hostile_huge_value_is_capped", Settings{Jitter: -1}, 1e6 * time.Hour, time.Hour},
		{"hostile_max_duration_is_capped", Settings{Jitter: -1}, math.MaxInt64, time.Hour},
		{"custom_cap", Settings{Jitter: -1, MaxRetryAfter: 2 * time.Minute}, 10 * time.Minute, 2 * time.Minute},
		{"cap_below_cooldown_leaves_the_cooldown", Settings{Jitter: -1, MaxRetryAfter: 10 * unit}, time.Hour, 20 * unit},
		{"may_exceed_max_cooldown", Settings{Jitter: -1, MaxCooldown: time.Minute}, 30 * time.Minute, 30 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := mustPolicy(t, c.s).NewBreaker(nil)
			failNow(t, b, t0, Failure{RetryAfter: c.retryAfter, Reason: "rate_limited"})
			got, s := openFor(t, b, t0)
			if got != c.want {
				t.Errorf("after Failure(RetryAfter: %v): OPEN for %v, want %v", c.retryAfter, got, c.want)
			}
			// A Retry-After trip does not climb the backoff ladder.
			if s.Level != 0 || s.LastCause != CauseRetryAfter || s.LastFailure != "rate_limited" {
				t.Errorf("Snapshot() = level %d, cause %q, failure %q; want 0, %q, %q", s.Level, s.LastCause, s.LastFailure, CauseRetryAfter, "rate_limited")
			}
		})
	}

	t.Run("repeated_retry_after_trips_stay_at_the_bottom", func(t *testing.T) {
		// A per-minute cap met every minute: each trip rests the pair for the Retry-After, never longer.
		b := mustPolicy(t, Settings{Jitter: -1}).NewBreaker(nil)
		now := t0
		for i := range 5 {
			failNow(t, b, now, Failure{RetryAfter: 45 * unit, Reason: "rate_limited"})
			got, s := openFor(t, b, now)
			if got != 45*unit || s.Level != 0 {
				t.Fatalf("trip %d: OPEN for %v at level %d, want 45s at level 0", i+1, got, s.Level)
			}
			now = now.Add(45 * unit)
			pm, ok := b.Acquire(now)
			if !ok {
				t.Fatalf("trip %d: no probe at the end of the Retry-After", i+1)
			}
			pm.Success(now)
			now = now.Add(10 * unit)
		}
	})

	t.Run("retry_after_ignores_a_raised_level", func(t *testing.T) {
		// Two failure trips raise the level to 2 (cooldown 40s); a later Retry-After of 25s is
		// what the origin asks for, and what the pair gets.
		b := mustPolicy(t, Settings{Jitter: -1, FailureThreshold: 1, StablePeriod: time.Hour}).NewBreaker(nil)
		failNow(t, b, t0, Failure{})
		pm, _ := b.Acquire(at(20))
		pm.Failure(at(20), Failure{}) // probe fails: level 2
		if got, s := openFor(t, b, at(20)); got != 40*unit || s.Level != 2 {
			t.Fatalf("setup: OPEN for %v at level %d, want 40s at level 2", got, s.Level)
		}
		pm, _ = b.Acquire(at(60))
		pm.Success(at(60))
		failNow(t, b, at(70), Failure{RetryAfter: 25 * unit})
		if got, s := openFor(t, b, at(70)); got != 25*unit || s.Level != 2 {
			t.Errorf("Retry-After 25s at level 2: OPEN for %v at level %d, want 25s at level 2", got, s.Level)
		}
	})

	t.Run("on_a_probe", func(t *testing.T) {
		b := mustPolicy(t, Settings{Jitter: -1, FailureThreshold: 1}).NewBreaker(nil)
		failNow(t, b, t0, Failure{})
		failNow(t, b, at(20), Failure{RetryAfter: 10 * time.Minute})
		got, s := openFor(t, b, at(20))
		if got != 10*time.Minute || s.Level != 1 || s.LastCause != CauseProbeFailed {
			t.Errorf("after a probe Failure(RetryAfter: 10m): OPEN for %v, level %d, cause %q; want 10m0s, 1 (not climbed), %q", got, s.Level, s.LastCause, CauseProbeFailed)
		}
	})
}

func TestPark(t *testing.T) {
	for _, c := range []struct {
		name string
		s    Settings
		want time.Duration
	}{
		{"park_for", Settings{Jitter: -1, ParkFor: 7 * time.Minute}, 7 * time.Minute},
		{"defaults_to_max_cooldown", Settings{Jitter: -1, MaxCooldown: 10 * time.Minute}, 10 * time.Minute},
		{"jittered", Settings{ParkFor: 8 * time.Minute, Rand: constRand(0.5)}, 9 * time.Minute},
		{"shorter_than_the_ladder", Settings{Jitter: -1, ParkFor: unit}, unit},
		{"forever", Settings{Jitter: -1, ParkFor: math.MaxInt64}, time.Unix(0, math.MaxInt64).Sub(t0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := mustPolicy(t, c.s).NewBreaker(nil)
			failNow(t, b, t0, Failure{Permanent: true, Reason: "auth"})
			got, s := openFor(t, b, t0)
			if got != c.want {
				t.Errorf("after Failure(Permanent): OPEN for %v, want %v", got, c.want)
			}
			if !s.Parked || s.Level != 0 || s.Trips != 1 || s.LastCause != CausePermanent {
				t.Errorf("Snapshot() = parked %v, level %d, trips %d, cause %q; want true, 0, 1, %q", s.Parked, s.Level, s.Trips, s.LastCause, CausePermanent)
			}
		})
	}

	// Parking keeps the level where it stands; the next failed probe climbs from there.
	runCases(t, []machineCase{
		{
			name: "keeps_the_level",
			s:    Settings{FailureThreshold: 1, ParkFor: 100 * unit},
			steps: []step{
				{at: 0, do: failure, state: Open, next: 20, level: 1},
				{at: 20, do: failure, state: Open, next: 60, level: 2},
				{at: 60, do: success, level: 2},
				{at: 61, do: failure, f: Failure{Permanent: true}, state: Open, next: 161, level: 2, parked: true},
				{at: 161, do: failure, state: Open, next: 241, level: 3},
			},
		},
		{
			name: "a_permanent_probe_failure_keeps_the_level",
			s:    Settings{FailureThreshold: 1, ParkFor: 100 * unit},
			steps: []step{
				{at: 0, do: failure, state: Open, next: 20, level: 1},
				{at: 20, do: failure, f: Failure{Permanent: true}, state: Open, next: 120, level: 1, parked: true},
			},
		},
	})
}

func TestDecay(t *testing.T) {
	// Trip at t0 (level 1), fail the probe at t20 (level 2), close at t60: level 2, CLOSED from t60.
	closedAt60 := []step{
		{at: 0, do: failure, state: Open, next: 20, level: 1},
		{at: 20, do: failure, state: Open, next: 60, level: 2},
		{at: 60, do: success, level: 2},
	}
	then := func(rest ...step) []step { return append(append([]step(nil), closedAt60...), rest...) }
	s := Settings{FailureThreshold: 1}
	runCases(t, []machineCase{
		{
			name: "one_level_per_full_stable_period",
			s:    s,
			steps: then(
				step{at: 359, do: look, level: 2},
				step{at: 360, do: look, level: 1},
				step{at: 659, do: look, level: 1},
				step{at: 660, do: look, level: 0},
				step{at: 100_000, do: look, level: 0},
			),
		},
		{
			name:  "retripped_within_the_stable_period_climbs",
			s:     s,
			steps: then(step{at: 359, do: failure, state: Open, next: 439, level: 3}),
		},
		{
			name:  "retripped_after_one_period",
			s:     s,
			steps: then(step{at: 360, do: failure, state: Open, next: 400, level: 2}),
		},
		{
			name:  "retripped_after_two_periods_starts_from_the_bottom",
			s:     s,
			steps: then(step{at: 660, do: failure, state: Open, next: 680, level: 1}),
		},
		{
			name:  "parked_after_decay_keeps_the_decayed_level",
			s:     Settings{FailureThreshold: 1, ParkFor: 100 * unit},
			steps: then(step{at: 360, do: failure, f: Failure{Permanent: true}, state: Open, next: 460, level: 1, parked: true}),
		},
		{
			name: "custom_stable_period",
			s:    Settings{FailureThreshold: 1, StablePeriod: 10 * unit},
			steps: then(
				step{at: 69, do: look, level: 2},
				step{at: 70, do: look, level: 1},
				step{at: 80, do: failure, state: Open, next: 100, level: 1},
			),
		},
		{
			name: "negative_stable_period_resets_at_close",
			s:    Settings{FailureThreshold: 1, StablePeriod: -1},
			steps: []step{
				{at: 0, do: failure, state: Open, next: 20, level: 1},
				{at: 20, do: failure, state: Open, next: 60, level: 2},
				{at: 60, do: success, level: 0},
				{at: 61, do: failure, state: Open, next: 81, level: 1},
			},
		},
	})
}

func TestCooldown(t *testing.T) {
	def := mustPolicy(t, Settings{})
	for _, c := range []struct {
		level int
		want  time.Duration
	}{
		{math.MinInt, 20 * unit}, {-1, 20 * unit}, {0, 20 * unit}, {1, 20 * unit}, {2, 40 * unit},
		{6, 640 * unit}, {7, 15 * time.Minute}, {8, 15 * time.Minute}, {64, 15 * time.Minute},
		{math.MaxInt, 15 * time.Minute},
	} {
		if got := def.Cooldown(c.level); got != c.want {
			t.Errorf("Cooldown(%d) = %v, want %v", c.level, got, c.want)
		}
	}

	// The doubling never wraps around, however wide the range between BaseCooldown and MaxCooldown.
	for _, s := range []Settings{
		{BaseCooldown: 1, MaxCooldown: math.MaxInt64},
		{BaseCooldown: 3, MaxCooldown: math.MaxInt64},
		{BaseCooldown: 5, MaxCooldown: math.MaxInt64},
		{BaseCooldown: 3 * unit, MaxCooldown: math.MaxInt64},
		{BaseCooldown: 7 * time.Hour, MaxCooldown: math.MaxInt64 - 1},
		{BaseCooldown: unit, MaxCooldown: unit},
		{BaseCooldown: math.MaxInt64, MaxCooldown: math.MaxInt64},
	} {
		p := mustPolicy(t, s)
		prev := time.Duration(0)
		for level := range p.MaxLevel() + 3 {
			got := p.Cooldown(level)
			if got < prev || got < s.BaseCooldown || got > s.MaxCooldown {
				t.Errorf("Base %v, Max %v: Cooldown(%d) = %v after %v; want non-decreasing, in [Base, Max]", s.BaseCooldown, s.MaxCooldown, level, got, prev)
				break
			}
			prev = got
		}
		if got := p.Cooldown(p.MaxLevel() + 1); got != s.MaxCooldown {
			t.Errorf("Base %v, Max %v: Cooldown(MaxLevel()+1 = %d) = %v, want MaxCooldown", s.BaseCooldown, s.MaxCooldown, p.MaxLevel()+1, got)
		}
	}
}

// Durations the far side of two centuries must saturate, never wrap into the past: a breaker parked
// "forever" stays parked, a probe leased "forever" holds its slot.
func TestHugeDurationsSaturate(t *testing.T) {
	end := time.Unix(0, math.MaxInt64)
	forever := time.Duration(math.MaxInt64)
	for _, c := range []struct {
		name string
		s    Settings
		f    Failure
	}{
		{"park_forever", Settings{ParkFor: forever}, Failure{Permanent: true}},
		{"park_forever_jittered", Settings{ParkFor: forever, Jitter: 1, Rand: constRand(0.999)}, Failure{Permanent: true}},
		{"retry_after_forever", Settings{MaxRetryAfter: forever}, Failure{RetryAfter: forever}},
		{"cooldown_forever", Settings{FailureThreshold: 1, BaseCooldown: forever, MaxCooldown: forever}, Failure{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := mustPolicy(t, c.s).NewBreaker(nil)
			for range b.Policy().Settings().FailureThreshold {
				if pm, ok := b.Acquire(t0); ok {
					pm.Failure(t0, c.f)
				}
			}
			if s := b.Snapshot(t0); s.State != Open || !s.NextProbe.Equal(end) {
				t.Errorf("Snapshot(t0) = %v until %v, want open until %v", s.State, s.NextProbe, end)
			}
			if _, ok := b.Acquire(at(1_000_000)); ok {
				t.Errorf("Acquire(t1000000) = true, want false")
			}
		})
	}

	t.Run("lease_forever", func(t *testing.T) {
		b := mustPolicy(t, Settings{Jitter: -1, FailureThreshold: 1}).NewBreaker(nil)
		failNow(t, b, t0, Failure{})
		if _, ok := b.AcquireLease(at(20), forever); !ok {
			t.Fatal("AcquireLease(t20, forever) = false, want true")
		}
		if s := b.Snapshot(at(1_000_000)); s.State != HalfOpen || s.ProbesInFlight != 1 {
			t.Errorf("Snapshot(t1000000) = %v with %d probes, want half_open with 1", s.State, s.ProbesInFlight)
		}
		if ok, retry := b.Ready(at(1_000_000)); ok || !retry.Equal(end) {
			t.Errorf("Ready(t1000000) = %v, %v; want false, %v", ok, retry, end)
		}
	})
}

// FuzzSettings checks that any Settings NewPolicy accepts gives a breaker whose OPEN windows are
// never shorter than asked and never in the past, and that a rejection names a field.
func FuzzSettings(f *testing.F) {
	f.Add(0, int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), int64(0), 0.0, 0.0)
	f.Add(1, int64(unit), int64(1), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), int64(math.MaxInt64), 1.0, 0.999)
	f.Add(3, int64(time.Minute), int64(5), int64(math.MaxInt64), int64(0), int64(0), int64(-1), int64(0), 0.25, 0.5)
	f.Add(-1, int64(-1), int64(-1), int64(-1), int64(-1), int64(-1), int64(0), int64(-1), 2.0, 0.5)
	f.Fuzz(func(t *testing.T, threshold int, window, base, maxCD, park, maxRA, stable, lease int64, jitter, r float64) {
		s := Settings{
			FailureThreshold: threshold % (MaxFailureThreshold + 2), // keep the ring small
			Window:           time.Duration(window),
			BaseCooldown:     time.Duration(base),
			MaxCooldown:      time.Duration(maxCD),
			ParkFor:          time.Duration(park),
			MaxRetryAfter:    time.Duration(maxRA),
			StablePeriod:     time.Duration(stable),
			ProbeLease:       time.Duration(lease),
			Jitter:           jitter,
			Rand:             constRand(r),
		}
		p, err := NewPolicy(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "breaker: Settings.") {
				t.Fatalf("NewPolicy(%+v) = %q, want it to name a field", s, err)
			}
			return
		}
		end := time.Unix(0, math.MaxInt64)
		atLeast := func(d time.Duration) time.Time {
			if w := t0.Add(d); w.Before(end) {
				return w
			}
			return end
		}
		got := p.Settings()
		for _, c := range []struct {
			f   Failure
			min time.Duration
		}{
			{Failure{}, p.Cooldown(1)},
			{Failure{RetryAfter: got.MaxRetryAfter}, max(p.Cooldown(1), got.MaxRetryAfter)},
			{Failure{Permanent: true}, got.ParkFor},
		} {
			b := p.NewBreaker(nil)
			for range got.FailureThreshold {
				if pm, ok := b.Acquire(t0); ok {
					pm.Failure(t0, c.f)
				}
			}
			sn := b.Snapshot(t0)
			if sn.State != Open || sn.NextProbe.Before(atLeast(c.min)) {
				t.Fatalf("%+v after Failure(%+v): Snapshot(t0) = %v until %v, want open until at least %v", got, c.f, sn.State, sn.NextProbe, atLeast(c.min))
			}
			if sn.NextProbe.Equal(end) {
				continue
			}
			// At NextProbe a probe gets a slot, held for its lease.
			pm, ok := b.AcquireLease(sn.NextProbe, time.Duration(lease))
			if !ok || !pm.Probe() {
				t.Fatalf("%+v: AcquireLease(NextProbe) = %v, %v; want a probe", got, pm.Probe(), ok)
			}
			if s := b.Snapshot(sn.NextProbe); s.State != HalfOpen || s.ProbesInFlight != 1 {
				t.Fatalf("%+v: Snapshot(NextProbe) = %v with %d probes, want half_open with 1", got, s.State, s.ProbesInFlight)
			}
		}
	})
}
