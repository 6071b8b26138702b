package sim

import (
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

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

// quiet is sc without bans, slow bodies, denials or bursts: answers by caps alone.
func quiet(sc Scenario) Scenario {
	sc.BansPerHour, sc.StallsPerHour, sc.Denials, sc.BurstsPerHour = 0, 0, 0, 0
	return sc
}

// at is the instant i units into the run.
func at(i int, unit time.Duration) time.Time { return Epoch.Add(time.Duration(i) * unit) }

func TestTruthKinds(t *testing.T) {
	for _, sc := range []Scenario{Round1World(), Round2World(2)} {
		g := NewTruth(sc)
		got := map[Kind]int{}
		for e := range sc.Exits {
			got[g.Kind(e)]++
		}
		want := map[Kind]int{Dead: sc.Dead, AuthFail: sc.Auth, Flaky: sc.Flaky, Healthy: sc.Exits - sc.Dead - sc.Auth - sc.Flaky}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: kinds = %v, want %v", sc.Name, got, want)
		}
	}
}

// TestRound1WorldPinned pins the round-1 world's ground truth and workload, so that its figures
// stay those of the first round: a change to how the world is drawn fails here, not silently in
// RESULTS.md.
func TestRound1WorldPinned(t *testing.T) {
	sc := Round1World()
	g := NewTruth(sc)
	h := fnv.New64a()
	put := func(x int64) {
		var b [8]byte
		for i := range b {
			b[i] = byte(x >> (8 * i))
		}
		h.Write(b[:])
	}
	episodes := 0
	for e := range sc.Exits {
		put(int64(g.Kind(e)))
		for o := range sc.Origins {
			for _, w := range g.Bans(e, o) {
				put(w.From.UnixNano())
				put(w.To.UnixNano())
				episodes++
			}
			if len(g.Stalls(e, o)) > 0 || g.Denied(e, o) {
				t.Errorf("pair (%d, %d) has slow bodies or a denial: the round-1 world had none", e, o)
			}
		}
	}
	r := rand.New(rand.NewPCG(sc.Seed, 1))
	for i := range 1000 {
		q := g.Draw(r, at(i, time.Second))
		put(int64(q.Origin))
		if q.Forbidden {
			t.Fatalf("draw %d asks for a forbidden path: the round-1 world has none", i)
		}
	}
	const wantEpisodes, wantSum = 336, 0xa4f3ee7441b1a0fd
	if episodes != wantEpisodes || h.Sum64() != wantSum {
		t.Errorf("round-1 world: %d ban episodes, fingerprint %#x; want %d, %#x", episodes, h.Sum64(), wantEpisodes, uint64(wantSum))
	}
}

func TestTruthAnswers(t *testing.T) {
	sc := quiet(Round1World())
	g := NewTruth(sc)
	t0 := Epoch.Add(10 * time.Second)
	q1 := Request{Origin: 1}
	if r := g.Send(find(t, g, sc.Exits, Dead), q1, t0); r.Answer != Refused {
		t.Errorf("Send(dead) = %+v, want refused", r)
	}
	if r := g.Send(find(t, g, sc.Exits, AuthFail), q1, t0); r.Answer != ProxyAuth {
		t.Errorf("Send(auth) = %+v, want 407", r)
	}
	h := find(t, g, sc.Exits, Healthy)
	for i := range sc.Origins[1].Cap {
		now := t0.Add(time.Duration(i) * time.Second)
		if r := g.Send(h, q1, now); !r.OK() || r.Latency < sc.LatencyMin || r.Latency > sc.LatencyMax {
			t.Fatalf("step %d: Send(healthy) = %+v, want 200 within latency bounds", i, r)
		}
	}
	t1 := t0.Add(20 * time.Second) // 30 s into the first minute
	if r := g.Peek(h, q1, t1); r.Answer != RateLimited || r.RetryAfter != 30*time.Second {
		t.Errorf("Peek(capped) = %+v, want 429 Retry-After 30s", r)
	}
	if r := g.Send(h, Request{Origin: 2}, t1); !r.OK() {
		t.Errorf("Send(other origin) = %+v, want 200: caps are per pair", r)
	}
	if r := g.Send(h, q1, Epoch.Add(time.Minute)); !r.OK() {
		t.Errorf("Send(next minute) = %+v, want 200", r)
	}
}

