package main

import (
	"fmt"
	"log"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/bench/sim"
	"github.com/proxybreaker/proxybreaker/pool"
)

// simConfig is what the simulation runs: the flags of -only sim, which the whole run takes too.
type simConfig struct {
	seeds, worlds, strategies string
	duration                  time.Duration
	parallel                  int
	brief                     bool
}

// strategyTable names the strategies for -strategies, in the report's order; the two oracles come
// last in every world, the informed one then the clairvoyant one.
var strategyTable = []struct {
	name string
	new  func() sim.Strategy
}{
	{"ours", sim.Ours},
	{"ours-reset", sim.OursResetOnClose},
	{"ours-paced", func() sim.Strategy { return sim.OursPaced(12) }},
	{"round-robin", sim.RoundRobin},
	{"random", sim.Random},
	{"per-exit", sim.PerExitBreaker},
	{"per-pair", sim.PerPairBreaker},
}

func strategyNames() []string {
	var ns []string
	for _, s := range strategyTable {
		ns = append(ns, s.name)
	}
	return ns
}

// worldResult is one world's runs: ms by strategy, the informed oracle then the clairvoyant one last.
type worldResult struct {
	sc    sim.Scenario
	stats sim.TruthStats
	ms    []sim.Metrics
}

// oracle is the clairvoyant oracle's run; informed the informed oracle's, which issue 13's goodput
// target is judged against.
func (w *worldResult) oracle() sim.Metrics   { return w.ms[len(w.ms)-1] }
func (w *worldResult) informed() sim.Metrics { return w.ms[len(w.ms)-2] }

// oracles is how many runs of each world are oracles', at the end of its runs.
const oracles = 2

type simResults struct {
	round1  *worldResult
	sens    *sim.Metrics // ours (defaults) in the round-1 world with workers honouring RetryIn up to 30 s
	round2  []worldResult
	round3  []worldResult
	partial bool // fewer seeds, strategies or simulated time than the full report
	brief   bool // the figures alone: targets and tables, no descriptions
	runs    int
	par     int
	elapsed time.Duration
}

// strategyList is the strategies -strategies names, in strategyTable's order for "all", the
// oracles not included.
func (cfg simConfig) strategyList() ([]sim.Strategy, error) {
	var sts []sim.Strategy
	if cfg.strategies == "all" {
		for _, s := range strategyTable {
			sts = append(sts, s.new())
		}
		return sts, nil
	}
	for _, name := range strings.Split(cfg.strategies, ",") {
		found := false
		for _, s := range strategyTable {
			if s.name == strings.TrimSpace(name) {
				sts, found = append(sts, s.new()), true
			}
		}
		if !found && !strings.HasPrefix(strings.TrimSpace(name), "oracle") {
			return nil, fmt.Errorf("-strategies: unknown %q (want %s, or all)", name, strings.Join(strategyNames(), ", "))
		}
	}
	return sts, nil
}

