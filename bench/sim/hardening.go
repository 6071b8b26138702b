package sim

import (
	"slices"
	"time"
)

// What a strategy got done on the origins whose WAF hardens (Origin.Hardening: each repeat ban of
// an IP lasts longer), apart from the rest: the pool's repeat-offence memory (pool/offence.go)
// probes a pair banned again soon after a ban on a longer ladder, and what that is worth shows
// here first — the pages those origins served, the attempts they wasted, and how many of those
// were a banned pair's answers (its probes, mostly).

// HardeningCounts counts the attempts on the hardening origins of a run.
type HardeningCounts struct {
	Attempts  int // requests that left through an exit for a hardening origin
	Successes int // of them, pages served
	Site403   int // of them, the origin's own 403s for a path it forbids: neither goodput nor waste
	// BanAnswers counts the answers of banned pairs: challenge pages, plain-403 bans and 200 block
	// pages.
	BanAnswers int
	// Recovery holds the recovery times (Metrics.Recovery) of the bans of hardening origins.
	Recovery []time.Duration
}

// Wasted is the attempts on hardening origins that did not succeed, the site's own 403s apart.
func (h *HardeningCounts) Wasted() int { return h.Attempts - h.Successes - h.Site403 }

// count counts r, an answer of origin o of sc, when o hardens.
func (h *HardeningCounts) count(sc *Scenario, o int, r Result) {
	if sc.Origins[o].Hardening <= 1 {
		return
	}
	h.Attempts++
	switch r.Answer {
	case OK:
		h.Successes++
	case Site403:
		h.Site403++
	case Challenge, Banned403, SoftBlock:
		h.BanAnswers++
	}
}

// add adds n's counts to h's.
func (h *HardeningCounts) add(n HardeningCounts) {
	h.Attempts += n.Attempts
	h.Successes += n.Successes
	h.Site403 += n.Site403
	h.BanAnswers += n.BanAnswers
	h.Recovery = append(h.Recovery, n.Recovery...)
}

// recovered keeps rs, recovery times just measured on origin o of sc, when o hardens.
func (h *HardeningCounts) recovered(sc *Scenario, o int, rs []time.Duration) {
	if len(rs) > 0 && sc.Origins[o].Hardening > 1 {
		h.Recovery = append(h.Recovery, rs...)
	}
}

// MedianRecovery is the median of Recovery (the bans never recovered from are not counted), 0
// when there is none.
func (h *HardeningCounts) MedianRecovery() time.Duration {
	if len(h.Recovery) == 0 {
		return 0
	}
	s := slices.Clone(h.Recovery)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}
