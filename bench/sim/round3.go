package sim

import (
	"math/rand/v2"
	"time"
)

// Round3World is issue 28's world for seed: the round-2 world of the same seed (its origins'
// caps, windows, Retry-After, HTTPS and ban pages, its denials, slow bodies and bursts), with bans
// a little rarer at 0.4 an hour per pair, and the dynamics a pool meets in the field:
//
//   - slow-but-working exits: 4 healthy exits slow for every origin and 6 for 4 origins each, whose
//     pages take 3–6 s instead of 0.2–1 s (10 of the 40 exits, 72 slow pairs of 480) — served, but
//     a worker through one gets a fifth to a tenth of the pages a fast pair gives it;
//   - origin outages: 0.15 an hour per origin, 5–15 min each, during which the site answers 503 to
//     every exit (about 5 a run over the 12 origins);
//   - exit churn: each healthy or flaky exit goes dead (its gateway refuses connections) 0.2 times
//     an hour, for 2–15 min, and comes back as it was;
//   - subnets: the exits share subnets in groups of 4, and 30 % of the bans a pair draws also ban,
//     for that origin and that window, its subnet-mates the origin hears from;
//   - hardening WAFs: 3 of the 12 origins (dealt by the seed) double each repeat ban of an IP —
//     a pair's k-th ban lasts 2^(k−1) times its drawn length, at most 4 h;
//   - unmarked soft blocks: 3 of the origins that ban with a challenge page answer their banned
//     pairs 200 with a 2 KB "Verify you are human" page instead (softblock.go).
//
// The seed deals the slow pairs, the hardening and soft-banning origins and every episode.
func Round3World(seed uint64) Scenario {
	sc := Round2World(seed)
	sc.Name = "round-3 world"
	sc.BansPerHour = 0.4
	sc.SlowAll, sc.SlowSome, sc.SlowSomeOrigins = 4, 6, 4
	sc.SlowMin, sc.SlowMax = 3*time.Second, 6*time.Second
	sc.OutagesPerHour, sc.OutageMin, sc.OutageMax = 0.15, 5*time.Minute, 15*time.Minute
	sc.ChurnPerHour, sc.ChurnMin, sc.ChurnMax = 0.2, 2*time.Minute, 15*time.Minute
	sc.Subnet, sc.SubnetBanShare = 4, 0.3
	sc.HardenMax = 4 * time.Hour
	softBans(&sc, seed)
	r := rand.New(rand.NewPCG(seed, 0x68617264656e0000))
	for _, o := range r.Perm(len(sc.Origins))[:3] {
		sc.Origins[o].Hardening = 2
	}
	return sc
}

// Round3Seeds are the seeds RESULTS.md reports the round-3 world for.
var Round3Seeds = []uint64{1, 2, 3, 4, 5}
