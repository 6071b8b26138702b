package sim

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// smallRound1 is a short, small round-1 world: the race detector makes the simulation slow.
func smallRound1() Scenario {
	sc := Round1World()
	sc.Duration, sc.Workers, sc.Exits, sc.Origins = 20*time.Minute, 8, 12, sc.Origins[:3]
	sc.Dead, sc.Auth, sc.Flaky, sc.BansPerHour = 1, 1, 2, 2
	return sc
}

// smallRound2 is a short, small round-2 world with every kind of episode frequent enough to
// happen in it.
func smallRound2(seed uint64) Scenario {
	sc := Round2World(seed)
	sc.Duration, sc.Workers, sc.Exits = 20*time.Minute, 8, 14
	sc.Dead, sc.Auth, sc.Flaky, sc.Denials = 1, 1, 2, 2
	sc.BansPerHour, sc.StallsPerHour, sc.BurstsPerHour = 2, 2, 6
	return sc
}

// smallRound3 is a short, small round-3 world with every kind of episode frequent enough to
// happen in it, slow pairs, outages and churn included.
func smallRound3(seed uint64) Scenario {
	sc := Round3World(seed)
	sc.Duration, sc.Workers, sc.Exits = 20*time.Minute, 8, 16
	sc.Dead, sc.Auth, sc.Flaky, sc.Denials, sc.SlowAll, sc.SlowSome = 1, 1, 2, 2, 2, 2
	sc.BansPerHour, sc.StallsPerHour, sc.BurstsPerHour, sc.OutagesPerHour, sc.ChurnPerHour = 2, 2, 6, 2, 2
	return sc
}

func TestRunDeterministic(t *testing.T) {
	for _, sc := range []Scenario{smallRound1(), smallRound2(1), smallRound3(1)} {
		for _, st := range Strategies() {
			a, err := Run(sc, st)
			if err != nil {
				t.Fatal(err)
			}
			b, err := Run(sc, st)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("%s, %s: two runs differ:\n%+v\n%+v", sc.Name, st.Name, a, b)
			}
			if a.Attempts == 0 {
				t.Errorf("%s, %s: no attempts", sc.Name, st.Name)
			}
		}
	}
}

// TestRunAllMatchesRun checks that runs in parallel give the figures each gives alone.
func TestRunAllMatchesRun(t *testing.T) {
	jobs := []Job{
		{smallRound2(1), Ours()}, {smallRound2(2), Ours()}, {smallRound2(1), PerPairBreaker()}, {smallRound1(), Oracle()},
	}
	got, err := RunAll(jobs, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		want, err := Run(j.Scenario, j.Strategy)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got[i], want) {
			t.Errorf("job %d (%s seed %d, %s): RunAll = %+v, want %+v (Run)", i, j.Scenario.Name, j.Scenario.Seed, j.Strategy.Name, got[i], want)
		}
	}
}

func TestOracleNeverFails(t *testing.T) {
	for _, sc := range []Scenario{smallRound1(), smallRound2(1), smallRound2(2), smallRound3(1)} {
		m, err := Run(sc, Oracle())
		if err != nil {
			t.Fatal(err)
		}
		if m.Wasted() != 0 || m.Successes == 0 {
			t.Errorf("%s seed %d: oracle: %d successes, %d wasted; want some and none", sc.Name, sc.Seed, m.Successes, m.Wasted())
		}
	}
}

