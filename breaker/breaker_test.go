package breaker

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestTransitions(t *testing.T) {
	tripAt0 := []step{ // three failures at t0, t1, t2 trip the default breaker: OPEN until t22
		{at: 0, do: failure, fails: 1},
		{at: 1, do: failure, fails: 2},
		{at: 2, do: failure, f: Failure{Reason: "timeout"}, state: Open, next: 22, level: 1},
	}
	trip := "closed→open failures t2 next t22 L1"
	then := func(rest []step) []step { return append(append([]step(nil), tripAt0...), rest...) }

	runCases(t, []machineCase{
		{
			name: "closed_to_open_by_threshold_failures_in_window",
			steps: []step{
				{at: 0, do: acquire, ok: true},
				{at: 0, do: failure, fails: 1},
				{at: 1, do: success, fails: 1},
				{at: 1, do: failure, fails: 2},
				{at: 3, do: failure, f: Failure{Reason: "timeout"}, state: Open, next: 23, level: 1},
				{at: 4, do: acquire, ok: false, state: Open, next: 23, level: 1},
				{at: 5, do: ready, ok: false, retry: 23, state: Open, next: 23, level: 1},
				{at: 22, do: acquire, ok: false, state: Open, next: 23, level: 1},
			},
			trans: []string{"closed→open failures t3 next t23 L1"},
		},
		{
			name: "failures_straddling_the_window_do_not_trip",
			steps: []step{
				{at: 0, do: failure, fails: 1},
				{at: 30, do: failure, fails: 2},
				{at: 60, do: failure, fails: 2}, // the window is (t0, t60]: t0 has left it
				{at: 61, do: look, fails: 2},
				{at: 91, do: failure, fails: 2}, // t30 has left: t60, t91
				{at: 100, do: failure, state: Open, next: 120, level: 1},
			},
			trans: []string{"closed→open failures t100 next t120 L1"},
		},
		{
			name: "retry_after_trips_at_once",
			steps: []step{
				{at: 0, do: failure, f: Failure{RetryAfter: 90 * unit, Reason: "rate_limited"}, state: Open, next: 90, level: 0},
				{at: 89, do: acquire, ok: false, state: Open, next: 90, level: 0},
				{at: 90, do: ready, ok: true, state: HalfOpen, level: 0},
			},
			trans: []string{"closed→open retry_after t0 next t90 L0"},
		},
		{
			name: "soft_retry_after_trips_at_once",
			steps: []step{
				{at: 0, do: failure, f: Failure{Soft: true, RetryAfter: 5 * unit}, state: Open, next: 20, level: 0},
			},
			trans: []string{"closed→open retry_after t0 next t20 L0"},
		},
		{
			name: "permanent_parks",
			steps: []step{
				{at: 0, do: failure, fails: 1},
				{at: 1, do: failure, f: Failure{Permanent: true, Reason: "auth"}, state: Open, next: 901, parked: true},
				{at: 900, do: acquire, ok: false, state: Open, next: 901, parked: true},
				{at: 901, do: look, state: HalfOpen},
				{at: 901, do: acquire, p: "probe", ok: true, probe: true, state: HalfOpen, inflight: 1},
				{at: 902, do: success, p: "probe"},
			},
			trans: []string{
				"closed→open permanent t1 next t901 L0 parked",
				"open→half_open cooldown t901 L0",
				"half_open→closed probe_ok t902 L0",
			},
		},
		{
			name: "lease_expiry_after_parking_is_not_parked",
			steps: []step{
				{at: 0, do: failure, f: Failure{Permanent: true}, state: Open, next: 900, parked: true},
				{at: 900, do: acquire, ok: true, probe: true, state: HalfOpen, inflight: 1},
				// The probe never reports: a failed probe, OPEN one level up, and not parked.
				{at: 930, do: look, state: Open, next: 950, level: 1},
				{at: 931, do: acquire, ok: false, state: Open, next: 950, level: 1},
			},
			trans: []string{
				"closed→open permanent t0 next t900 L0 parked",
				"open→half_open cooldown t900 L0",
				"half_open→open lease_expired t930 next t950 L1",
			},
		},
		{
			name: "open_to_half_open_lazily_and_one_success_closes",
			steps: then([]step{
				{at: 21, do: ready, ok: false, retry: 22, state: Open, next: 22, level: 1},
				{at: 21, do: acquire, ok: false, state: Open, next: 22, level: 1},
				{at: 22, do: look, state: HalfOpen, level: 1},
				{at: 22, do: ready, ok: true, state: HalfOpen, level: 1},
				{at: 22, do: acquire, p: "probe", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 22, do: acquire, ok: false, state: HalfOpen, level: 1, inflight: 1},
				{at: 23, do: ready, ok: false, retry: 52, state: HalfOpen, level: 1, inflight: 1},
				{at: 24, do: success, p: "probe", level: 1},
				{at: 24, do: acquire, ok: true, probe: false, level: 1},
			}),
			trans: []string{trip, "open→half_open cooldown t22 L1", "half_open→closed probe_ok t24 L1"},
		},
		{
			name: "three_successes_close_one_probe_at_a_time",
			s:    Settings{SuccessesToClose: 3},
			steps: then([]step{
				{at: 22, do: acquire, p: "a", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 22, do: acquire, ok: false, state: HalfOpen, level: 1, inflight: 1},
				{at: 23, do: success, p: "a", state: HalfOpen, level: 1},
				{at: 24, do: success, state: HalfOpen, level: 1}, // acquires the probe and reports at once
				{at: 25, do: acquire, p: "c", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 26, do: success, p: "c", level: 1},
			}),
			trans: []string{trip, "open→half_open cooldown t22 L1", "half_open→closed probe_ok t26 L1"},
		},
		{
			name: "three_successes_close_three_probes_at_once",
			s:    Settings{SuccessesToClose: 3, HalfOpenProbes: 3},
			steps: then([]step{
				{at: 22, do: acquire, p: "a", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 22, do: acquire, p: "b", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 2},
				{at: 22, do: acquire, p: "c", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 3},
				{at: 22, do: acquire, ok: false, state: HalfOpen, level: 1, inflight: 3},
				{at: 23, do: success, p: "b", state: HalfOpen, level: 1, inflight: 2},
				{at: 23, do: success, p: "b", state: HalfOpen, level: 1, inflight: 2}, // a second verdict is dropped
				{at: 24, do: success, p: "a", state: HalfOpen, level: 1, inflight: 1},
				{at: 25, do: success, p: "c", level: 1},
			}),
			trans: []string{trip, "open→half_open cooldown t22 L1", "half_open→closed probe_ok t25 L1"},
		},
		{
			name: "a_second_verdict_does_not_touch_the_slot_given_to_the_next_probe",
			s:    Settings{SuccessesToClose: 3},
			steps: then([]step{
				{at: 22, do: acquire, p: "a", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 23, do: neutral, p: "a", state: HalfOpen, level: 1},
				{at: 24, do: acquire, p: "b", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 25, do: success, p: "a", state: HalfOpen, level: 1, inflight: 1},
				{at: 25, do: release, p: "a", state: HalfOpen, level: 1, inflight: 1},
				{at: 26, do: acquire, ok: false, state: HalfOpen, level: 1, inflight: 1},
			}),
		},
		{
			name: "probe_failure_reopens_one_level_higher",
			steps: then([]step{
				{at: 22, do: acquire, p: "a", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 23, do: failure, p: "a", f: Failure{Reason: "timeout"}, state: Open, next: 63, level: 2},
				{at: 62, do: acquire, ok: false, state: Open, next: 63, level: 2},
				{at: 63, do: failure, state: Open, next: 143, level: 3},
				{at: 143, do: success, level: 3},
			}),
			trans: []string{
				trip,
				"open→half_open cooldown t22 L1",
				"half_open→open probe_failed t23 next t63 L2",
				"open→half_open cooldown t63 L2",
				"half_open→open probe_failed t63 next t143 L3",
				"open→half_open cooldown t143 L3",
				"half_open→closed probe_ok t143 L3",
			},
		},
		{
			name: "neutral_and_release_free_the_probe_slot_and_count_nothing",
			steps: then([]step{
				{at: 22, do: acquire, p: "a", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 23, do: neutral, p: "a", state: HalfOpen, level: 1},
				{at: 24, do: acquire, p: "b", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 25, do: release, p: "b", state: HalfOpen, level: 1},
				{at: 26, do: success, level: 1},
				{at: 27, do: neutral, level: 1},
				{at: 27, do: failure, level: 1, fails: 1},
				{at: 28, do: release, level: 1, fails: 1},
			}),
			trans: []string{trip, "open→half_open cooldown t22 L1", "half_open→closed probe_ok t26 L1"},
		},
		{
			name: "lease_expiry_reopens_one_level_higher",
			steps: then([]step{
				{at: 22, do: acquire, p: "a", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 51, do: ready, ok: false, retry: 52, state: HalfOpen, level: 1, inflight: 1},
				// At t52 the lease has ended: the probe counts as failed, OPEN from t52 for 40 s.
				{at: 52, do: look, state: Open, next: 92, level: 2},
				{at: 60, do: ready, ok: false, retry: 92, state: Open, next: 92, level: 2},
				{at: 60, do: acquire, ok: false, state: Open, next: 92, level: 2},
				{at: 61, do: success, p: "a", state: Open, next: 92, level: 2}, // too late: dropped
				{at: 92, do: acquire, p: "b", ok: true, probe: true, state: HalfOpen, level: 2, inflight: 1},
				{at: 93, do: success, p: "b", level: 2},
			}),
			trans: []string{
				trip,
				"open→half_open cooldown t22 L1",
				"half_open→open lease_expired t52 next t92 L2",
				"open→half_open cooldown t92 L2",
				"half_open→closed probe_ok t93 L2",
			},
		},
		{
			name: "lease_expiry_whose_reopened_window_has_passed_too",
			steps: then([]step{
				{at: 22, do: acquire, p: "a", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				// Nobody looks until t200: the lease ended at t52, the re-opened window at t92.
				{at: 200, do: look, state: HalfOpen, level: 2},
				{at: 200, do: ready, ok: true, state: HalfOpen, level: 2},
				{at: 200, do: acquire, p: "b", ok: true, probe: true, state: HalfOpen, level: 2, inflight: 1},
				{at: 201, do: success, p: "a", state: HalfOpen, level: 2, inflight: 1}, // the expired probe: dropped
				{at: 202, do: success, p: "b", level: 2},
			}),
			trans: []string{
				trip,
				"open→half_open cooldown t22 L1",
				"half_open→open lease_expired t52 next t92 L2",
				"open→half_open cooldown t200 L2",
				"half_open→closed probe_ok t202 L2",
			},
		},
		{
			name: "per_request_lease",
			steps: then([]step{
				{at: 22, do: acquire, p: "a", lease: 5 * unit, ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 26, do: ready, ok: false, retry: 27, state: HalfOpen, level: 1, inflight: 1},
				{at: 27, do: look, state: Open, next: 67, level: 2},
			}),
		},
		{
			name: "lease_expiry_with_two_probes_drops_the_live_one",
			s:    Settings{HalfOpenProbes: 2},
			steps: then([]step{
				{at: 22, do: acquire, p: "a", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 40, do: acquire, p: "b", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 2},
				{at: 51, do: ready, ok: false, retry: 52, state: HalfOpen, level: 1, inflight: 2},
				{at: 55, do: success, p: "b", state: Open, next: 92, level: 2},
				{at: 92, do: acquire, p: "c", ok: true, probe: true, state: HalfOpen, level: 2, inflight: 1},
			}),
			trans: []string{
				trip,
				"open→half_open cooldown t22 L1",
				"half_open→open lease_expired t52 next t92 L2",
				"open→half_open cooldown t92 L2",
			},
		},
	})
}

func TestStaleVerdicts(t *testing.T) {
	runCases(t, []machineCase{
		{
			name: "closed_permit_from_before_a_trip_neither_retrips_nor_closes",
			steps: []step{
				{at: 0, do: acquire, p: "slow", ok: true},
				{at: 0, do: acquire, p: "slower", ok: true},
				{at: 0, do: acquire, p: "slowest", ok: true},
				{at: 1, do: failure, fails: 1},
				{at: 2, do: failure, fails: 2},
				{at: 3, do: failure, state: Open, next: 23, level: 1},
				{at: 4, do: failure, p: "slow", f: Failure{RetryAfter: time.Hour}, state: Open, next: 23, level: 1},
				{at: 5, do: failure, p: "slow", f: Failure{Permanent: true}, state: Open, next: 23, level: 1},
				{at: 23, do: acquire, p: "probe", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 24, do: success, p: "slower", state: HalfOpen, level: 1, inflight: 1},
				{at: 24, do: failure, p: "slower", state: HalfOpen, level: 1, inflight: 1},
				{at: 25, do: success, p: "probe", level: 1},
				{at: 26, do: failure, p: "slowest", level: 1}, // a CLOSED permit, but of an older CLOSED
			},
			trans: []string{
				"closed→open failures t3 next t23 L1",
				"open→half_open cooldown t23 L1",
				"half_open→closed probe_ok t25 L1",
			},
		},
		{
			name: "probe_of_an_earlier_half_open_is_dropped",
			s:    Settings{FailureThreshold: 1},
			steps: []step{
				{at: 0, do: failure, state: Open, next: 20, level: 1},
				{at: 20, do: acquire, p: "old", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 50, do: acquire, ok: false, state: Open, next: 90, level: 2}, // lease expiry at t50
				{at: 90, do: acquire, p: "new", ok: true, probe: true, state: HalfOpen, level: 2, inflight: 1},
				// old and new hold the same slot; old's verdict must not free it or decide anything.
				{at: 91, do: success, p: "old", state: HalfOpen, level: 2, inflight: 1},
				{at: 91, do: failure, p: "old", state: HalfOpen, level: 2, inflight: 1},
				{at: 92, do: success, p: "new", level: 2},
			},
		},
		{
			name: "verdicts_on_a_refused_permit_are_ignored",
			steps: []step{
				{at: 0, do: failure, f: Failure{RetryAfter: 30 * unit}, state: Open, next: 30, level: 0},
				{at: 1, do: acquire, p: "none", ok: false, state: Open, next: 30, level: 0},
				{at: 2, do: failure, p: "none", f: Failure{Permanent: true}, state: Open, next: 30, level: 0},
				{at: 30, do: acquire, p: "probe", ok: true, probe: true, state: HalfOpen, level: 0, inflight: 1},
				{at: 31, do: success, p: "none", state: HalfOpen, level: 0, inflight: 1},
				{at: 31, do: failure, p: "none", state: HalfOpen, level: 0, inflight: 1},
				{at: 31, do: neutral, p: "none", state: HalfOpen, level: 0, inflight: 1},
				{at: 31, do: release, p: "none", state: HalfOpen, level: 0, inflight: 1},
			},
		},
	})
}

func TestZeroPermit(t *testing.T) {
	var p Permit
	if p.Valid() || p.Probe() || p.Generation() != 0 {
		t.Fatalf("Permit{}: Valid() = %v, Probe() = %v, Generation() = %d; want false, false, 0", p.Valid(), p.Probe(), p.Generation())
	}
	p.Success(at(0))
	p.Failure(at(0), Failure{Permanent: true})
	p.Neutral(at(0))
	p.Release(at(0))
}

func TestSoftFailuresCountHalf(t *testing.T) {
	soft := Failure{Soft: true, Reason: "bad_gateway"}
	runCases(t, []machineCase{
		{
			name: "two_soft_make_one",
			steps: []step{
				{at: 0, do: failure, f: soft, fails: 0},
				{at: 1, do: failure, f: soft, fails: 1},
				{at: 2, do: failure, f: soft, fails: 1},
				{at: 3, do: failure, f: soft, fails: 2},
				{at: 4, do: failure, f: soft, fails: 2},
				{at: 5, do: failure, f: soft, state: Open, next: 25, level: 1},
			},
			trans: []string{"closed→open failures t5 next t25 L1"},
		},
		{
			name: "soft_and_hard_mix",
			steps: []step{
				{at: 0, do: failure, f: soft, fails: 0},
				{at: 1, do: failure, fails: 1},
				{at: 2, do: failure, fails: 2},
				{at: 3, do: failure, f: soft, state: Open, next: 23, level: 1},
			},
		},
		{
			name: "halves_a_window_apart_do_not_pair",
			s:    Settings{FailureThreshold: 1},
			steps: []step{
				{at: 0, do: failure, f: soft},
				{at: 60, do: failure, f: soft}, // t0's half has left the window (t0, t60]
				{at: 61, do: failure, f: soft, state: Open, next: 81, level: 1},
			},
		},
		{
			name: "a_soft_probe_failure_is_a_failed_probe",
			s:    Settings{FailureThreshold: 1},
			steps: []step{
				{at: 0, do: failure, state: Open, next: 20, level: 1},
				{at: 20, do: failure, f: soft, state: Open, next: 60, level: 2},
			},
		},
	})
}

func TestFailureRatio(t *testing.T) {
	s := Settings{FailureRatio: 0.5, MinVolume: 10}

	// 30 successes, then 3 failures: the count is met, the ratio (3/33) is not.
	busy := repeat(30, step{at: 0, do: success}, 0, 0)
	busy = append(busy, repeat(3, step{at: 30, do: failure, fails: 1}, 1, 3)...)
	busy = append(busy, step{at: 40, do: look, fails: 3})

	// 5 successes, then 3 failures: 8 verdicts, below MinVolume, so the count alone trips.
	quiet := repeat(5, step{at: 0, do: success}, 0, 0)
	quiet = append(quiet,
		step{at: 5, do: failure, fails: 1},
		step{at: 6, do: failure, fails: 2},
		step{at: 7, do: failure, state: Open, next: 27, level: 1})

	// 10 successes, then failures until half the verdicts failed: the 10th failure trips.
	even := repeat(10, step{at: 0, do: success}, 0, 0)
	even = append(even, repeat(9, step{at: 10, do: failure, fails: 1}, 1, 3)...)
	even = append(even, step{at: 19, do: failure, state: Open, next: 39, level: 1})

	// The ratio looks back over the window only: 30 old successes have left it by t100.
	stale := repeat(30, step{at: 0, do: success}, 0, 0)
	stale = append(stale,
		step{at: 100, do: failure, fails: 1},
		step{at: 101, do: failure, fails: 2},
		step{at: 102, do: failure, state: Open, next: 122, level: 1})

	runCases(t, []machineCase{
		{name: "few_failures_among_many_successes_do_not_trip", s: s, steps: busy, trans: []string{}},
		{name: "below_min_volume_the_count_trips", s: s, steps: quiet},
		{name: "the_ratio_reached_trips", s: s, steps: even},
		{name: "old_volume_leaves_the_window", s: s, steps: stale},
	})
}

func TestNowGoingBackwards(t *testing.T) {
	runCases(t, []machineCase{
		{
			name: "every_state",
			s:    Settings{HalfOpenProbes: 2},
			steps: []step{
				{at: 100, do: failure, fails: 1},
				{at: 50, do: failure, fails: 2},
				{at: 0, do: failure, state: Open, next: 20, level: 1}, // OPEN from t0 for 20 s
				{at: 10, do: acquire, ok: false, state: Open, next: 20, level: 1},
				{at: -1000, do: acquire, ok: false, state: Open, next: 20, level: 1},
				{at: 30, do: acquire, p: "a", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 1},
				{at: 25, do: acquire, p: "b", ok: true, probe: true, state: HalfOpen, level: 1, inflight: 2},
				{at: 5, do: look, state: HalfOpen, level: 1, inflight: 2},
				{at: 5, do: neutral, p: "a", state: HalfOpen, level: 1, inflight: 1},
				{at: 20, do: success, p: "b", level: 1}, // closes at t20, before it was acquired
				{at: -5, do: look, level: 1},
				{at: 320, do: look, level: 0},
				{at: -5, do: failure, level: 1, fails: 1},
				{at: 400, do: failure, level: 0, fails: 1}, // t-5 is long out of the window
				{at: 401, do: failure, level: 0, fails: 2},
				{at: 402, do: failure, state: Open, next: 422, level: 1},
			},
		},
	})
}

func TestCallbacks(t *testing.T) {
	type seen struct {
		tr   Transition
		snap Snapshot
	}
	var (
		b    *Breaker
		got  []seen
		done = make(chan struct{})
	)
	p := mustPolicy(t, Settings{Jitter: -1, FailureThreshold: 1})
	b = p.NewBreaker(func(tr Transition) {
		// The lock must be free: these would deadlock otherwise.
		b.Ready(tr.At)
		got = append(got, seen{tr, b.Snapshot(tr.At)})
	})
	go func() {
		defer close(done)
		b.Acquire(at(0))
		pm, _ := b.Acquire(at(0))
		pm.Failure(at(1), Failure{Reason: "timeout"})                 // trip: OPEN t1..t21
		pm, _ = b.Acquire(at(21))                                     // HALF_OPEN
		pm.Failure(at(22), Failure{Reason: "reset"})                  // OPEN t22..t62, level 2
		b.Acquire(at(62))                                             // a probe that never reports: lease to t92
		b.Acquire(at(500))                                            // expired at t92, OPEN until t172; HALF_OPEN now
		pm, _ = b.Acquire(at(500))                                    // the slot is taken: refused
		pm.Success(at(501))                                           // ignored
		pm, _ = b.Acquire(at(600))                                    // the t500 probe expired at t530: OPEN until t690
		pm, _ = b.Acquire(at(690))                                    // HALF_OPEN
		pm.Success(at(691))                                           // CLOSED
		pm, _ = b.Acquire(at(700))                                    // CLOSED permit
		pm.Failure(at(701), Failure{Permanent: true, Reason: "auth"}) // parked
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a watchdog, not a wait for state: it only fires on deadlock
		t.Fatal("a breaker method called from onChange deadlocked: onChange ran with the lock held")
	}

	want := []Transition{
		{From: Closed, To: Open, At: at(1), Cause: CauseFailures, Reason: "timeout", Generation: 1, NextProbe: at(21), Level: 1, Trips: 1},
		{From: Open, To: HalfOpen, At: at(21), Cause: CauseCooldown, Generation: 2, Level: 1, Trips: 1},
		{From: HalfOpen, To: Open, At: at(22), Cause: CauseProbeFailed, Reason: "reset", Generation: 3, NextProbe: at(62), Level: 2, Trips: 2},
		{From: Open, To: HalfOpen, At: at(62), Cause: CauseCooldown, Generation: 4, Level: 2, Trips: 2},
		{From: HalfOpen, To: Open, At: at(92), Cause: CauseLeaseExpired, Reason: "probe lease expired", Generation: 5, NextProbe: at(172), Level: 3, Trips: 3},
		{From: Open, To: HalfOpen, At: at(500), Cause: CauseCooldown, Generation: 6, Level: 3, Trips: 3},
		{From: HalfOpen, To: Open, At: at(530), Cause: CauseLeaseExpired, Reason: "probe lease expired", Generation: 7, NextProbe: at(690), Level: 4, Trips: 4},
		{From: Open, To: HalfOpen, At: at(690), Cause: CauseCooldown, Generation: 8, Level: 4, Trips: 4},
		{From: HalfOpen, To: Closed, At: at(691), Cause: CauseProbeOK, Generation: 9, Level: 4, Trips: 4},
		{From: Closed, To: Open, At: at(701), Cause: CausePermanent, Reason: "auth", Generation: 10, NextProbe: at(1601), Level: 4, Trips: 5, Parked: true},
	}
	if len(got) != len(want) {
		for _, g := range got {
			t.Logf("got %s", describe(g.tr))
		}
		t.Fatalf("onChange called %d times, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i].tr
		if !g.At.Equal(w.At) || !g.NextProbe.Equal(w.NextProbe) {
			t.Errorf("transition %d: At, NextProbe = %s, %s, want %s, %s", i, tname(g.At), tname(g.NextProbe), tname(w.At), tname(w.NextProbe))
		}
		g.At, g.NextProbe, w.At, w.NextProbe = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if g != w {
			t.Errorf("transition %d = %+v,\n\t\twant %+v", i, g, w)
		}
	}
	// Where a call made one transition, the callback sees the breaker in the state it entered.
	for _, i := range []int{0, 2, 8, 9} {
		if s := got[i].snap; s.State != want[i].To || s.Generation != want[i].Generation {
			t.Errorf("transition %d: Snapshot from onChange = %v gen %d, want %v gen %d", i, s.State, s.Generation, want[i].To, want[i].Generation)
		}
	}
}

// Callbacks run outside the lock, so they may run concurrently with other calls and with each other.
func TestCallbacksConcurrent(t *testing.T) {
	var (
		mu sync.Mutex
		n  int
		b  *Breaker
	)
	b, err := New(Settings{FailureThreshold: 1, BaseCooldown: unit, MaxCooldown: unit, Jitter: -1}, func(tr Transition) {
		b.Snapshot(tr.At)
		mu.Lock()
		n++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				now := at(g + 2*i)
				if pm, ok := b.Acquire(now); ok {
					pm.Failure(now, Failure{})
				}
			}
		})
	}
	wg.Wait()
	if s := b.Snapshot(at(10_000)); n == 0 || s.Trips == 0 {
		t.Fatalf("onChange called %d times, Snapshot().Trips = %d; want both > 0", n, s.Trips)
	}
}