func runSim(cfg simConfig) (*simResults, error) {
	sts, err := cfg.strategyList()
	if err != nil {
		return nil, err
	}
	sts = append(sts, sim.InformedOracle(), sim.Oracle())
	res := &simResults{par: cfg.parallel, brief: cfg.brief, partial: len(sts) < len(strategyTable)+oracles || cfg.duration != 0}
	var worlds []*worldResult
	for _, w := range strings.Split(cfg.worlds, ",") {
		switch strings.TrimSpace(w) {
		case "round-1":
			res.round1 = &worldResult{sc: sim.Round1World()}
			worlds = append(worlds, res.round1)
		case "round-2", "round-3":
			world, into := sim.Round2World, &res.round2
			if strings.TrimSpace(w) == "round-3" {
				world, into = sim.Round3World, &res.round3
			}
			for _, f := range strings.Split(cfg.seeds, ",") {
				seed, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64)
				if err != nil {
					return nil, fmt.Errorf("-seeds: %w", err)
				}
				*into = append(*into, worldResult{sc: world(seed)})
			}
			if cfg.seeds != "1,2,3,4,5" {
				res.partial = true
			}
		default:
			return nil, fmt.Errorf("-worlds: unknown %q (want round-1, round-2, round-3)", w)
		}
	}
	if res.round1 == nil || len(res.round2) == 0 || len(res.round3) == 0 {
		res.partial = true
	}
	for i := range res.round2 {
		worlds = append(worlds, &res.round2[i])
	}
	for i := range res.round3 {
		worlds = append(worlds, &res.round3[i])
	}
	var jobs []sim.Job
	for _, w := range worlds {
		if cfg.duration > 0 {
			w.sc.Duration = cfg.duration
		}
		w.stats = sim.NewTruth(w.sc).Stats()
		for _, st := range sts {
			jobs = append(jobs, sim.Job{Scenario: w.sc, Strategy: st})
		}
	}
	sens := res.round1 != nil && sts[0].Name == sim.Ours().Name
	if sens {
		sc := res.round1.sc
		sc.MaxRefusalWait = 30 * time.Second
		jobs = append(jobs, sim.Job{Scenario: sc, Strategy: sim.Ours()})
	}
	start := time.Now()
	log.Printf("simulation: %d runs, %d at a time", len(jobs), cfg.parallel)
	ms, err := sim.RunAll(jobs, cfg.parallel)
	if err != nil {
		return nil, err
	}
	res.elapsed, res.runs = time.Since(start), len(jobs)
	log.Printf("simulation: %v", res.elapsed.Round(time.Second))
	for i, w := range worlds {
		w.ms = ms[i*len(sts) : (i+1)*len(sts)]
	}
	if sens {
		res.sens = &ms[len(ms)-1]
	}
	return res, nil
}

// merged is a seeded world's runs (ws) of each strategy over every seed, as one.
func merged(ws []worldResult) []sim.Metrics {
	if len(ws) == 0 {
		return nil
	}
	out := make([]sim.Metrics, len(ws[0].ms))
	for i := range out {
		out[i].Strategy = ws[0].ms[i].Strategy
		for _, w := range ws {
			out[i].Add(w.ms[i])
		}
	}
	return out
}

// chart is what the chart shows: the round-2 world over every seed, or the round-1 world alone.
func (res *simResults) chart() (string, []sim.Metrics) {
	if m := merged(res.round2); m != nil {
		return fmt.Sprintf("round-2 world, %d seeds", len(res.round2)), m
	}
	return "round-1 world", res.round1.ms
}

func writeSim(p func(string, ...any), res *simResults) {
	p("## Pool simulation\n\n")
	if res.brief {
		p("Brief: %d runs, %d at a time, in %v.\n\n", res.runs, res.par, res.elapsed.Round(time.Second))
		if len(res.round2) > 0 {
			writeRound2(p, res)
		}
		if len(res.round3) > 0 {
			writeRound3(p, res)
		}
		if res.round1 != nil {
			writeRound1(p, res)
		}
		return
	}
	p("![goodput and wasted attempts per strategy](chart.svg)\n\n")
	if res.partial {
		p("**A partial run** (`-only sim` narrowed by -seeds, -worlds, -strategies or -duration): not the report's full set.\n\n")
	}
	p("Ours drives `pool.Pool` through its public API, with no HTTP in between and every setting at its default (the idle TTL included): `PickAt` at the simulated instant (`clock.Fake`), the simulated world decides the answer, and `Lease.ReportAt` gets the verdict `transport.DefaultClassifier` gives the response or error a real exit would have produced for it (`sim.Verdict` builds them — status, headers, body, net/http's errors, the CONNECT answer through a tunnel — and asks the classifier of this build; a test checks every answer against a real `transport.Transport`). `pool.WithSeed` (drawn from the strategy's seeded source) and `pool.WithInlineSweep` keep a run deterministic. The peers choose exits by their own rules. A refused request (no exit ready) makes its worker wait RetryIn, at most the world's limit, then take its next request.\n\n")
	p("Two oracles. The **clairvoyant** oracle (`sim.Oracle`) peeks at each attempt's fate, its coin flips included: it sends only through an exit that will be served, so it uses a flaky exit (30 %% of attempts time out) only for the attempts that will not time out, never wastes one, uses a slow pair (round 3) only by the informed oracle's rule below, and when nothing will be served refuses with no wait (its worker waits the world's least, 100 ms). No strategy can know that: it is an upper bound, not a target. The **informed** oracle (`sim.InformedOracle`) knows the whole hidden state — which exits are dead, failing auth or flaky, each pair's ban and slow-body episodes and proxy denial, each origin's cap and window and each pair's count in it, and in round 3 which pairs are slow, every outage and every exit's churn — but not the coin flips (timeouts, latencies): it sends only where the state says it will be served, through a healthy exit at random, never provokes a 429 or a ban page, uses a flaky exit (or a slow pair) only when no fast, healthy one is ready and the attempt is worth its worker's expected 4.9 s (4.5 s) by what worker time gets where capacity does not bind (always in the round-1 world, never in the round-2 and round-3 ones), and refuses with the time until its soonest exit is ready, as the pool does. It is what a perfect learner could reach, so **issue 13's goodput target (≥ 0.90) is judged against the informed oracle**; every table shows both ratios.\n\n")
	p("Simulation: %d runs, %d at a time, in %v.\n\n", res.runs, res.par, res.elapsed.Round(time.Second))
	writeJudgements(p)
	if len(res.round2) > 0 {
		writeRound2(p, res)
	}
	if len(res.round3) > 0 {
		writeRound3(p, res)
	}
	if res.round1 != nil {
		writeRound1(p, res)
	}
}