// TestOracleIsUpperBound checks that no strategy gets more done than the clairvoyant oracle, the
// informed one included, and that the informed oracle gets more done than every other strategy,
// in worlds with every kind of episode.
func TestOracleIsUpperBound(t *testing.T) {
	for _, sc := range []Scenario{smallRound2(3), smallRound2(4), smallRound1(), smallRound3(2), smallRound3(3)} {
		ms, err := RunAll([]Job{{sc, Oracle()}, {sc, InformedOracle()}, {sc, Ours()}, {sc, RoundRobin()}, {sc, PerPairBreaker()}}, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms[1:] {
			if m.Successes > ms[0].Successes {
				t.Errorf("%s seed %d: %s: %d successes, more than the clairvoyant oracle's %d", sc.Name, sc.Seed, m.Strategy, m.Successes, ms[0].Successes)
			}
		}
		for _, m := range ms[2:] {
			if m.Successes >= ms[1].Successes {
				t.Errorf("%s seed %d: %s: %d successes, at least the informed oracle's %d", sc.Name, sc.Seed, m.Strategy, m.Successes, ms[1].Successes)
			}
		}
		if sc.Name != "round-1 world" && (ms[0].Site403 == 0 || ms[1].Site403 == 0) {
			t.Errorf("%s seed %d: oracles: no site's 403: the forbidden path was never asked for", sc.Name, sc.Seed)
		}
	}
}

// TestInformedOracleWastesOnlyTimeouts checks that the informed oracle, which knows the hidden state
// but not the coin flips, provokes no 429, ban page, 503, proxy denial or slow body and sends
// nothing to a churned exit: its only waste is flaky exits' timeouts.
func TestInformedOracleWastesOnlyTimeouts(t *testing.T) {
	for _, sc := range []Scenario{smallRound1(), smallRound2(1), smallRound2(2), smallRound3(1), smallRound3(4)} {
		m, err := Run(sc, InformedOracle())
		if err != nil {
			t.Fatal(err)
		}
		if m.Successes == 0 || m.Wasted() != m.Timeouts {
			t.Errorf("%s seed %d: informed oracle: %d successes, %d wasted of which %d timeouts; want some, and only timeouts", sc.Name, sc.Seed, m.Successes, m.Wasted(), m.Timeouts)
		}
	}
}

func TestMetricsAdd(t *testing.T) {
	a := Metrics{Attempts: 10, Successes: 6, Site403: 1, RateLimited: 3, Recovery: []time.Duration{time.Second}, Unrecovered: 1, Unmet: 2, WorkerTime: time.Hour}
	b := Metrics{Attempts: 5, Successes: 5, Recovery: []time.Duration{time.Minute}, Unmet: 1, WorkerTime: time.Hour}
	a.Add(b)
	if a.Attempts != 15 || a.Successes != 11 || a.Wasted() != 3 || len(a.Recovery) != 2 || a.Unrecovered != 1 || a.Unmet != 3 || a.WorkerTime != 2*time.Hour {
		t.Errorf("Add = %+v, want the sums", a)
	}
}

func TestTargets(t *testing.T) {
	sc := Round2World(1)
	oracle := Metrics{Successes: 1000}
	good := Metrics{Successes: 900, Attempts: 900 + 21127, RateLimited: 12042, Recovery: []time.Duration{time.Minute}}
	for i, tg := range Targets(sc, good, oracle) {
		if !tg.Met {
			t.Errorf("target %d (%s) = %s missed, want met", i, tg.Name, tg.Got)
		}
	}
	bad := Metrics{Successes: 899, Attempts: 899 + 21128, RateLimited: 12043, Recovery: []time.Duration{3 * time.Minute}, Unrecovered: 1}
	for i, tg := range Targets(sc, bad, oracle) {
		if tg.Met {
			t.Errorf("target %d (%s) = %s met, want missed", i, tg.Name, tg.Got)
		}
	}
}

// failingRouter sends its first request, then fails with err.
type failingRouter struct {
	env  *Env
	err  error
	sent bool
}

func (r *failingRouter) Route(w int, q Request) error {
	if r.sent {
		return r.err
	}
	r.sent = true
	r.env.Send(w, 0, q)
	return nil
}

// TestRunStopsOnRouterError checks that an error a Router should not return ends the run with
// that error, instead of a worker spinning at one instant.
func TestRunStopsOnRouterError(t *testing.T) {
	boom := errors.New("boom")
	st := Strategy{Name: "failing", New: func(env *Env) (Router, func(), error) {
		return &failingRouter{env: env, err: boom}, nil, nil
	}}
	if _, err := Run(smallRound1(), st); !errors.Is(err, boom) {
		t.Errorf("Run(failing router) error = %v, want %v", err, boom)
	}
}