func TestNewPolicyRejects(t *testing.T) {
	for _, c := range []struct {
		field string
		s     Settings
	}{
		{"FailureThreshold", Settings{FailureThreshold: -1}},
		{"FailureThreshold", Settings{FailureThreshold: MaxFailureThreshold + 1}},
		{"Window", Settings{Window: -unit}},
		{"FailureRatio", Settings{FailureRatio: -0.1}},
		{"FailureRatio", Settings{FailureRatio: 1.01}},
		{"FailureRatio", Settings{FailureRatio: math.NaN()}},
		{"MinVolume", Settings{MinVolume: -1}},
		{"BaseCooldown", Settings{BaseCooldown: -unit}},
		{"MaxCooldown", Settings{MaxCooldown: -unit}},
		{"MaxCooldown", Settings{BaseCooldown: time.Minute, MaxCooldown: 30 * unit}},
		{"Jitter", Settings{Jitter: 1.5}},
		{"Jitter", Settings{Jitter: math.NaN()}},
		{"Jitter", Settings{Jitter: math.Inf(1)}},
		{"ParkFor", Settings{ParkFor: -unit}},
		{"MaxRetryAfter", Settings{MaxRetryAfter: -unit}},
		{"HalfOpenProbes", Settings{HalfOpenProbes: -1}},
		{"HalfOpenProbes", Settings{HalfOpenProbes: MaxHalfOpenProbes + 1}},
		{"SuccessesToClose", Settings{SuccessesToClose: -1}},
		{"ProbeLease", Settings{ProbeLease: -unit}},
	} {
		p, err := NewPolicy(c.s)
		if err == nil || p != nil {
			t.Errorf("NewPolicy(%+v) = %v, %v; want an error naming %s", c.s, p, err, c.field)
			continue
		}
		if want := "breaker: Settings." + c.field + " = "; !strings.Contains(err.Error(), want) {
			t.Errorf("NewPolicy(%+v) = %q, want it to contain %q", c.s, err, want)
		}
		if _, err := New(c.s, nil); err == nil {
			t.Errorf("New(%+v) = nil error, want one naming %s", c.s, c.field)
		}
	}

	// Every bad field is named, not only the first.
	_, err := NewPolicy(Settings{Window: -1, ProbeLease: -1})
	for _, f := range []string{"Settings.Window", "Settings.ProbeLease"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("NewPolicy(Window: -1, ProbeLease: -1) = %v, want it to name %s", err, f)
		}
	}
}