// writeJudgements is the table of how this build's classifier judges each answer.
func writeJudgements(p func(string, ...any)) {
	p("### How this build's classifier judges each answer\n\n")
	p("Generated at run time by `sim.Judgements` (the verdict before the pool's own judgement at `ReportAt`).\n\n")
	p("| answer | on the wire | outcome | scope | class | more |\n|---|---|---|---|---|---|\n")
	for _, j := range sim.Judgements() {
		v := j.Verdict
		p("| %s | %s | %s | %s | %s | %s |\n", j.Result.Answer, j.Wire(), v.Outcome, v.Scope, v.Class, verdictMore(v))
	}
	p("\n")
}

// verdictMore lists a verdict's fields past outcome, scope and class that are set, whatever
// fields the pool's Verdict has in this build.
func verdictMore(v pool.Verdict) string {
	var parts []string
	rv, rt := reflect.ValueOf(v), reflect.TypeOf(v)
	for i := range rt.NumField() {
		switch f := rt.Field(i); f.Name {
		case "Outcome", "Scope", "Class":
		default:
			if fv := rv.Field(i); f.IsExported() && !fv.IsZero() {
				if fv.Kind() == reflect.Bool {
					parts = append(parts, f.Name)
				} else {
					parts = append(parts, fmt.Sprintf("%s %v", f.Name, fv.Interface()))
				}
			}
		}
	}
	return strings.Join(parts, ", ")
}

func writeRound2(p func(string, ...any), res *simResults) {
	writeSeeded(p, res, res.round2, "Round-2 world (issue 13)", writeRound2World, "Targets for ours (defaults), every seed (issue 13)")
}

// writeSeeded is a seeded world's section (ws, its seeds' runs): the title with its seeds, what
// describe says of it (left out when brief), and its figures, their targets under heading.
func writeSeeded(p func(string, ...any), res *simResults, ws []worldResult, title string,
	describe func(func(string, ...any), *simResults, []string), heading string) {
	var seeds []string
	for _, w := range ws {
		seeds = append(seeds, strconv.FormatUint(w.sc.Seed, 10))
	}
	p("### %s, seeds %s\n\n", title, strings.Join(seeds, ", "))
	if !res.brief {
		describe(p, res, seeds)
	}
	writeSeededFigures(p, res, ws, heading)
}

