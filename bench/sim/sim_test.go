package sim

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func smallScenario() Scenario {
	sc := DefaultScenario()
	sc.Duration, sc.Workers, sc.Exits, sc.Origins = 20*time.Minute, 8, 12, 3
	sc.Dead, sc.Auth, sc.Flaky, sc.BansPerHour = 1, 1, 2, 2
	return sc
}

func TestTruthKinds(t *testing.T) {
	sc := DefaultScenario()
	g := NewTruth(sc)
	got := map[Kind]int{}
	for e := range sc.Exits {
		got[g.Kind(e)]++
	}
	want := map[Kind]int{Dead: sc.Dead, AuthFail: sc.Auth, Flaky: sc.Flaky, Healthy: sc.Exits - sc.Dead - sc.Auth - sc.Flaky}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("kinds = %v, want %v", got, want)
	}
}

// find returns the first exit of kind k.
func find(t *testing.T, g *Truth, n int, k Kind) int {
	t.Helper()
	for e := range n {
		if g.Kind(e) == k {
			return e
		}
	}
	t.Fatalf("no %v exit", k)
	return -1
}

func TestTruthAnswers(t *testing.T) {
	sc := DefaultScenario()
	sc.BansPerHour = 0
	g := NewTruth(sc)
	t0 := Epoch.Add(10 * time.Second)
	if r := g.Send(find(t, g, sc.Exits, Dead), 0, t0); r.Err != ErrRefused {
		t.Errorf("Send(dead) = %+v, want refused", r)
	}
	if r := g.Send(find(t, g, sc.Exits, AuthFail), 0, t0); r.Status != 407 {
		t.Errorf("Send(auth) = %+v, want 407", r)
	}
	h := find(t, g, sc.Exits, Healthy)
	for i := range sc.RatePerMinute {
		now := t0.Add(time.Duration(i) * time.Second)
		if r := g.Send(h, 1, now); !r.OK() || r.Latency < sc.LatencyMin || r.Latency > sc.LatencyMax {
			t.Fatalf("step %d: Send(healthy) = %+v, want 200 within latency bounds", i, r)
		}
	}
	t1 := t0.Add(20 * time.Second) // 30 s into the first minute
	if r := g.Peek(h, 1, t1); r.Status != 429 || r.RetryAfter != 30*time.Second {
		t.Errorf("Peek(capped) = %+v, want 429 Retry-After 30s", r)
	}
	if r := g.Send(h, 2, t1); !r.OK() {
		t.Errorf("Send(other origin) = %+v, want 200: caps are per pair", r)
	}
	if r := g.Send(h, 1, Epoch.Add(time.Minute)); !r.OK() {
		t.Errorf("Send(next minute) = %+v, want 200", r)
	}
}

func TestTruthPeekMatchesSend(t *testing.T) {
	sc := DefaultScenario()
	g := NewTruth(sc)
	for i := range 2000 {
		e, o := i%sc.Exits, i%sc.Origins
		now := Epoch.Add(time.Duration(i) * 997 * time.Millisecond)
		if p, s := g.Peek(e, o, now), g.Send(e, o, now); p != s {
			t.Fatalf("step %d: Peek = %+v, Send = %+v", i, p, s)
		}
	}
}

func TestTruthFlakyRate(t *testing.T) {
	sc := DefaultScenario()
	sc.BansPerHour = 0
	g := NewTruth(sc)
	f := find(t, g, sc.Exits, Flaky)
	timeouts := 0
	const n = 10000
	for i := range n {
		if r := g.Peek(f, i%sc.Origins, Epoch.Add(time.Duration(i)*time.Millisecond)); r.Err == ErrTimeout {
			if r.Latency != sc.Timeout {
				t.Fatalf("step %d: timeout latency %v, want %v", i, r.Latency, sc.Timeout)
			}
			timeouts++
		}
	}
	if got := float64(timeouts) / n; got < sc.FlakyTimeout-0.03 || got > sc.FlakyTimeout+0.03 {
		t.Errorf("flaky timeout rate = %.3f, want %.2f ± 0.03", got, sc.FlakyTimeout)
	}
}

func TestTruthBans(t *testing.T) {
	sc := DefaultScenario()
	g := NewTruth(sc)
	episodes := 0
	for e := range sc.Exits {
		for o := range sc.Origins {
			bans := g.Bans(e, o)
			if k := g.Kind(e); (k == Dead || k == AuthFail) && len(bans) > 0 {
				t.Errorf("exit %d (%v) has bans", e, k)
			}
			for i, w := range bans {
				if d := w.To.Sub(w.From); d < sc.BanMin || d > sc.BanMax {
					t.Errorf("ban %d of (%d, %d) lasts %v", i, e, o, d)
				}
				if i > 0 && w.From.Before(bans[i-1].To) {
					t.Errorf("ban %d of (%d, %d) overlaps the previous", i, e, o)
				}
				mid := w.From.Add(w.To.Sub(w.From) / 2)
				if !g.Banned(e, o, mid) || g.Banned(e, o, w.To) {
					t.Errorf("Banned around ban %d of (%d, %d) wrong", i, e, o)
				}
				if r := g.Peek(e, o, mid); g.Kind(e) == Healthy && r.Status != 403 {
					t.Errorf("Peek(banned) = %+v, want 403", r)
				}
				episodes++
			}
		}
	}
	// 34 exits × 8 origins × 3 h at 0.5/h, less the time spent banned: roughly 300 episodes.
	if episodes < 150 || episodes > 450 {
		t.Errorf("%d ban episodes, want about 300", episodes)
	}
}

func TestRunDeterministic(t *testing.T) {
	sc := smallScenario()
	for _, st := range Strategies(sc) {
		a, err := Run(sc, st)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Run(sc, st)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: two runs differ:\n%+v\n%+v", st.Name, a, b)
		}
		if a.Attempts == 0 {
			t.Errorf("%s: no attempts", st.Name)
		}
	}
}

func TestOracleNeverFails(t *testing.T) {
	m, err := Run(smallScenario(), Oracle())
	if err != nil {
		t.Fatal(err)
	}
	if m.Wasted() != 0 || m.Successes == 0 {
		t.Errorf("oracle: %d successes, %d wasted; want some and none", m.Successes, m.Wasted())
	}
}

// failingRouter sends its first request, then fails with err.
type failingRouter struct {
	env  *Env
	err  error
	sent bool
}

func (r *failingRouter) Route(w, o int) error {
	if r.sent {
		return r.err
	}
	r.sent = true
	r.env.Send(w, 0, o)
	return nil
}

// TestRunStopsOnRouterError checks that an error a Router should not return ends the run with
// that error, instead of a worker spinning at one instant.
func TestRunStopsOnRouterError(t *testing.T) {
	boom := errors.New("boom")
	st := Strategy{Name: "failing", New: func(env *Env) (Router, func(), error) {
		return &failingRouter{env: env, err: boom}, nil, nil
	}}
	if _, err := Run(smallScenario(), st); !errors.Is(err, boom) {
		t.Errorf("Run(failing router) error = %v, want %v", err, boom)
	}
}