func TestNewPolicyDefaults(t *testing.T) {
	p := mustPolicy(t, Settings{})
	got := p.Settings()
	if got.Rand == nil {
		t.Fatal("Settings().Rand = nil, want the default source")
	}
	if r := got.Rand(); r < 0 || r >= 1 {
		t.Errorf("Settings().Rand() = %v, want in [0, 1)", r)
	}
	got.Rand = nil
	want := Settings{
		FailureThreshold: DefaultFailureThreshold,
		Window:           DefaultWindow,
		MinVolume:        DefaultMinVolume,
		BaseCooldown:     DefaultBaseCooldown,
		MaxCooldown:      DefaultMaxCooldown,
		Jitter:           DefaultJitter,
		ParkFor:          DefaultMaxCooldown,
		MaxRetryAfter:    DefaultMaxRetryAfter,
		StablePeriod:     DefaultStablePeriod,
		HalfOpenProbes:   DefaultHalfOpenProbes,
		SuccessesToClose: DefaultSuccessesToClose,
		ProbeLease:       DefaultProbeLease,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NewPolicy(Settings{}).Settings() = %+v,\n\twant %+v", got, want)
	}
	if p.MaxLevel() != 7 {
		t.Errorf("MaxLevel() = %d, want 7 (20s·2⁶ ≥ 15m)", p.MaxLevel())
	}
	// A BaseCooldown longer than the default MaxCooldown raises the default cap to it.
	if got := mustPolicy(t, Settings{BaseCooldown: time.Hour}).Settings().MaxCooldown; got != time.Hour {
		t.Errorf("NewPolicy(Settings{BaseCooldown: 1h}).Settings().MaxCooldown = %v, want 1h", got)
	}

	// Fields that are set are kept; the ones that mean something special stay special.
	r := func() float64 { return 0.5 }
	set := Settings{
		FailureThreshold: 5, Window: time.Minute, FailureRatio: 1, MinVolume: 3,
		BaseCooldown: unit, MaxCooldown: 10 * time.Minute, Jitter: -0.5, MaxRetryAfter: time.Minute,
		StablePeriod: -1, HalfOpenProbes: MaxHalfOpenProbes, SuccessesToClose: 4, ProbeLease: unit, Rand: r,
	}
	got = mustPolicy(t, set).Settings()
	if got.Rand() != 0.5 {
		t.Error("Settings().Rand is not the one given")
	}
	got.Rand, set.Rand = nil, nil
	want = set
	want.Jitter = 0                 // negative disables jitter
	want.ParkFor = 10 * time.Minute // defaults to MaxCooldown
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NewPolicy(%+v).Settings() = %+v", set, got)
	}
}