// writeRound2World describes the round-2 world and what each seed dealt.
func writeRound2World(p func(string, ...any), res *simResults, seeds []string) {
	sc := res.round2[0].sc
	p("Per seed: %s of simulated time, %d workers, %d exits (%d dead, %d failing proxy auth with 407, %d flaky: %.0f %% of attempts time out after %s, any origin; %d healthy exits whose squid refuses one origin by ACL, `X-Squid-Error: ERR_ACCESS_DENIED`, for the whole run), latency %s, refusals waited at most %s. ",
		dur(sc.Duration), sc.Workers, sc.Exits, sc.Dead, sc.Auth, sc.Flaky, sc.FlakyTimeout*100, dur(sc.Timeout), sc.Denials, span(sc.LatencyMin, sc.LatencyMax), dur(sc.MaxRefusalWait))
	var bands []string
	for _, b := range sc.BanBands {
		bands = append(bands, fmt.Sprintf("%.0f %% %s", b.Weight*100, span(b.Min, b.Max)))
	}
	p("%d origins, dealt by the seed (table below): caps per exit from 4 to 60 requests a minute and two without, over a sliding 60 s window (a sliding log of accepted requests) or the clock minute (every request counts), 429 with or without Retry-After; bans at %.1f an hour per pair (%s), answered by a challenge page or, on half the origins, by a plain 403 while the origin serves other exits; one origin answers a plain 403 to every exit for a path it forbids (%.0f %% of its requests: the site's answer, counted apart, neither goodput nor waste). Slow bodies: %.1f episodes an hour per pair of %s, during which a 200's body trickles and the body pace rule cuts it after %s (the worker is held that long, the attempt fails with a body-read error). Workload bursts: %.0f an hour of %s during which %.0f %% of requests go to one origin.\n\n",
		len(sc.Origins), sc.BansPerHour, strings.Join(bands, ", "), forbiddenShare(sc)*100, sc.StallsPerHour, span(sc.StallMin, sc.StallMax), dur(sc.StallTimeout),
		sc.BurstsPerHour, span(sc.BurstMin, sc.BurstMax), sc.BurstShare*100)

	writeOrigins(p, res.round2, seeds)
	p("\n| seed | ban episodes (%s) | of them plain 403 | slow-body episodes | proxy-denied pairs | bursts |\n|---|---|---|---|---|---|\n", strings.Join(bandNames(sc), " / "))
	for _, w := range res.round2 {
		var bs []string
		for _, n := range w.stats.Bans {
			bs = append(bs, strconv.Itoa(n))
		}
		p("| %d | %s | %d | %d | %d | %d |\n", w.sc.Seed, strings.Join(bs, " / "), w.stats.PlainBans, w.stats.Stalls, w.stats.Denied, w.stats.Bursts)
	}
	p("\n")
}

// writeOrigins is the table of a seeded world's origins, by seed.
func writeOrigins(p func(string, ...any), ws []worldResult, seeds []string) {
	p("| origin |")
	for _, s := range seeds {
		p(" seed %s |", s)
	}
	p("\n|---|%s\n", strings.Repeat("---|", len(seeds)))
	for o := range ws[0].sc.Origins {
		p("| %s |", sim.OriginKey(o))
		for _, w := range ws {
			p(" %s |", w.sc.Origins[o])
		}
		p("\n")
	}
}

// writeSeededFigures is a seeded world's targets (under heading) and tables: ws are its seeds' runs.
func writeSeededFigures(p func(string, ...any), res *simResults, ws []worldResult, heading string) {
	sc := ws[0].sc

	p("#### %s\n\n", heading)
	if !res.brief {
		p("429s provoked and wasted attempts compare per simulated hour with round 1's figures for ours (defaults) in the round-1 world (%d and %d in 3 h): this world keeps that world's workers, exits and duration, so the bounds are %.0f and %.0f in a 3 h run. Recovery is measured per ban episode: a pair's bans less than %s apart are one episode (only a strategy that sees the future is served between them), and only the episodes a strategy met — it got a challenge page or a ban's plain 403 from them — are measured, for a ban none of whose answers reached it did not take its pair out (the oracles meet none); episodes that ended less than %s before the end of a run are not measured. \"Not met\" counts the measurable episodes a strategy never met. An episode never followed by a success counts as longer than any in the median.\n\n",
			sim.Round1Ours429, sim.Round1OursWasted, sim.Target429Share*sim.Round1Ours429, sim.TargetWastedShare*sim.Round1OursWasted, dur(sim.BanMergeGap), dur(sim.RecoveryHorizon))
	}
	var names []string
	for _, t := range sim.Targets(sc, sim.Metrics{}, sim.Metrics{}) {
		names = append(names, t.Short)
	}
	p("| seed | %s | goodput ÷ clairvoyant oracle (not judged) | best peer (÷ informed oracle) |\n|---|%s---|---|\n", strings.Join(names, " | "), strings.Repeat("---|", len(names)))
	if ws[0].ms[0].Strategy != sim.Ours().Name {
		p("\n(ours (defaults) did not run.)\n\n")
	} else {
		for _, w := range ws {
			p("| %d |", w.sc.Seed)
			for _, t := range sim.Targets(w.sc, w.ms[0], w.informed()) {
				p(" %s %s |", t.Got, t.Mark())
			}
			p(" %.2f | %s |\n", ratio(w.ms[0], w.oracle()), bestPeer(w.ms))
		}
		if len(ws) > 1 {
			m := merged(ws)
			all := sc
			all.Duration = sc.Duration * time.Duration(len(ws))
			p("| all (pooled) |")
			for _, t := range sim.Targets(all, m[0], m[len(m)-2]) {
				p(" %s %s |", t.Got, t.Mark())
			}
			p(" %.2f | %s |\n", ratio(m[0], m[len(m)-1]), bestPeer(m))
		}
		p("\n")
		if m := merged(ws); !res.brief {
			in, cl := m[len(m)-2], m[len(m)-1]
			p("The goodput target is judged against the informed oracle, not the clairvoyant one: pooled over the seeds, ours (defaults) gets %.2f of the informed oracle's goodput and %.2f of the clairvoyant one's, and the clairvoyant oracle gets %.2f× the informed one's — from each attempt's coin flips (which flaky attempts time out), which no strategy can see, and from refusing without waiting. A target of 0.90 of the clairvoyant oracle could not be met by any strategy that can be built.\n\n",
				ratio(m[0], in), ratio(m[0], cl), ratio(cl, in))
		}
	}

	if len(ws) > 1 {
		writePooled(p, ws)
	}
	for _, w := range ws {
		p("#### Seed %d\n\n", w.sc.Seed)
		writeTable(p, w.ms, nil)
	}
}

