package main

import (
	"fmt"
	"strconv"
	"strings"
)

// writeRound3 is the round-3 world's section: its description, then the figures of every seed.
func writeRound3(p func(string, ...any), res *simResults) {
	writeSeeded(p, res, res.round3, "Round-3 world (issue 28)", writeRound3World,
		"Issue 13's bounds, applied to ours (defaults) in the round-3 world (not yet its targets)")
}

// writeRound3World describes the round-3 world and what each seed dealt.
func writeRound3World(p func(string, ...any), res *simResults, seeds []string) {
	sc := res.round3[0].sc
	hardening, softBans := 0, 0
	for _, o := range sc.Origins {
		if o.Hardening > 1 {
			hardening++
		}
		if o.SoftBans {
			softBans++
		}
	}
	p("`sim.Round3World`: the round-2 world of the same seed (its workers, exits, origins, denials, slow bodies and bursts), bans at %.1f an hour per pair, and the dynamics a pool meets in the field:\n\n", sc.BansPerHour)
	p("- **Slow-but-working exits**: %d healthy exits slow for every origin and %d slow for %d origins each: their answers take %s instead of %s, and they are served all the same.\n",
		sc.SlowAll, sc.SlowSome, sc.SlowSomeOrigins, span(sc.SlowMin, sc.SlowMax), span(sc.LatencyMin, sc.LatencyMax))
	p("- **Origin outages**: %.2f an hour per origin, %s each, during which the site answers 503 (nginx's page, no Retry-After) to every exit.\n", sc.OutagesPerHour, span(sc.OutageMin, sc.OutageMax))
	p("- **Exit churn**: every healthy or flaky exit goes dead (its gateway refuses connections) %.1f times an hour, for %s, and comes back as it was.\n", sc.ChurnPerHour, span(sc.ChurnMin, sc.ChurnMax))
	p("- **Subnet bans**: the exits share subnets in groups of %d; %.0f %% of the bans a pair draws also ban its subnet-mates for that origin, for the same window.\n", sc.Subnet, sc.SubnetBanShare*100)
	p("- **Hardening WAFs**: %d of the %d origins (dealt by the seed, table below) double each repeat ban of an IP: a pair's k-th ban lasts 2^(k−1) times its drawn length, at most %s.\n", hardening, len(sc.Origins), dur(sc.HardenMax))
	p("- **Unmarked soft blocks**: %d origins that would ban with a challenge page (dealt by the seed, table below: \"200 block page\") answer a banned pair 200 with a 2 KB \"Verify you are human\" page of its own title and no vendor marker, where the others get the 12 KB page: the classifier alone calls it a success; the pool judges it by the pages other exits get.\n\n", softBans)
	p("Both oracles know which pairs are slow and weigh them by goodput per worker-second, as the informed one weighs flaky exits: a slow pair only when no fast, healthy exit is ready and its expected %.1f s of worker time gets more than it would where capacity does not bind (the informed oracle takes a slow pair before a flaky exit, 1 success in %.1f s against %.1f in %.1f s); they know every outage and every exit's churn and send nothing into them.\n\n",
		(sc.SlowMin+sc.SlowMax).Seconds()/2, (sc.SlowMin+sc.SlowMax).Seconds()/2, 1-sc.FlakyTimeout,
		sc.FlakyTimeout*sc.Timeout.Seconds()+(1-sc.FlakyTimeout)*(sc.LatencyMin+sc.LatencyMax).Seconds()/2)
	writeOrigins(p, res.round3, seeds)
	p("\n| seed | ban episodes drawn (%s) | repeat bans lengthened | bans spread to a subnet | slow exits (pairs) | outages | churn episodes | slow-body episodes | proxy-denied pairs | bursts |\n|---|---|---|---|---|---|---|---|---|---|\n", strings.Join(bandNames(sc), " / "))
	for _, w := range res.round3 {
		st := w.stats
		var bs []string
		for _, n := range st.Bans {
			bs = append(bs, strconv.Itoa(n))
		}
		p("| %d | %s | %d | %d | %s | %d | %d | %d | %d | %d |\n", w.sc.Seed, strings.Join(bs, " / "), st.Hardened, st.SubnetBans,
			fmt.Sprintf("%d (%d)", st.SlowExits, st.SlowPairs), st.Outages, st.Churn, st.Stalls, st.Denied, st.Bursts)
	}
	p("\n")
}