func TestIdle(t *testing.T) {
	p := mustPolicy(t, Settings{Jitter: -1, FailureThreshold: 2})
	ttl := 10 * unit
	for _, c := range []struct {
		name  string
		steps func(b *Breaker)
		idle  map[int]bool // Idle(t(n), ttl)
	}{
		{
			name:  "fresh",
			steps: func(b *Breaker) {},
			idle:  map[int]bool{0: true},
		},
		{
			name:  "used",
			steps: func(b *Breaker) { b.Acquire(at(0)) },
			idle:  map[int]bool{0: false, 9: false, 10: true},
		},
		{
			name:  "verdict_counts_as_use",
			steps: func(b *Breaker) { pm, _ := b.Acquire(at(0)); pm.Success(at(5)) },
			idle:  map[int]bool{14: false, 15: true},
		},
		{
			// The lock-free path: a CLOSED permit, and no FailureRatio to count successes.
			name:  "closed_permit_verdict_counts_as_use",
			steps: func(b *Breaker) { pm, _ := b.ClosedPermit(); pm.Success(at(5)) },
			idle:  map[int]bool{14: false, 15: true},
		},
		{
			name:  "late_verdict_does_not_move_use_back",
			steps: func(b *Breaker) { pm, _ := b.Acquire(at(0)); b.Acquire(at(8)); pm.Success(at(3)) },
			idle:  map[int]bool{17: false, 18: true},
		},
		{
			name:  "failure_in_window",
			steps: func(b *Breaker) { pm, _ := b.Acquire(at(0)); pm.Failure(at(0), Failure{}) },
			idle:  map[int]bool{10: false, 59: false, 60: true},
		},
		{
			name: "open_and_half_open",
			steps: func(b *Breaker) {
				for i := range 2 {
					pm, _ := b.Acquire(at(i))
					pm.Failure(at(i), Failure{})
				}
			},
			// OPEN until t21; idle once the cooldown has been over, unused, for the TTL (10s).
			idle: map[int]bool{10: false, 21: false, 30: false, 31: true, 1000: true},
		},
		{
			name: "level_not_yet_decayed",
			steps: func(b *Breaker) {
				for i := range 2 {
					pm, _ := b.Acquire(at(i))
					pm.Failure(at(i), Failure{})
				}
				pm, _ := b.Acquire(at(21))
				pm.Success(at(21)) // CLOSED at t21, level 1
			},
			idle: map[int]bool{100: false, 320: false, 321: true},
		},
		{
			name: "soft_half_pending",
			steps: func(b *Breaker) {
				pm, _ := b.Acquire(at(0))
				pm.Failure(at(0), Failure{Soft: true})
			},
			idle: map[int]bool{10: false, 59: false, 60: true, 3600: true},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			for n, want := range c.idle {
				b := p.NewBreaker(nil)
				c.steps(b)
				if got := b.Idle(at(n), ttl); got != want {
					t.Errorf("Idle(t%d, %v) = %v, want %v", n, ttl, got, want)
				}
			}
		})
	}
}

