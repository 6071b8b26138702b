package sim

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestPlainBanIsThePairs checks that a plain-403 ban answers the banned pair only: at the same
// instant, another exit is served by the same origin.
func TestPlainBanIsThePairs(t *testing.T) {
	sc := Round2World(1)
	sc.StallsPerHour, sc.Denials = 0, 0
	g := NewTruth(sc)
	checked := 0
	for o, org := range sc.Origins {
		if !org.PlainBans {
			continue
		}
		for e := range sc.Exits {
			if g.Kind(e) != Healthy {
				continue
			}
			for _, w := range g.Bans(e, o) {
				mid := w.From.Add(w.To.Sub(w.From) / 2)
				served := -1
				for e2 := range sc.Exits {
					if g.Kind(e2) == Healthy && !g.Banned(e2, o, mid) {
						served = e2
						break
					}
				}
				if served < 0 {
					continue
				}
				q := Request{Origin: o}
				if r := g.Peek(e, q, mid); r.Answer != Banned403 {
					t.Errorf("Peek(banned pair (%d, %d)) = %+v, want a plain 403", e, o, r)
				}
				if r := g.Peek(served, q, mid); !r.OK() && r.Answer != RateLimited {
					t.Errorf("Peek(unbanned pair (%d, %d)) = %+v, want 200 (or 429)", served, o, r)
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no plain-403 ban checked")
	}
}

// TestSite403 checks that the path an origin forbids answers a plain 403 to every exit the
// origin hears from, banned or not aside, and that it is that origin's alone.
func TestSite403(t *testing.T) {
	sc := quiet(Round2World(1))
	g := NewTruth(sc)
	forbidding := -1
	for o, org := range sc.Origins {
		if org.ForbiddenShare > 0 {
			if forbidding >= 0 {
				t.Fatalf("origins %d and %d forbid a path, want one", forbidding, o)
			}
			forbidding = o
			if !org.PlainBans {
				t.Errorf("origin %d forbids a path but bans with a challenge: its 403s would tell a ban apart", o)
			}
		}
	}
	if forbidding < 0 {
		t.Fatal("no origin forbids a path")
	}
	now := Epoch.Add(time.Hour)
	q := Request{Origin: forbidding, Forbidden: true}
	for e := range sc.Exits {
		r := g.Send(e, q, now)
		switch g.Kind(e) {
		case Healthy:
			if r.Answer != Site403 || !r.Served() || r.OK() {
				t.Errorf("Send(exit %d, forbidden path) = %+v, want the site's 403, served, not OK", e, r)
			}
		case Flaky:
			if r.Answer != Site403 && r.Answer != Timeout {
				t.Errorf("Send(flaky exit %d, forbidden path) = %+v, want the site's 403 or a timeout", e, r)
			}
		}
	}
	h := find(t, g, sc.Exits, Healthy)
	if r := g.Send(h, Request{Origin: forbidding}, now.Add(time.Minute)); !r.OK() {
		t.Errorf("Send(its other paths) = %+v, want 200", r)
	}
	// The draw asks for the forbidden path at about its share, and only on its origin.
	r := rand.New(rand.NewPCG(3, 4))
	asked, forb := 0, 0
	for i := range 60000 {
		q := g.Draw(r, at(i, time.Second))
		if q.Forbidden && q.Origin != forbidding {
			t.Fatalf("draw %d: %+v, a forbidden path on an origin without one", i, q)
		}
		if q.Origin == forbidding {
			asked++
			if q.Forbidden {
				forb++
			}
		}
	}
	share := sc.Origins[forbidding].ForbiddenShare
	if got := float64(forb) / float64(asked); got < share-0.02 || got > share+0.02 {
		t.Errorf("forbidden path share = %.3f, want %.2f ± 0.02", got, share)
	}
}

// TestProxyDenials checks that each denying exit's proxy refuses exactly one origin, on every
// attempt, and serves the others.
func TestProxyDenials(t *testing.T) {
	sc := Round2World(2)
	sc.BansPerHour, sc.StallsPerHour = 0, 0
	g := NewTruth(sc)
	exits := map[int]int{}
	for e := range sc.Exits {
		for o := range sc.Origins {
			if !g.Denied(e, o) {
				continue
			}
			exits[e]++
			if g.Kind(e) != Healthy {
				t.Errorf("exit %d (%v) denies origin %d: want a healthy exit", e, g.Kind(e), o)
			}
			for i := range 5 {
				now := at(i, 37*time.Minute)
				if r := g.Send(e, Request{Origin: o}, now); r.Answer != ProxyDenied || r.HTTPS != sc.Origins[o].HTTPS {
					t.Errorf("step %d: Send(denied pair (%d, %d)) = %+v, want a proxy denial", i, e, o, r)
				}
				other := (o + 1) % len(sc.Origins)
				if r := g.Send(e, Request{Origin: other}, now); !r.OK() {
					t.Errorf("step %d: Send(exit %d, origin %d) = %+v, want 200: the proxy serves other origins", i, e, other, r)
				}
			}
		}
	}
	if len(exits) != sc.Denials {
		t.Errorf("%d exits deny an origin, want %d", len(exits), sc.Denials)
	}
	for e, n := range exits {
		if n != 1 {
			t.Errorf("exit %d denies %d origins, want 1", e, n)
		}
	}
}

// TestSlowBodies checks that during a slow-body episode a pair's 200s become slow bodies that
// hold the worker for the stall timeout more, that other answers are unchanged, and that the
// episode ends.
func TestSlowBodies(t *testing.T) {
	sc := Round2World(1)
	sc.BansPerHour, sc.Denials = 0, 0
	for o := range sc.Origins {
		sc.Origins[o].Cap = 2
		sc.Origins[o].Sliding = false
	}
	g := NewTruth(sc)
	checked := 0
	for e := range sc.Exits {
		if g.Kind(e) != Healthy {
			continue
		}
		for o := range sc.Origins {
			ws := g.Stalls(e, o)
			for k, w := range ws {
				if d := w.To.Sub(w.From); d < sc.StallMin || d > sc.StallMax {
					t.Errorf("slow-body episode of (%d, %d) lasts %v", e, o, d)
				}
				if !w.To.Before(Epoch.Add(sc.Duration)) || w.From.Second() > 50 {
					continue // the checks below need the episode's minute and the time after it
				}
				q := Request{Origin: o}
				for i := range 3 { // the cap is 2 a clock minute
					r := g.Send(e, q, w.From.Add(time.Duration(i)*time.Second))
					switch {
					case i < 2 && (r.Answer != SlowBody || r.Latency < sc.StallTimeout+sc.LatencyMin || r.Latency > sc.StallTimeout+sc.LatencyMax):
						t.Errorf("step %d: Send(slow pair (%d, %d)) = %+v, want a slow body held %v more", i, e, o, r, sc.StallTimeout)
					case i == 2 && r.Answer != RateLimited:
						t.Errorf("step %d: Send(slow pair (%d, %d), over its cap) = %+v, want 429: a small answer comes whole", i, e, o, r)
					}
				}
				// A minute after the episode, unless the next one is near: its minute's count aside.
				if after := w.To.Add(time.Minute); k+1 == len(ws) || ws[k+1].From.After(after.Add(2*time.Minute)) {
					if r := g.Send(e, q, after); !r.OK() {
						t.Errorf("Send(pair (%d, %d) after its episode) = %+v, want 200", e, o, r)
					}
				}
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("no slow-body episode checked")
	}
}

// TestBursts checks that during a burst the burst's origin gets about BurstShare of the requests
// more, and that outside bursts the draw is uniform.
func TestBursts(t *testing.T) {
	sc := Round2World(1)
	g := NewTruth(sc)
	bs := g.Bursts()
	if len(bs) < 2 {
		t.Fatalf("%d bursts in %v, want about %.0f", len(bs), sc.Duration, sc.BurstsPerHour*sc.Duration.Hours())
	}
	for i, b := range bs {
		if d := b.To.Sub(b.From); d < sc.BurstMin || d > sc.BurstMax {
			t.Errorf("burst %d lasts %v", i, d)
		}
		if i > 0 && b.From.Before(bs[i-1].To) {
			t.Errorf("burst %d overlaps the previous", i)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	n := len(sc.Origins)
	const draws = 20000
	in, out := 0, 0
	b := bs[0]
	quietAt := b.From.Add(-time.Second)
	if len(bs) > 1 && !b.From.After(Epoch) {
		quietAt = b.To.Add(time.Second)
	}
	for range draws {
		if g.Draw(r, b.From).Origin == b.Origin {
			in++
		}
		if g.Draw(r, quietAt).Origin == b.Origin {
			out++
		}
	}
	wantIn := sc.BurstShare + (1-sc.BurstShare)/float64(n)
	if got := float64(in) / draws; got < wantIn-0.02 || got > wantIn+0.02 {
		t.Errorf("burst origin's share during its burst = %.3f, want %.3f ± 0.02", got, wantIn)
	}
	if got := float64(out) / draws; got < 1/float64(n)-0.02 || got > 1/float64(n)+0.02 {
		t.Errorf("its share outside bursts = %.3f, want %.3f ± 0.02", got, 1/float64(n))
	}
}

// TestRound2WorldOrigins checks the traits the seed deals to the round-2 world's origins.
func TestRound2WorldOrigins(t *testing.T) {
	var dealt [][]Origin
	for _, seed := range Round2Seeds {
		sc := Round2World(seed)
		var caps []int
		sliding, noRA, https, plain, forbidding := 0, 0, 0, 0, 0
		for _, o := range sc.Origins {
			caps = append(caps, o.Cap)
			if o.Sliding {
				sliding++
			}
			if o.NoRetryAfter {
				noRA++
				if o.Cap == 0 {
					t.Errorf("seed %d: an uncapped origin sends no Retry-After: it sends no 429", seed)
				}
			}
			if o.HTTPS {
				https++
			}
			if o.PlainBans {
				plain++
			}
			if o.ForbiddenShare > 0 {
				forbidding++
			}
		}
		slices.Sort(caps)
		want := slices.Sorted(slices.Values(round2Caps))
		if !slices.Equal(caps, want) {
			t.Errorf("seed %d: caps %v, want %v", seed, caps, want)
		}
		if sliding != 5 || noRA != 3 || https != 6 || plain != 6 || forbidding != 1 {
			t.Errorf("seed %d: %d sliding, %d without Retry-After, %d https, %d plain-403 bans, %d forbidding; want 5, 3, 6, 6, 1",
				seed, sliding, noRA, https, plain, forbidding)
		}
		dealt = append(dealt, sc.Origins)
	}
	if reflect.DeepEqual(dealt[0], dealt[1]) {
		t.Errorf("seeds %d and %d deal the same origins", Round2Seeds[0], Round2Seeds[1])
	}
}