func TestTruthPeekMatchesSend(t *testing.T) {
	for _, sc := range []Scenario{Round1World(), Round2World(1)} {
		g := NewTruth(sc)
		r := rand.New(rand.NewPCG(1, 2))
		for i := range 4000 {
			e := i % sc.Exits
			now := at(i, 97*time.Millisecond)
			q := g.Draw(r, now)
			if p, s := g.Peek(e, q, now), g.Send(e, q, now); p != s {
				t.Fatalf("%s step %d: Peek = %+v, Send = %+v", sc.Name, i, p, s)
			}
		}
	}
}

func TestTruthFlakyRate(t *testing.T) {
	sc := quiet(Round1World())
	g := NewTruth(sc)
	f := find(t, g, sc.Exits, Flaky)
	timeouts := 0
	const n = 10000
	for i := range n {
		if r := g.Peek(f, Request{Origin: i % len(sc.Origins)}, at(i, time.Millisecond)); r.Answer == Timeout {
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

// inBand reports whether d is the length of an episode of one of bands.
func inBand(d time.Duration, bands []BanBand) bool {
	for _, b := range bands {
		if d >= b.Min && d <= b.Max {
			return true
		}
	}
	return false
}

func TestTruthBans(t *testing.T) {
	for _, tc := range []struct {
		sc       Scenario
		min, max int // episodes: exits that reach × origins × 3 h at 0.5/h, less the time banned
	}{
		{Round1World(), 150, 450},  // 34 × 8: roughly 300
		{Round2World(1), 250, 750}, // 34 × 12 less 3 denied pairs, shorter bans on average: roughly 500
	} {
		sc := tc.sc
		g := NewTruth(sc)
		episodes, plain := 0, 0
		for e := range sc.Exits {
			for o := range sc.Origins {
				bans := g.Bans(e, o)
				if k := g.Kind(e); (k == Dead || k == AuthFail || g.Denied(e, o)) && len(bans) > 0 {
					t.Errorf("%s: pair (%d, %d) (%v, denied %v) has bans", sc.Name, e, o, k, g.Denied(e, o))
				}
				for i, w := range bans {
					if d := w.To.Sub(w.From); !inBand(d, sc.BanBands) {
						t.Errorf("%s: ban %d of (%d, %d) lasts %v, in no band", sc.Name, i, e, o, d)
					}
					if i > 0 && w.From.Before(bans[i-1].To) {
						t.Errorf("%s: ban %d of (%d, %d) overlaps the previous", sc.Name, i, e, o)
					}
					mid := w.From.Add(w.To.Sub(w.From) / 2)
					if !g.Banned(e, o, mid) || g.Banned(e, o, w.To) || !g.Banned(e, o, w.From) {
						t.Errorf("%s: Banned around ban %d of (%d, %d) wrong", sc.Name, i, e, o)
					}
					want := Challenge
					if sc.Origins[o].PlainBans {
						want, plain = Banned403, plain+1
					}
					if r := g.Peek(e, Request{Origin: o}, mid); g.Kind(e) == Healthy && r.Answer != want {
						t.Errorf("%s: Peek(banned) = %+v, want %v", sc.Name, r, want)
					}
					episodes++
				}
			}
		}
		if episodes < tc.min || episodes > tc.max {
			t.Errorf("%s: %d ban episodes, want %d..%d", sc.Name, episodes, tc.min, tc.max)
		}
		if st := g.Stats(); st.PlainBans != plain {
			t.Errorf("%s: Stats().PlainBans = %d, want %d", sc.Name, st.PlainBans, plain)
		}
	}
}

// TestBanBands checks that the round-2 world has bans of every band, short and long, in about
// the bands' proportions.
func TestBanBands(t *testing.T) {
	sc := Round2World(1)
	st := NewTruth(sc).Stats()
	total := 0
	for _, n := range st.Bans {
		total += n
	}
	for i, b := range sc.BanBands {
		if got := float64(st.Bans[i]) / float64(total); got < b.Weight-0.08 || got > b.Weight+0.08 {
			t.Errorf("band %v–%v: %.2f of the episodes, want %.2f ± 0.08 (%v)", b.Min, b.Max, got, b.Weight, st.Bans)
		}
	}
}

// TestSlidingCap checks a sliding 60 s cap: it counts the requests it accepted in the last
// minute, refuses the others with Retry-After until the oldest leaves the window, and the
// refused ones do not count.
func TestSlidingCap(t *testing.T) {
	sc := quiet(Round1World())
	sc.Origins = []Origin{{Cap: 3, Sliding: true}, {Cap: 3, Sliding: true, NoRetryAfter: true}, {}}
	g := NewTruth(sc)
	h := find(t, g, sc.Exits, Healthy)
	q := Request{Origin: 0}
	const s = time.Second
	steps := []struct {
		at   time.Duration
		want Answer
		ra   time.Duration
	}{
		{0, OK, 0}, {10 * s, OK, 0}, {20 * s, OK, 0},
		{30 * s, RateLimited, 30 * s},                 // the request of 0 s leaves at 60 s
		{59*s + 500*time.Millisecond, RateLimited, s}, // rounded up to whole seconds
		{60 * s, OK, 0},                               // the request of 0 s has left
		{61 * s, RateLimited, 9 * s},                  // the request of 10 s leaves at 70 s
		{70 * s, OK, 0},
		{80 * s, OK, 0}, // 20 s left at 80 s
		{81 * s, RateLimited, 39 * s},
	}
	for i, st := range steps {
		r := g.Send(h, q, Epoch.Add(st.at))
		if r.Answer != st.want || r.RetryAfter != st.ra {
			t.Errorf("step %d: Send(at %v) = %+v, want %v Retry-After %v", i, st.at, r, st.want, st.ra)
		}
	}
	// Without Retry-After, the same 429s say nothing of when.
	q = Request{Origin: 1}
	for i := range 4 {
		r := g.Send(h, q, Epoch.Add(time.Duration(i)*s))
		if want := map[bool]Answer{true: OK, false: RateLimited}[i < 3]; r.Answer != want || r.RetryAfter != 0 {
			t.Errorf("step %d: Send(no Retry-After origin) = %+v, want %v without Retry-After", i, r, want)
		}
	}
	// No cap: never a 429.
	for i := range 200 {
		if r := g.Send(h, Request{Origin: 2}, Epoch.Add(time.Duration(i)*100*time.Millisecond)); !r.OK() {
			t.Fatalf("step %d: Send(uncapped origin) = %+v, want 200", i, r)
		}
	}
}

// TestClockMinuteCapCountsRefused checks the clock-minute cap: every request of the minute counts,
// and the count starts again at the minute.
func TestClockMinuteCapCountsRefused(t *testing.T) {
	sc := quiet(Round1World())
	sc.Origins = []Origin{{Cap: 2}}
	g := NewTruth(sc)
	h := find(t, g, sc.Exits, Healthy)
	q := Request{}
	want := []Answer{OK, OK, RateLimited, RateLimited}
	for i, w := range want {
		if r := g.Send(h, q, at(i, 10*time.Second)); r.Answer != w {
			t.Errorf("step %d: Send = %+v, want %v", i, r, w)
		}
	}
	if r := g.Send(h, q, Epoch.Add(time.Minute)); !r.OK() {
		t.Errorf("Send(next minute) = %+v, want 200", r)
	}
}

// TestForesee checks that Foresee is Peek without the flaky exits' coin flip, and that ReadyAt is
// now exactly when Foresee would be served.
func TestForesee(t *testing.T) {
	sc := Round2World(2)
	g := NewTruth(sc)
	r := rand.New(rand.NewPCG(2, 9))
	flips := 0
	for i := range 20000 {
		now := Epoch.Add(time.Duration(r.Int64N(int64(sc.Duration))))
		e := r.IntN(sc.Exits)
		q := g.Draw(r, now)
		if i%3 == 0 {
			g.Send(e, q, now) // fill the windows
			continue
		}
		peek, fore := g.Peek(e, q, now), g.Foresee(e, q, now)
		switch {
		case peek.Answer == Timeout:
			flips++
			if g.Kind(e) != Flaky || fore.Answer == Timeout {
				t.Fatalf("step %d: Peek(%d, %+v) timed out, Foresee = %v (exit %v)", i, e, q, fore.Answer, g.Kind(e))
			}
		case peek.Answer != fore.Answer:
			t.Fatalf("step %d: Foresee(%d, %+v) = %v, want Peek's %v", i, e, q, fore.Answer, peek.Answer)
		}
		at := g.ReadyAt(e, q, now)
		if served := fore.Served(); served != at.Equal(now) {
			t.Fatalf("step %d: ReadyAt(%d, %+v) = %v at %v, Foresee served %v", i, e, q, at, now, served)
		}
		if !at.IsZero() && at.Before(now) {
			t.Fatalf("step %d: ReadyAt = %v, before now %v", i, at, now)
		}
	}
	if flips == 0 {
		t.Fatal("no flaky timeout seen")
	}
}