func TestStateText(t *testing.T) {
	for _, s := range []State{Closed, Open, HalfOpen} {
		b, err := s.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back State = 9
		if err := back.UnmarshalText(b); err != nil || back != s {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", b, back, err, s)
		}
	}
	if got := State(7).String(); got != "state(7)" {
		t.Errorf("State(7).String() = %q, want %q", got, "state(7)")
	}
	var s State
	if err := s.UnmarshalText([]byte("ajar")); err == nil || !strings.HasPrefix(err.Error(), "breaker: ") {
		t.Errorf(`UnmarshalText("ajar") = %v, want a "breaker: " error`, err)
	}
}

func TestSnapshotJSON(t *testing.T) {
	b, err := New(Settings{Jitter: -1, FailureThreshold: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(b.Snapshot(at(0)))
	if want := `{"state":"closed","generation":0,"failures_in_window":0,"trips":0,"level":0}`; string(got) != want {
		t.Errorf("json.Marshal(Snapshot) = %s, want %s", got, want)
	}
	pm, _ := b.Acquire(at(0))
	pm.Failure(at(0), Failure{Reason: "timeout"})
	s := b.Snapshot(at(1))
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Snapshot
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !back.NextProbe.Equal(s.NextProbe) || back.State != Open || back.LastFailure != "timeout" || back.LastCause != CauseFailures {
		t.Errorf("Snapshot round trip: %s decoded as %+v", raw, back)
	}
}