// writePooled is a seeded world's table over every seed (ws).
func writePooled(p func(string, ...any), ws []worldResult) {
	p("#### All seeds, pooled\n\n")
	p("Counts summed over the seeds, ÷ each oracle of the sums (worst seed in brackets), recovery medians over every seed's episodes.\n\n")
	m := merged(ws)
	worst := make([][2]float64, len(m))
	for i := range m {
		worst[i] = [2]float64{2, 2}
		for _, w := range ws {
			worst[i][0] = min(worst[i][0], ratio(w.ms[i], w.oracle()))
			worst[i][1] = min(worst[i][1], ratio(w.ms[i], w.informed()))
		}
	}
	writeTable(p, m, worst)
}

func forbiddenShare(sc sim.Scenario) float64 {
	for _, o := range sc.Origins {
		if o.ForbiddenShare > 0 {
			return o.ForbiddenShare
		}
	}
	return 0
}

func bandNames(sc sim.Scenario) []string {
	var ns []string
	for _, b := range sc.BanBands {
		ns = append(ns, span(b.Min, b.Max))
	}
	return ns
}

func writeRound1(p func(string, ...any), res *simResults) {
	w := res.round1
	sc := w.sc
	p("### Round-1 world (seed 1), kept for comparison\n\n")
	if !res.brief {
		p("The world of the first round's figures, unchanged (`sim.Round1World`): %s of simulated time, %d workers, %d exits (%d dead, %d failing proxy auth with 407, %d flaky: %.0f %% of attempts time out after %s, any origin), %d origins each capping an (exit, origin) pair at %d requests a clock minute (429 with Retry-After to the minute's end), ban episodes of %s (challenge page, 403) at %.1f an hour per pair, latency %s, plain HTTP, no bursts, no plain 403s, no proxy denials, no slow bodies. A refused request makes its worker wait RetryIn, at most %s.\n\n",
			dur(sc.Duration), sc.Workers, sc.Exits, sc.Dead, sc.Auth, sc.Flaky, sc.FlakyTimeout*100, dur(sc.Timeout), len(sc.Origins), sc.Origins[0].Cap,
			span(sc.BanBands[0].Min, sc.BanBands[0].Max), sc.BansPerHour, span(sc.LatencyMin, sc.LatencyMax), dur(sc.MaxRefusalWait))
	}
	writeTable(p, w.ms, nil)
	if res.sens != nil {
		p("Sensitivity: with workers honouring RetryIn up to 30 s, ours (defaults) gets %d successes (%.2f of the clairvoyant oracle's, %.2f of the informed one's).\n\n",
			res.sens.Successes, ratio(*res.sens, w.oracle()), ratio(*res.sens, w.informed()))
	}
	if w.ms[0].Strategy == sim.Ours().Name {
		p("Issue 13's targets for ours (defaults), in this world (goodput ÷ the clairvoyant oracle: %.2f, not judged):\n\n%s\n",
			ratio(w.ms[0], w.oracle()), sim.FormatTargets(sim.Targets(sc, w.ms[0], w.informed())))
	}
}

