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

// NewReport builds a Report from results under p: the overall Stats and verdict at once, the
// summaries per target and per exit (Report.Targets, Report.Exits; each in the order of first
// appearance in results) when asked for. Started, ElapsedMS and DeadlineMS are left for the
// caller; Run fills them in. The Report keeps results (it does not copy them): do not change
// them afterwards.
func NewReport(results []Result, p Policy) *Report {
	if results == nil {
		results = []Result{}
	}
	return newReport(results, aggregate(results), p, grid{})
}

// newReport is the Report of results whose overall Stats are overall, laid out as g says.
func newReport(results []Result, overall Stats, p Policy, g grid) *Report {
	if p.Validate() != nil {
		p = Policy{}
	}
	p = p.withDefaults()
	a := Assess(overall, p)
	return &Report{
		SchemaVersion: SchemaVersion, Results: results, Policy: p, grid: g,
		Overall: overall, Verdict: a.Verdict, Reasons: a.Reasons, Recommendation: a.Recommendation,
		CutByDeadline: overall.Cut > 0,
	}
}

func aggregate(results []Result) Stats {
	a := newAccumulator()
	for i := range results {
		a.add(&results[i])
	}
	return a.stats()
}

// accumulator folds Results into Stats one at a time, so that Run aggregates as the probes
// finish instead of after the deadline. The zero value is not ready: use newAccumulator.
type accumulator struct {
	s      Stats
	lat    []float64 // latencies of the probes that received a response
	hung   []float64 // waits of the probes that started and never answered (hungProbe)
	queued int       // probes the deadline left queued: hung, with no wait
	ra     []int64   // Retry-After values
}

func newAccumulator() *accumulator {
	return &accumulator{s: Stats{Statuses: map[string]int{}, Classes: map[string]int{}, Failures: map[string]int{}}}
}

// reset empties a, keeping its storage.
func (a *accumulator) reset() {
	st, cl, fl, det := a.s.Statuses, a.s.Classes, a.s.Failures, a.s.Detectors
	clear(st)
	clear(cl)
	clear(fl)
	clear(det)
	a.s = Stats{Statuses: st, Classes: cl, Failures: fl, Detectors: det}
	a.lat, a.hung, a.queued, a.ra = a.lat[:0], a.hung[:0], 0, a.ra[:0]
}

// add folds r in.
func (a *accumulator) add(r *Result) {
	s := &a.s
	s.Probes++
	if r.cut() {
		s.Cut++
	} else {
		s.Completed++
	}
	ok := r.Success()
	if ok {
		s.Successes++
	}
	if r.Status > 0 {
		s.Responses++
		s.Statuses[statusKey(r.Status)]++
		a.lat = append(a.lat, r.LatencyMS)
	} else if r.hung() {
		a.hung = append(a.hung, r.LatencyMS)
	}
	if r.Class != "" {
		s.Classes[string(r.Class)]++
	}
	if !ok {
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
			if s.Detectors == nil { // absent from the JSON when nil or empty
				s.Detectors = map[string]int{}
			}
			s.Detectors[r.Detector]++
		}
	}
	if r.Outcome == pool.Permanent && r.Scope == pool.ScopeExit {
		s.Permanent++
	}
	if r.RetryAfterMS > 0 {
		a.ra = append(a.ra, r.RetryAfterMS)
	}
	s.Bytes += r.Bytes
	s.Spend += r.Spend
}

// addCut folds in n probes cut before they started, all alike (kind "deadline" or "canceled",
// class canceled, no response): one step for the many the deadline leaves queued.
func (a *accumulator) addCut(kind string, n int) {
	if n == 0 {
		return
	}
	s := &a.s
	s.Probes += n
	s.Cut += n
	s.Classes[string(pool.ClassCanceled)] += n
	s.Failures[kind] += n
	a.queued += n
}

// stats returns the Stats folded so far. It sorts the latencies in place; add may still be
// called afterwards.
func (a *accumulator) stats() Stats {
	s := a.s
	if s.Probes > 0 {
		s.SuccessRate = math.Round(float64(s.Successes)/float64(s.Probes)*1e4) / 1e4
	}
	s.LatencyMS = latency(a.lat, a.hung, a.queued)
	s.Spend = roundSpend(s.Spend)
	if len(a.ra) > 0 {
		slices.Sort(a.ra)
		s.RetryAfterMS = &RetryAfter{Count: len(a.ra), P50: a.ra[rank(50, len(a.ra))], Max: a.ra[len(a.ra)-1]}
	}
	return s
}

// statusKey is the decimal form of an HTTP status code, without an allocation for the usual ones.
func statusKey(code int) string {
	if code >= 100 && code < 600 {
		return statusKeys[code-100]
	}
	return strconv.Itoa(code)
}

var statusKeys = func() (k [500]string) {
	for i := range k {
		k[i] = strconv.Itoa(i + 100)
	}
	return k
}()

// latency summarises the latencies of the answered probes and the waits of the hung ones
// (milliseconds), queued hung probes with no wait besides; it sorts both slices in place. The
// hung rank above every answer, ordered by their waits, the queued first.
func latency(answered, hung []float64, queued int) Latency {
	n := len(answered) + queued + len(hung)
	if n == 0 {
		return Latency{}
	}
	slices.Sort(answered)
	slices.Sort(hung)
	at := func(i int) float64 {
		switch j := i - len(answered); {
		case j < 0:
			return answered[i]
		case j < queued:
			return 0
		default:
			return hung[j-queued]
		}
	}
	l := Latency{Hung: queued + len(hung)}
	for k, q := range [...]struct {
		p int
		v *float64
	}{{50, &l.P50}, {95, &l.P95}, {99, &l.P99}, {100, &l.Max}} { // in the order of latencyRanks
		i := rank(q.p, n)
		*q.v = at(i)
		if i >= len(answered) && l.HungFrom == "" {
			l.HungFrom = latencyRanks[k]
		}
	}
	if len(answered) > 0 {
		var sum float64
		for _, x := range answered {
			sum += x
		}
		l.Mean = roundMS(sum / float64(len(answered)))
	}
	return l
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
