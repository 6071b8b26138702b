package pool

import (
	"fmt"
	"testing"
)

// TestGroupIDsConsecutiveOrNot checks that a group's id(i) is ids[i] whether or not its ids are
// consecutive: one tier added at once, tiers interleaved, an exit removed from the middle.
func TestGroupIDsConsecutiveOrNot(t *testing.T) {
	exits := func(n int, tier func(i int) int) []*Exit {
		list := make([]*Exit, n)
		for i := range list {
			list[i] = MustParseExit(fmt.Sprintf("10.0.0.%d:3128", i+1)).WithTier(tier(i))
		}
		return list
	}
	check := func(step string, p *Pool, wantConsecutive map[int]bool) {
		t.Helper()
		for _, g := range p.set.Load().groups {
			if g.consecutive != wantConsecutive[g.tier] {
				t.Errorf("%s: tier %d: consecutive = %v, want %v (ids %v)", step, g.tier, g.consecutive, wantConsecutive[g.tier], g.ids)
			}
			for i := range g.ids {
				if got := g.id(i); got != g.ids[i] {
					t.Errorf("%s: tier %d: id(%d) = %d, want %d", step, g.tier, i, got, g.ids[i])
				}
			}
		}
	}
	p, err := New(WithExits(exits(6, func(int) int { return 0 })...))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	check("one tier", p, map[int]bool{0: true})
	if err := p.Remove(p.set.Load().all[2].exit.Label()); err != nil {
		t.Fatal(err)
	}
	check("one removed", p, map[int]bool{0: false})

	q, err := New(WithExits(exits(6, func(i int) int { return i % 2 })...))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	check("tiers interleaved", q, map[int]bool{0: false, 1: false})
}
