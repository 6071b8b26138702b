package probe

import (
	"cmp"
	"math"
	"slices"
	"strconv"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Summarize aggregates results into Stats and assesses them under p.
func Summarize(results []Result, p Policy) Summary {
	s := aggregate(results)
	return Summary{Stats: s, Assessment: Assess(s, p)}
}

// NewReport builds a Report from results under p: overall, per target and per exit (each in the
// order of first appearance in results). Started, ElapsedMS, DeadlineMS and CutByDeadline are left
// for the caller; Run fills them in.
func NewReport(results []Result, p Policy) *Report {
	if p.Validate() != nil {
		p = Policy{}
	}
	p = p.withDefaults()
	r := &Report{SchemaVersion: SchemaVersion, Results: results, Policy: p}
	if r.Results == nil {
		r.Results = []Result{}
	}
	overall := Summarize(results, p)
	r.Overall = overall.Stats
	r.Verdict, r.Reasons, r.Recommendation = overall.Verdict, overall.Reasons, overall.Recommendation
	r.CutByDeadline = overall.Cut > 0

	type group struct {
		key     string
		origin  string
		results []Result
	}
	var byTarget, byExit []*group
	ti, ei := map[string]*group{}, map[string]*group{}
	for _, res := range results {
		g := ti[res.Target]
		if g == nil {
			g = &group{key: res.Target, origin: res.Origin}
			ti[res.Target] = g
			byTarget = append(byTarget, g)
		}
		g.results = append(g.results, res)
		g = ei[res.Exit]
		if g == nil {
			g = &group{key: res.Exit}
			ei[res.Exit] = g
			byExit = append(byExit, g)
		}
		g.results = append(g.results, res)
	}
	r.Targets = make([]TargetSummary, 0, len(byTarget))
	for _, g := range byTarget {
		r.Targets = append(r.Targets, TargetSummary{Target: g.key, Origin: g.origin, Summary: Summarize(g.results, p)})
	}
	r.Exits = make([]ExitSummary, 0, len(byExit))
	for _, g := range byExit {
		r.Exits = append(r.Exits, ExitSummary{Exit: g.key, Summary: Summarize(g.results, p)})
	}
	return r
}

func aggregate(results []Result) Stats {
	s := Stats{
		Probes:   len(results),
		Statuses: map[string]int{},
		Classes:  map[string]int{},
		Failures: map[string]int{},
	}
	var lat []float64
	var ra []int64
	for i := range results {
		r := &results[i]
		if r.cut() {
			s.Cut++
		} else {
			s.Completed++
		}
		if r.Success() {
			s.Successes++
		}
		if r.Status > 0 {
			s.Responses++
			s.Statuses[strconv.Itoa(r.Status)]++
			lat = append(lat, r.LatencyMS)
		}
		if r.Class != "" {
			s.Classes[string(r.Class)]++
		}
		if !r.Success() {
			cause := r.ErrorKind
			if cause == "" {
				cause = string(r.Class)
			}
			s.Failures[cause]++
		}
		if r.Status == 429 {
			s.Throttled++
		}
		if r.Blocked {
			s.Blocked++
			if r.Detector != "" {
				if s.Detectors == nil {
					s.Detectors = map[string]int{}
				}
				s.Detectors[r.Detector]++
			}
		}
		if r.Outcome == pool.Permanent && r.Scope == pool.ScopeExit {
			s.Permanent++
		}
		if r.RetryAfterMS > 0 {
			ra = append(ra, r.RetryAfterMS)
		}
	}
	if s.Probes > 0 {
		s.SuccessRate = math.Round(float64(s.Successes)/float64(s.Probes)*1e4) / 1e4
	}
	s.LatencyMS = latency(lat)
	if len(ra) > 0 {
		slices.Sort(ra)
		s.RetryAfterMS = &RetryAfter{Count: len(ra), P50: ra[rank(50, len(ra))], Max: ra[len(ra)-1]}
	}
	return s
}

// latency summarises values (milliseconds); it sorts them in place.
func latency(v []float64) Latency {
	if len(v) == 0 {
		return Latency{}
	}
	slices.Sort(v)
	var sum float64
	for _, x := range v {
		sum += x
	}
	return Latency{
		P50: v[rank(50, len(v))], P95: v[rank(95, len(v))], P99: v[rank(99, len(v))],
		Mean: roundMS(sum / float64(len(v))), Max: v[len(v)-1],
	}
}

// rank is the index of the nearest-rank p-th percentile among n sorted values: the smallest value
// with at least p % of the values at or below it.
func rank(p, n int) int {
	return max((p*n+99)/100-1, 0)
}

// roundMS rounds milliseconds to the microsecond.
func roundMS(ms float64) float64 { return math.Round(ms*1000) / 1000 }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, cmp.Compare)
	return keys
}
