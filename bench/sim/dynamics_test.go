package sim

import (
	"math/rand/v2"
	"testing"
	"time"
)

// calm is sc with no bans, slow bodies, denials, bursts, outages or churn: the dynamics a test
// does not look at stay out of its answers.
func calm(sc Scenario) Scenario {
	sc = quiet(sc)
	sc.OutagesPerHour, sc.ChurnPerHour = 0, 0
	return sc
}

// TestSlowPairs checks the round-3 world's slow pairs: SlowAll healthy exits slow for every
// origin, SlowSome for SlowSomeOrigins each, and a slow pair's page served in SlowMin..SlowMax
// while a fast pair's comes in LatencyMin..LatencyMax; the round-2 world has none.
func TestSlowPairs(t *testing.T) {
	sc := calm(Round3World(1))
	for o := range sc.Origins {
		sc.Origins[o].Cap = 0 // answers by latency alone
	}
	g := NewTruth(sc)
	byCount := map[int]int{} // exits by how many origins they are slow for
	for e := range sc.Exits {
		n := 0
		for o := range sc.Origins {
			if !g.Slow(e, o) {
				continue
			}
			n++
			if k := g.Kind(e); k != Healthy {
				t.Errorf("exit %d is %v and slow for origin %d: want only healthy exits slow", e, k, o)
			}
		}
		byCount[n]++
	}
	no := len(sc.Origins)
	if byCount[no] != sc.SlowAll || byCount[sc.SlowSomeOrigins] != sc.SlowSome || byCount[0] != sc.Exits-sc.SlowAll-sc.SlowSome {
		t.Errorf("exits by slow origins = %v, want %d slow for all %d, %d for %d, the rest for none", byCount, sc.SlowAll, no, sc.SlowSome, sc.SlowSomeOrigins)
	}
	slow, fast := 0, 0
	for e := range sc.Exits {
		if g.Kind(e) != Healthy {
			continue
		}
		for o := range sc.Origins {
			lo, hi := sc.LatencyMin, sc.LatencyMax
			if g.Slow(e, o) {
				lo, hi = sc.SlowMin, sc.SlowMax
				slow++
			} else {
				fast++
			}
			for i := range 5 {
				r := g.Send(e, Request{Origin: o}, at(i, 7*time.Second))
				if !r.OK() || r.Latency < lo || r.Latency > hi {
					t.Fatalf("Send(%d, origin %d) step %d = %+v, want 200 in %v..%v (slow %v)", e, o, i, r, lo, hi, g.Slow(e, o))
				}
			}
		}
	}
	if slow == 0 || fast == 0 {
		t.Fatalf("%d slow and %d fast healthy pairs: want both", slow, fast)
	}
	if st := NewTruth(Round2World(1)).Stats(); st.SlowPairs != 0 || st.Outages != 0 || st.Churn != 0 || st.SubnetBans != 0 || st.Hardened != 0 {
		t.Errorf("round-2 world Stats = %+v: want no round-3 dynamics", st)
	}
}

