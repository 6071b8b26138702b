package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/bench/sim"
)

// writeHardening is the line under a round-3 table that shows what each strategy of ms (the
// oracles last) got done on the origins whose WAF hardens (sim.HardeningCounts): the pages they
// served, the attempts wasted on them and how many of those were a banned pair's answers, and the
// median recovery from their bans. It writes nothing for a world without such origins.
func writeHardening(p func(string, ...any), ms []sim.Metrics) {
	var parts []string
	for _, m := range ms[:len(ms)-oracles] {
		h := m.Hardening
		if h.Attempts == 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %d pages, %d wasted (%d ban answers), recovery %s", m.Strategy,
			h.Successes, h.Wasted(), h.BanAnswers, h.MedianRecovery().Round(100*time.Millisecond)))
	}
	if in := ms[len(ms)-2].Hardening; in.Attempts > 0 {
		parts = append(parts, fmt.Sprintf("%s %d pages", ms[len(ms)-2].Strategy, in.Successes))
	}
	if len(parts) > 0 {
		p("On the hardening origins: %s.\n\n", strings.Join(parts, "; "))
	}
}