// bestPeer names the peer (neither ours nor an oracle) with the most goodput, with its share of
// the informed oracle's.
func bestPeer(ms []sim.Metrics) string {
	best := -1
	for i, m := range ms[:len(ms)-oracles] {
		if !strings.HasPrefix(m.Strategy, "ours") && (best < 0 || m.Successes > ms[best].Successes) {
			best = i
		}
	}
	if best < 0 {
		return "none ran"
	}
	return fmt.Sprintf("%s (%.2f)", ms[best].Strategy, ratio(ms[best], ms[len(ms)-2]))
}

func ratio(m, oracle sim.Metrics) float64 {
	if oracle.Successes == 0 {
		return 0
	}
	return float64(m.Successes) / float64(oracle.Successes)
}

// writeTable is the table of ms, the informed oracle then the clairvoyant one last; worst, when
// set, is each strategy's worst seed's ÷ clairvoyant and ÷ informed. A world with slow pairs or
// outages (round 3) gets their columns too.
func writeTable(p func(string, ...any), ms []sim.Metrics, worst [][2]float64) {
	oracle, informed := ms[len(ms)-1], ms[len(ms)-2]
	round3 := false
	for _, m := range ms {
		round3 = round3 || m.SlowAttempts > 0 || m.Unavailable > 0
	}
	p("| strategy | goodput | ÷ clairvoyant oracle | ÷ informed oracle | wasted attempts | 429s provoked | challenge pages | plain-403 bans | proxy denials | slow bodies | site's 403s (not wasted) | timeouts | worker time lost to timeouts + slow bodies | refused (not sent) | recovery after a ban (median) | bans never recovered (of those met) |")
	if round3 {
		p(" 503s (outages) | attempts on slow pairs | worker time on slow pairs | 200 block pages (bans) |")
	}
	p("\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|%s\n", strings.Repeat("---|", map[bool]int{false: 0, true: 4}[round3]))
	for i, m := range ms {
		r, ri := fmt.Sprintf("%.2f", ratio(m, oracle)), fmt.Sprintf("%.2f", ratio(m, informed))
		if worst != nil {
			r += fmt.Sprintf(" (%.2f)", worst[i][0])
			ri += fmt.Sprintf(" (%.2f)", worst[i][1])
		}
		p("| %s | %d | %s | %s | %d | %d | %d | %d | %d | %d | %d | %d | %.1f %% | %d | %s | %s |", m.Strategy, m.Successes, r, ri,
			m.Wasted(), m.RateLimited, m.Blocked, m.Banned403, m.Denied, m.SlowBodies, m.Site403, m.Timeouts,
			100*(m.TimeoutTime+m.StallTime).Seconds()/m.WorkerTime.Seconds(), m.Refusals, sim.MedianRecoveryString(m), sim.UnrecoveredString(m))
		if round3 {
			p(" %d | %d | %.1f %% | %d |", m.Unavailable, m.SlowAttempts, 100*m.SlowTime.Seconds()/m.WorkerTime.Seconds(), m.SoftBlocked)
		}
		p("\n")
	}
	p("\n")
	if round3 {
		writeHardening(p, ms) // hardeningreport.go
	}
}

// dur writes d in its largest whole unit: "3 h", "15 min", "15 s", "200 ms".
func dur(d time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "min"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if d >= u.d && d%u.d == 0 {
			return fmt.Sprintf("%d %s", d/u.d, u.name)
		}
	}
	return d.String()
}

// span writes a..b in their largest common whole unit: "1–5 min", "1–2 h", "200 ms–1 s".
func span(a, b time.Duration) string {
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "min"}, {time.Second, "s"}} {
		if a >= u.d && a%u.d == 0 && b%u.d == 0 {
			return fmt.Sprintf("%d–%d %s", a/u.d, b/u.d, u.name)
		}
	}
	return dur(a) + "–" + dur(b)
}