// TestOutages checks that during an origin's outage every exit whose proxy reaches it gets a
// 503, the informed oracle's view (Foresee) serves nothing, and ReadyAt is the outage's end for an
// exit that nothing else holds; outages last OutageMin..OutageMax and do not overlap.
func TestOutages(t *testing.T) {
	sc := calm(Round3World(2))
	sc.OutagesPerHour = Round3World(2).OutagesPerHour
	g := NewTruth(sc)
	h := find(t, g, sc.Exits, Healthy)
	n := 0
	for o := range sc.Origins {
		ws := g.Outages(o)
		for i, w := range ws {
			if d := w.To.Sub(w.From); d < sc.OutageMin || d > sc.OutageMax {
				t.Errorf("outage %d of origin %d lasts %v, want %v..%v", i, o, d, sc.OutageMin, sc.OutageMax)
			}
			if i > 0 && w.From.Before(ws[i-1].To) {
				t.Errorf("outage %d of origin %d overlaps the previous", i, o)
			}
			mid := w.From.Add(w.To.Sub(w.From) / 2)
			q := Request{Origin: o}
			for e := range sc.Exits {
				if k := g.Kind(e); k == Healthy && g.Peek(e, q, mid).Answer != Unavailable {
					t.Errorf("Peek(%d, origin %d) in outage %d = %v, want a 503", e, o, i, g.Peek(e, q, mid).Answer)
				}
				if g.Foresee(e, q, mid).Served() {
					t.Errorf("Foresee(%d, origin %d) in outage %d served, want nothing served", e, o, i)
				}
			}
			if got := g.ReadyAt(h, q, mid); !got.Equal(w.To) {
				t.Errorf("ReadyAt(%d, origin %d) in outage %d = %v, want its end %v", h, o, i, got, w.To)
			}
			if r := g.Peek(h, q, w.To); r.Answer == Unavailable {
				t.Errorf("Peek(%d, origin %d) at the end of outage %d = 503, want the origin back", h, o, i)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no outage checked")
	}
}

// TestChurn checks that only exits whose proxy works churn, that a churned exit is refused for
// every origin until the window ends and is served again after, and that ReadyAt says when.
func TestChurn(t *testing.T) {
	sc := calm(Round3World(3))
	sc.ChurnPerHour = Round3World(3).ChurnPerHour
	for o := range sc.Origins {
		sc.Origins[o].Cap = 0
	}
	g := NewTruth(sc)
	n := 0
	for e := range sc.Exits {
		ws := g.Churn(e)
		if k := g.Kind(e); k != Healthy && k != Flaky && len(ws) > 0 {
			t.Errorf("exit %d (%v) churns: want only healthy and flaky exits to", e, k)
		}
		for i, w := range ws {
			if d := w.To.Sub(w.From); d < sc.ChurnMin || d > sc.ChurnMax {
				t.Errorf("churn %d of exit %d lasts %v, want %v..%v", i, e, d, sc.ChurnMin, sc.ChurnMax)
			}
			mid := w.From.Add(w.To.Sub(w.From) / 2)
			for o := range sc.Origins {
				q := Request{Origin: o}
				if r := g.Peek(e, q, mid); r.Answer != Refused {
					t.Errorf("Peek(%d, origin %d) in churn %d = %v, want refused", e, o, i, r.Answer)
				}
				if got := g.ReadyAt(e, q, mid); !got.Equal(w.To) {
					t.Errorf("ReadyAt(%d, origin %d) in churn %d = %v, want its end %v", e, o, i, got, w.To)
				}
				if r := g.Foresee(e, q, w.To); g.Kind(e) == Healthy && !g.Gone(e, w.To) && !r.OK() {
					t.Errorf("Foresee(%d, origin %d) at the end of churn %d = %v, want 200", e, o, i, r.Answer)
				}
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no churn checked")
	}
}

// TestSubnetBans checks the subnets (groups of Subnet exits) and the bans that spread in them:
// every ban a pair drew is one of its bans; every ban of a pair is covered by its own or by one a
// subnet-mate drew for the same origin; a ban that spread bans the mates the origin hears from;
// and about SubnetBanShare of the bans spread.
func TestSubnetBans(t *testing.T) {
	sc := Round3World(4)
	g := NewTruth(sc)
	members := map[int][]int{}
	for e := range sc.Exits {
		members[g.Subnet(e)] = append(members[g.Subnet(e)], e)
	}
	for s, ms := range members {
		if s < 0 || len(ms) != sc.Subnet {
			t.Fatalf("subnet %d has exits %v, want %d", s, ms, sc.Subnet)
		}
	}
	covered := func(ws []Window, w Window) bool {
		for _, x := range ws {
			if !x.From.After(w.From) && !x.To.Before(w.To) {
				return true
			}
		}
		return false
	}
	drawn, spreadSeen := 0, 0
	for e := range sc.Exits {
		for o := range sc.Origins {
			all := g.Bans(e, o)
			for _, w := range g.OwnBans(e, o) {
				drawn++
				if !covered(all, w) {
					t.Errorf("pair (%d, %d): own ban %v not among its bans", e, o, w)
				}
				spread := 0
				for _, m := range members[g.Subnet(e)] {
					if m != e && g.reaches(m*len(sc.Origins)+o) && covered(g.Bans(m, o), w) {
						spread++
					}
				}
				if spread > 0 {
					spreadSeen++
				}
			}
			for i, w := range all {
				mid := w.From.Add(w.To.Sub(w.From) / 2)
				from := covered(g.OwnBans(e, o), Window{mid, mid})
				for _, m := range members[g.Subnet(e)] {
					from = from || covered(g.OwnBans(m, o), Window{mid, mid})
				}
				if !from {
					t.Errorf("pair (%d, %d): ban %d %v drawn by no exit of its subnet", e, o, i, w)
				}
			}
		}
	}
	st := g.Stats()
	if spreadSeen < st.SubnetBans {
		t.Errorf("%d own bans banned a subnet-mate, want at least the %d Stats counts as spread", spreadSeen, st.SubnetBans)
	}
	if share := float64(st.SubnetBans) / float64(drawn); share < sc.SubnetBanShare-0.08 || share > sc.SubnetBanShare+0.08 {
		t.Errorf("%d of %d bans spread (%.2f), want %.2f ± 0.08", st.SubnetBans, drawn, share, sc.SubnetBanShare)
	}
}

// TestHardening checks that a hardening origin's k-th ban of a pair lasts factor^k times what was
// drawn for it, at most the limit, and that a factor of 1 or less draws the episodes unchanged:
// the same draws with and without hardening, since lengthening changes no draw.
func TestHardening(t *testing.T) {
	bands := Round3World(1).BanBands
	const d = 12 * time.Hour
	draw := func(factor float64, limit time.Duration) []Window {
		return hardenedEpisodes(rand.New(rand.NewPCG(7, 7)), d, 1, bands, factor, limit)
	}
	plain := draw(0, 0)
	one := draw(1, time.Hour)
	same := len(one) == len(plain)
	for k := range min(len(one), len(plain)) {
		same = same && one[k].From.Equal(plain[k].From) && one[k].To.Equal(plain[k].To)
	}
	if !same {
		t.Errorf("factor 1: episodes %v, want episodes' %v", one, plain)
	}
	limit := 5 * time.Hour
	hard := draw(2, limit)
	if len(hard) < 3 {
		t.Fatalf("%d hardened episodes in %v, want at least 3", len(hard), d)
	}
	for k, w := range hard {
		base := plain[k].To.Sub(plain[k].From)
		want := min(base*time.Duration(1<<k), limit)
		if got := w.To.Sub(w.From); got != want {
			t.Errorf("episode %d lasts %v, want %v (drawn %v × 2^%d, at most %v)", k, got, want, base, k, limit)
		}
		if k > 0 && w.From.Before(hard[k-1].To) {
			t.Errorf("episode %d overlaps the previous", k)
		}
	}

	sc := Round3World(5)
	g := NewTruth(sc)
	st, hardening := g.Stats(), 0
	for _, o := range sc.Origins {
		if o.Hardening > 1 {
			hardening++
		}
	}
	if hardening != 3 || st.Hardened == 0 {
		t.Errorf("round-3 world: %d hardening origins, %d bans lengthened; want 3 and some", hardening, st.Hardened)
	}
}

// TestRound3WorldKeepsRound2 checks that the round-3 world of a seed is the round-2 world of that
// seed with the dynamics added: the same exits and origin traits, hardening and soft bans aside.
func TestRound3WorldKeepsRound2(t *testing.T) {
	r2, r3 := Round2World(3), Round3World(3)
	g2, g3 := NewTruth(r2), NewTruth(r3)
	for e := range r2.Exits {
		if g2.Kind(e) != g3.Kind(e) {
			t.Errorf("exit %d: %v in round 2, %v in round 3", e, g2.Kind(e), g3.Kind(e))
		}
		for o := range r2.Origins {
			if g2.Denied(e, o) != g3.Denied(e, o) {
				t.Errorf("pair (%d, %d): denied %v in round 2, %v in round 3", e, o, g2.Denied(e, o), g3.Denied(e, o))
			}
		}
	}
	for o := range r2.Origins {
		a, b := r2.Origins[o], r3.Origins[o]
		b.Hardening, b.SoftBans = 0, false
		if a != b {
			t.Errorf("origin %d: %v in round 2, %v in round 3", o, a, b)
		}
	}
}

// slowWatch counts the attempts an oracle sends through a slow pair, and those it sends so while a
// fast, healthy exit was ready for the request (by the hidden state, at the pick).
type slowWatch struct{ slow, bad int }

// watched is the oracle st whose choices sw counts.
func watched(st Strategy, sw *slowWatch) Strategy {
	return Strategy{Name: st.Name, New: func(env *Env) (Router, func(), error) {
		rt, closeFn, err := st.New(env)
		es := rt.(*exitStrategy)
		choose := es.choose
		es.choose = func(q Request, now time.Time) (int, func(bool), time.Duration) {
			e, done, in := choose(q, now)
			if e < 0 || !env.Truth.Slow(e, q.Origin) {
				return e, done, in
			}
			sw.slow++
			for f := range env.Exits {
				if env.Truth.Kind(f) == Healthy && !env.Truth.Slow(f, q.Origin) && env.Truth.Foresee(f, q, now).Served() {
					sw.bad++
					break
				}
			}
			return e, done, in
		}
		return es, closeFn, err
	}}
}

// TestOraclesWeighSlowPairs checks that the oracles send through a slow pair only when no fast,
// healthy exit is ready, and then only where worker time does not bind: in a world where every
// origin caps every exit (round 1's) they use slow pairs, in the round-3 world, whose uncapped
// origins take all the worker time there is, they do not.
func TestOraclesWeighSlowPairs(t *testing.T) {
	capped := smallRound1()
	capped.SlowAll, capped.SlowSome, capped.SlowSomeOrigins = 2, 2, 1
	capped.SlowMin, capped.SlowMax = 3*time.Second, 6*time.Second
	for _, tc := range []struct {
		sc       Scenario
		wantSlow bool
	}{{capped, true}, {smallRound3(1), false}, {smallRound3(2), false}} {
		for _, st := range []Strategy{InformedOracle(), Oracle()} {
			var sw slowWatch
			if _, err := Run(tc.sc, watched(st, &sw)); err != nil {
				t.Fatal(err)
			}
			if sw.bad > 0 {
				t.Errorf("%s seed %d, %s: %d attempts through a slow pair while a fast one was ready", tc.sc.Name, tc.sc.Seed, st.Name, sw.bad)
			}
			if (sw.slow > 0) != tc.wantSlow {
				t.Errorf("%s seed %d, %s: %d attempts through slow pairs, want some %v", tc.sc.Name, tc.sc.Seed, st.Name, sw.slow, tc.wantSlow)
			}
		}
	}
}
