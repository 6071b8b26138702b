package sim

import (
	"testing"
	"time"
)

// TestHardeningCountsOnlyHardeningOrigins: a round-3 run counts apart the attempts on its hardening
// origins — some, not all, of its attempts, and each count within the run's — and a round-2 run,
// whose origins do not harden, counts none.
func TestHardeningCountsOnlyHardeningOrigins(t *testing.T) {
	sc := Round3World(1)
	sc.Duration = 20 * time.Minute
	m, err := Run(sc, Ours())
	if err != nil {
		t.Fatal(err)
	}
	h := m.Hardening
	if h.Attempts == 0 || h.Attempts >= m.Attempts || h.Successes == 0 || h.Successes > m.Successes ||
		h.Wasted() > m.Wasted() || h.BanAnswers > m.Blocked+m.Banned403+m.SoftBlocked || len(h.Recovery) > len(m.Recovery) {
		t.Errorf("round 3, 20 min: hardening %+v of attempts %d, successes %d, wasted %d", h, m.Attempts, m.Successes, m.Wasted())
	}
	var sum Metrics
	sum.Add(m)
	sum.Add(m)
	if sum.Hardening.Attempts != 2*h.Attempts || len(sum.Hardening.Recovery) != 2*len(h.Recovery) {
		t.Errorf("Add: hardening attempts %d, recoveries %d; want %d, %d", sum.Hardening.Attempts, len(sum.Hardening.Recovery), 2*h.Attempts, 2*len(h.Recovery))
	}
	sc2 := Round2World(1)
	sc2.Duration = 10 * time.Minute
	m2, err := Run(sc2, Ours())
	if err != nil {
		t.Fatal(err)
	}
	if m2.Hardening.Attempts != 0 {
		t.Errorf("round 2: %d attempts counted on hardening origins, want 0", m2.Hardening.Attempts)
	}
}
