package sim

import (
	"math"
	"slices"
	"testing"
	"time"
)

// TestSpendWorldTruth checks the spend world's ground truth against the round-2 world it is built
// on, seed by seed: the exits' kinds, denials and slow bodies are round 2's; 12 exits are
// residential; the 3 blocked origins ban with a challenge page and ban every datacenter exit that
// reaches them for the whole run, and no residential one for it; residential pairs keep a subset of
// their round-2 ban episodes, about a quarter; datacenter pairs keep theirs exactly; pages weigh
// 15–400 KB, one size per origin.
func TestSpendWorldTruth(t *testing.T) {
	kept, drawn := 0, 0
	for _, seed := range SpendSeeds {
		sc := SpendWorld(seed)
		g, base := NewTruth(sc), NewTruth(Round2World(seed))
		if sc.Tiers == nil || sc.Tiers.PerGB != [2]float64{DatacenterPerGB, ResidentialPerGB} {
			t.Fatalf("seed %d: Tiers = %+v, want the datacenter and residential prices", seed, sc.Tiers)
		}
		residential := 0
		for e := range sc.Exits {
			residential += g.Tier(e)
			if g.Kind(e) != base.Kind(e) {
				t.Errorf("seed %d: exit %d is %v, round 2's is %v", seed, e, g.Kind(e), base.Kind(e))
			}
		}
		if residential != 12 {
			t.Errorf("seed %d: %d residential exits, want 12", seed, residential)
		}
		blocked := 0
		for o, org := range sc.Origins {
			if kb := sc.Tiers.PageKB[o]; kb < 15 || kb > 400 {
				t.Errorf("seed %d: origin %d's page = %d KB, want 15–400", seed, o, kb)
			}
			if !g.DatacenterBlocked(o) {
				continue
			}
			blocked++
			if org.PlainBans {
				t.Errorf("seed %d: blocked origin %d bans with a plain 403, want a challenge page", seed, o)
			}
		}
		if blocked != 3 {
			t.Errorf("seed %d: %d origins block the datacenter exits, want 3", seed, blocked)
		}
		if pages := slices.Sorted(slices.Values(sc.Tiers.PageKB)); !slices.Equal(pages, spendPageKB) {
			t.Errorf("seed %d: page sizes %v, want each of %v once", seed, pages, spendPageKB)
		}
		end := Epoch.Add(sc.Duration)
		for e := range sc.Exits {
			for o := range sc.Origins {
				p := e*len(sc.Origins) + o
				bans, was := g.Bans(e, o), base.Bans(e, o)
				switch {
				case g.Tier(e) == 0 && g.DatacenterBlocked(o) && g.reaches(p):
					for _, now := range []time.Time{Epoch, Epoch.Add(sc.Duration / 2), end.Add(-time.Nanosecond)} {
						if r := g.Foresee(e, Request{Origin: o}, now); !g.Banned(e, o, now) || (!g.Gone(e, now) && !g.Down(o, now) && r.Answer != Challenge) {
							t.Fatalf("seed %d: datacenter exit %d on blocked origin %d at %v: banned %v, answer %v; want banned, a challenge page",
								seed, e, o, now.Sub(Epoch), g.Banned(e, o, now), r.Answer)
						}
					}
				case g.Tier(e) == 1:
					drawn += len(was)
					kept += len(bans)
					for _, w := range bans {
						if !slices.Contains(was, w) {
							t.Fatalf("seed %d: residential pair (%d, %d) has ban %v, not one of round 2's", seed, e, o, w)
						}
					}
				default:
					if !slices.Equal(bans, was) {
						t.Fatalf("seed %d: datacenter pair (%d, %d) bans %v, round 2's %v", seed, e, o, bans, was)
					}
				}
			}
		}
	}
	if share := float64(kept) / float64(drawn); drawn < 100 || math.Abs(share-0.25) > 0.08 {
		t.Errorf("residential pairs kept %d of round 2's %d ban episodes (%.2f), want about 0.25", kept, drawn, share)
	}
}

