package sim

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestRound3SoftBans: the round-3 world has round3SoftBanOrigins origins whose bans answer the
// 200 block page, none of them an origin that bans with a plain 403, and a banned pair of such an
// origin gets the block page from the ground truth, whose classifier verdict alone is a success.
func TestRound3SoftBans(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		sc := Round3World(seed)
		g := NewTruth(sc)
		n, met := 0, false
		for o, org := range sc.Origins {
			if !org.SoftBans {
				continue
			}
			n++
			if org.PlainBans {
				t.Errorf("seed %d: origin %d bans with both a plain 403 and a 200 page", seed, o)
			}
			for e := 0; e < sc.Exits && !met; e++ {
				for _, w := range g.Bans(e, o) {
					if g.Gone(e, w.From) || g.Down(o, w.From) || g.Denied(e, o) || g.Kind(e) != Healthy {
						continue
					}
					r := g.Peek(e, Request{Origin: o}, w.From)
					if r.Answer != SoftBlock {
						t.Errorf("seed %d: a banned pair (%d, %d) of a SoftBans origin answered %v, want %v", seed, e, o, r.Answer, SoftBlock)
					}
					if v := Verdict(r, w.From); v.Outcome != pool.Success {
						t.Errorf("seed %d: Verdict(%v) = %+v, want the classifier's success", seed, r.Answer, v)
					}
					met = true
					break
				}
			}
		}
		if n != round3SoftBanOrigins || !met {
			t.Errorf("seed %d: %d SoftBans origins (want %d), a banned pair met: %v", seed, n, round3SoftBanOrigins, met)
		}
	}
}

// TestSoftBlockJudgedByThePool: what a Transport's reader sees of the simulation's pages, judged
// by a pool as ours judges them: the block page through one exit, while three others get the page,
// is a block from its third, and the page itself never is.
func TestSoftBlockJudgedByThePool(t *testing.T) {
	pages := simPages()
	if !pages[OK].ok || !pages[SoftBlock].ok || pages[OK].pg.Size < pool.PageSizeBand*pages[SoftBlock].pg.Size {
		t.Fatalf("pages read: OK %+v, SoftBlock %+v; want both read, the block page %d times smaller", pages[OK], pages[SoftBlock], pool.PageSizeBand)
	}
	clk := clock.NewFake(Epoch)
	exits := make([]*pool.Exit, 4)
	for i := range exits {
		exits[i] = pool.MustParseExit(fmt.Sprintf("127.0.0.1:%d", 20001+i)).WithLabel(fmt.Sprint(i))
	}
	p, err := pool.New(pool.WithExits(exits...), pool.WithClock(clk))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	blocked := 0
	for i := range 12 {
		exit := fmt.Sprint(i % 4)
		l, err := p.Pick(context.Background(), pool.Request{Origin: OriginKey(0), Exit: exit})
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		r := Result{Answer: OK}
		if exit == "0" {
			r.Answer = SoftBlock
		}
		v := judgePage(&l, r, clk.Now(), Verdict(r, clk.Now()))
		l.Report(v)
		if v.Outcome != pool.Success {
			if r.Answer != SoftBlock || v.Detector != pool.PageDetector {
				t.Errorf("step %d: %v via %s judged %+v", i, r.Answer, exit, v)
			}
			blocked++
			break
		}
		clk.Advance(time.Second)
	}
	if blocked != 1 {
		t.Errorf("the block page through exit 0 was never judged a block")
	}
}
