package probe_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestStateFrom: permanent exit failures park the exit, failures with a Retry-After open the pair
// for it (the longer of two), everything else is left out.
func TestStateFrom(t *testing.T) {
	r := func(exit, origin string, res probe.Result) probe.Result {
		res.Exit, res.Origin, res.Target = exit, origin, "http://"+origin+"/"
		return res
	}
	auth := probe.Result{Status: 407, Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	customPark := probe.Result{Status: 451, Outcome: pool.Permanent, Scope: pool.ScopePair, Class: "legal"}
	rep := probe.NewReport([]probe.Result{
		r("a", "x.example", auth),
		r("a", "y.example", auth),
		r("b", "x.example", throttled(10, 30*time.Second)),
		r("b", "x.example", throttled(10, 90*time.Second)),
		r("b", "y.example", throttled(10, 0)), // no Retry-After: a fresh breaker counts it
		r("c", "x.example", blocked(10)),      // no Retry-After either
		r("c", "y.example", customPark),
		r("d", "x.example", ok(10)),
		r("e", "x.example", throttled(10, 48*time.Hour)), // capped
	}, probe.Policy{})
	t0 := goldenT0
	st := probe.StateFrom(rep, t0, probe.StateSettings{})
	want := []pool.SavedBreaker{
		{Scope: pool.ScopePair, Exit: "b", Origin: "x.example", Saved: breaker.Saved{State: breaker.Open, Trips: 1, NextProbe: t0.Add(90 * time.Second), LastFailure: "rate_limited", Changed: t0}},
		{Scope: pool.ScopePair, Exit: "c", Origin: "y.example", Saved: breaker.Saved{State: breaker.Open, Parked: true, NextProbe: t0.Add(probe.DefaultParkFor), LastFailure: "legal", Changed: t0}},
		{Scope: pool.ScopePair, Exit: "e", Origin: "x.example", Saved: breaker.Saved{State: breaker.Open, Trips: 1, NextProbe: t0.Add(time.Hour), LastFailure: "rate_limited", Changed: t0}},
		{Scope: pool.ScopeExit, Exit: "a", Saved: breaker.Saved{State: breaker.Open, Parked: true, NextProbe: t0.Add(probe.DefaultParkFor), LastFailure: "proxy_auth", Changed: t0}},
	}
	if st.Version != pool.SavedStateVersion || !st.Saved.Equal(t0) || len(st.Breakers) != len(want) {
		t.Fatalf("StateFrom = %+v, want version %d at %v with %d breakers", st, pool.SavedStateVersion, t0, len(want))
	}
	for i := range want {
		if g, w := st.Breakers[i], want[i]; g.Scope != w.Scope || g.Exit != w.Exit || g.Origin != w.Origin || g.Saved != w.Saved {
			t.Errorf("StateFrom: breaker %d = %+v, want %+v", i, g, w)
		}
	}
	if st := probe.StateFrom(rep, t0, probe.StateSettings{ParkFor: time.Minute}); !st.Breakers[3].NextProbe.Equal(t0.Add(time.Minute)) {
		t.Errorf("ParkFor 1m: exit a parked until %v", st.Breakers[3].NextProbe)
	}
}

// TestStateWarmStartsAPool: a probe finds one exit rejecting its credentials, one refused and
// one throttled by the origin for 120 s; a Pool restored from StateFrom (through JSON, as
// cmd/proxyprobe writes it) sends nothing through any of them, parks the first two for 15 min and
// lets the throttled pair be probed after exactly 120 s.
func TestStateWarmStartsAPool(t *testing.T) {
	reg := &proxytest.Registry{}
	origin := startOrigin(t, false, reg, map[string]behaviour{"throttle": throttle(120)})
	good := startProxy(t, proxytest.Config{Name: "good", Registry: reg})
	auth := startProxy(t, proxytest.Config{Name: "auth", Registry: reg, User: "alice", Pass: "right-pass"})
	thr := startProxy(t, proxytest.Config{Name: "throttle", Registry: reg})
	exits := []*pool.Exit{
		exitVia(t, good.URL(), "good"),
		exitVia(t, auth.URLWithCredentials("alice", "wrong-pass"), "auth"),
		exitVia(t, closedProxy(t), "refused"),
		exitVia(t, thr.URL(), "throttled"),
	}
	p, err := probe.New(probe.Config{Exits: exits, Targets: []string{origin.URL + "/"}, Deadline: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	rep := p.Run(context.Background())
	t0 := goldenT0
	data, err := json.Marshal(probe.StateFrom(rep, t0, probe.StateSettings{}))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "pass") {
		t.Fatalf("the state shows a password: %s", data)
	}
	var st pool.SavedState
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}

	fake := clock.NewFake(t0)
	pl, err := pool.New(pool.WithExits(exits...), pool.WithClock(fake),
		pool.WithPairSettings(breaker.Settings{Jitter: -1}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pl.Close)
	tr, err := transport.New(pl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	applied, skipped, err := pl.Restore(fake.Now(), st)
	if err != nil || applied != 3 || skipped != 0 {
		t.Fatalf("Restore = %d applied, %d skipped, %v; want 3, 0, nil (state %s)", applied, skipped, err, data)
	}
	parked := map[string]bool{}
	for _, e := range pl.Snapshot().Exits {
		parked[e.Exit] = e.Breaker.Parked
	}
	if !parked["auth"] || !parked["refused"] || parked["good"] || parked["throttled"] {
		t.Errorf("parked after restore = %v, want auth and refused only", parked)
	}
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for i := range 12 {
		resp, err := client.Get(origin.URL + "/")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		if e := transport.ExitFromResponse(resp); e == nil || e.Label() != "good" {
			t.Fatalf("request %d went through %v, want good: the restored breakers steer", i, e)
		}
	}
	// A request pinned to the throttled exit is refused until its Retry-After has passed.
	pinned := func() error {
		req, _ := http.NewRequestWithContext(transport.ContextWithExit(context.Background(), "throttled"), http.MethodGet, origin.URL+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	fake.Set(t0.Add(119 * time.Second))
	if err := pinned(); !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Errorf("pinned to the throttled exit at +119 s: err = %v, want ErrNoHealthyExit", err)
	}
	fake.Set(t0.Add(120 * time.Second))
	originKey := transport.OriginHost(mustURL(t, origin.URL))
	if !dueHas(pl.DueProbes(fake.Now()), pool.ScopePair, "throttled", originKey) {
		t.Errorf("DueProbes at +120 s = %v, want (throttled, %s)", pl.DueProbes(fake.Now()), originKey)
	}
	fake.Set(t0.Add(probe.DefaultParkFor))
	due := pl.DueProbes(fake.Now())
	if !dueHas(due, pool.ScopeExit, "auth", "") || !dueHas(due, pool.ScopeExit, "refused", "") {
		t.Errorf("DueProbes after the park = %v, want the auth and refused exits", due)
	}
}

func dueHas(ts []pool.ProbeTarget, scope pool.Scope, exit, origin string) bool {
	for _, tg := range ts {
		label := ""
		if tg.Exit != nil {
			label = tg.Exit.Label()
		}
		if tg.Scope == scope && label == exit && tg.Origin == origin {
			return true
		}
	}
	return false
}