// TestSpendBytes checks the byte model: a page is its origin's size plus the request, HTTPS adds
// the TLS share, a refused connection and a 407 cost nothing, and dollars follow the tier's price.
func TestSpendBytes(t *testing.T) {
	tiers := &Tiers{PerGB: [2]float64{1, 5}, PageKB: []int{100, 20}}
	for i, tt := range []struct {
		o    int
		r    Result
		want int64
	}{
		{0, Result{Answer: OK}, 100_000 + requestBytes},
		{0, Result{Answer: OK, HTTPS: true}, 100_000 + requestBytes + tlsBytes},
		{1, Result{Answer: Challenge}, challengeBytes + requestBytes},
		{1, Result{Answer: RateLimited}, smallPageBytes + requestBytes},
		{0, Result{Answer: SlowBody}, slowBodyBytes + requestBytes},
		{1, Result{Answer: SlowBody}, 20_000 + requestBytes},
		{0, Result{Answer: Timeout}, requestBytes},
		{0, Result{Answer: Refused}, 0},
		{0, Result{Answer: ProxyAuth, HTTPS: true}, 0},
	} {
		if got := tiers.Bytes(tt.o, tt.r); got != tt.want {
			t.Errorf("step %d: Bytes(%d, %v) = %d, want %d", i, tt.o, tt.r.Answer, got, tt.want)
		}
	}
	var s Spend
	s.count(tiers, 0, 0, Result{Answer: OK})
	s.count(tiers, 1, 0, Result{Answer: OK})
	s.count(tiers, 1, 1, Result{Answer: Challenge})
	page := float64(100_000+requestBytes) / 1e9
	if want := page*1 + page*5 + float64(challengeBytes+requestBytes)/1e9*5; math.Abs(s.Total()-want) > 1e-12 {
		t.Errorf("Spend.Total() = %v, want %v", s.Total(), want)
	}
	if s.Pages != [2]int{1, 1} || s.Attempts != [2]int{1, 2} {
		t.Errorf("Spend pages %v, attempts %v; want [1 1], [1 2]", s.Pages, s.Attempts)
	}
	if got, want := s.PerThousand(), s.Total()/2*1000; got != want {
		t.Errorf("Spend.PerThousand() = %v, want %v", got, want)
	}
	// At the workload's mix: origin 0 cost two pages' worth for two pages, origin 1 a challenge
	// for none: infinite; without origin 1's challenge, origin 0's per page alone over 2 origins.
	if got := s.PerThousandAtMix(2); !math.IsInf(got, 1) {
		t.Errorf("PerThousandAtMix with an origin that cost and served nothing = %v, want +Inf", got)
	}
	var two Spend
	two.count(tiers, 0, 0, Result{Answer: OK})
	two.count(tiers, 1, 1, Result{Answer: OK})
	two.count(tiers, 1, 1, Result{Answer: OK})
	perPage0, perPage1 := page*1, float64(20_000+requestBytes)/1e9*5
	if got, want := two.PerThousandAtMix(2), (perPage0+perPage1)/2*1000; math.Abs(got-want) > 1e-12 {
		t.Errorf("PerThousandAtMix(2) = %v, want %v (each origin's dollars per page, averaged)", got, want)
	}
	var merged Spend
	merged.Add(two)
	merged.Add(two)
	if merged.ByOrigin[1].Pages != 4 || math.Abs(merged.PerThousandAtMix(2)-two.PerThousandAtMix(2)) > 1e-12 {
		t.Errorf("Add(two) twice = %+v, want each origin doubled and the same price at the mix", merged.ByOrigin)
	}
	var none Spend
	none.count(nil, 0, 0, Result{Answer: OK})
	if none.Total() != 0 || none.Attempts != [2]int{} || none.ByOrigin != nil || none.PerThousand() != 0 || none.PerThousandAtMix(12) != 0 {
		t.Errorf("Spend in a world without tiers = %+v, want nothing counted", none)
	}
}

// TestSpendRunCountsEveryAttempt: in a run of the spend world the pool's exits carry the ground
// truth's tiers, and Metrics.Spend holds exactly the bytes of the attempts the run counted, by the
// tier of the exit each went through (summed apart from the run, from the trace).
func TestSpendRunCountsEveryAttempt(t *testing.T) {
	sc := SpendWorld(2)
	sc.Duration = 5 * time.Minute
	g := NewTruth(sc)
	var traced [2]int64
	var tiersOK bool
	st := Strategy{Name: "round-robin, traced", New: func(env *Env) (Router, func(), error) {
		tiersOK = true
		for e, x := range env.Exits {
			tiersOK = tiersOK && x.Tier() == g.Tier(e)
		}
		env.Trace = func(e int, q Request, r Result, _ time.Time) { traced[g.Tier(e)] += sc.Tiers.Bytes(q.Origin, r) }
		return RoundRobin().New(env)
	}}
	m, err := Run(sc, st)
	if err != nil {
		t.Fatal(err)
	}
	if !tiersOK {
		t.Errorf("the run's exits do not carry the ground truth's tiers")
	}
	if m.Spend.Bytes != traced || traced[0] == 0 || traced[1] == 0 {
		t.Errorf("Metrics.Spend.Bytes = %v, the traced attempts' %v; want equal, both tiers used", m.Spend.Bytes, traced)
	}
	if got := m.Spend.Attempts[0] + m.Spend.Attempts[1]; got != m.Attempts {
		t.Errorf("Spend attempts %v, want the run's %d", m.Spend.Attempts, m.Attempts)
	}
	if got := m.Spend.Pages[0] + m.Spend.Pages[1]; got != m.Successes {
		t.Errorf("Spend pages %v, want the run's %d successes", m.Spend.Pages, m.Successes)
	}
}

// TestCrawleeTierTracker follows Crawlee's tracker: errors on tier 0 move a domain to tier 1,
// and once tier 1's own score passes tier 0's decayed one, it moves back down.
func TestCrawleeTierTracker(t *testing.T) {
	tr := tierTracker{score: make([]int, 2)}
	if got := tr.predict(); got != 0 {
		t.Fatalf("first predict = %d, want 0", got)
	}
	tr.score[0] += 10
	if got := tr.predict(); got != 1 {
		t.Fatalf("predict after an error on tier 0 = %d, want 1", got)
	}
	var steps int
	for steps = 1; tr.predict() == 1; steps++ {
		if steps > 20 {
			t.Fatalf("still on tier 1 after %d predictions, score %v", steps, tr.score)
		}
	}
	// Tier 0's score decays by 1 a prediction while tier 1 is current; at 0 the two tie, and a tie
	// goes down.
	if steps != 10 {
		t.Errorf("back on tier 0 after %d more predictions, want 10", steps)
	}
	three := tierTracker{score: []int{0, 0, 0}, cur: 1}
	three.score[1] = 10
	if got := three.predict(); got != 0 {
		t.Errorf("3 tiers, error on the middle one, all else clean: predict = %d, want 0 (down on a tie)", got)
	}
}
