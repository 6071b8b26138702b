package probe_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
)

// ok is a successful probe answered 200 after ms milliseconds.
func ok(ms float64) probe.Result {
	return probe.Result{Exit: "e", Target: "t", Status: 200, LatencyMS: ms, Outcome: pool.Success, Class: pool.ClassOK}
}

// throttled is a probe answered 429 after ms milliseconds, with a Retry-After of ra.
func throttled(ms float64, ra time.Duration) probe.Result {
	return probe.Result{Exit: "e", Target: "t", Status: 429, LatencyMS: ms, Outcome: pool.Transient,
		Class: pool.ClassRateLimited, RetryAfterMS: ra.Milliseconds()}
}

// blocked is a probe answered by a Cloudflare challenge page.
func blocked(ms float64) probe.Result {
	return probe.Result{Exit: "e", Target: "t", Status: 403, LatencyMS: ms, Outcome: pool.Transient,
		Class: pool.ClassBlocked, Blocked: true, Detector: "cloudflare"}
}

// timedOut is a probe that timed out awaiting its headers.
func timedOut(ms float64) probe.Result {
	return probe.Result{Exit: "e", Target: "t", LatencyMS: ms, Outcome: pool.Transient, Class: pool.ClassTimeout,
		ErrorKind: probe.KindTimeout, Phase: "headers"}
}

// cut is a probe cut by the deadline.
func cut() probe.Result {
	return probe.Result{Exit: "e", Target: "t", Outcome: pool.Neutral, Class: pool.ClassCanceled,
		ErrorKind: probe.KindDeadline, Phase: "headers"}
}

func repeat(n int, r probe.Result) []probe.Result {
	out := make([]probe.Result, n)
	for i := range out {
		out[i] = r
	}
	return out
}

func join(parts ...[]probe.Result) []probe.Result {
	var out []probe.Result
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestAssess is the verdict derivation, rule by rule, starting from the seed article's example.
func TestAssess(t *testing.T) {
	sec := time.Second
	for i, tc := range []struct {
		name    string
		results []probe.Result
		policy  probe.Policy
		verdict probe.Health
		backoff probe.Backoff
		factor  float64
		reasons []string // substrings, one per reason, in order
	}{
		{
			// The seed's three targets: one 200, one 429, one 200 after a second. Any 429 is
			// critical; the slow 200 raises nothing (p99 1.03 s is under the 5 s floor).
			name:    "seed example",
			results: []probe.Result{ok(120), throttled(180, 0), ok(1030)},
			verdict: probe.Critical, backoff: probe.Backoff{Initial: 5 * sec, Cap: 60 * sec, MaxRetries: 5}, factor: 0.33,
			reasons: []string{"throttled: 1 of 3 probes answered 429", "success rate 0.67 below 0.90"},
		},
		{
			name:    "all fast",
			results: repeat(10, ok(100)),
			verdict: probe.Healthy, backoff: probe.Backoff{Initial: 1 * sec, Cap: 10 * sec, MaxRetries: 2}, factor: 1,
		},
		{
			// The timed-out probe is the p99: the first retry waits as long as it did.
			name:    "95% success is healthy",
			results: join(repeat(19, ok(100)), repeat(1, timedOut(5000))),
			verdict: probe.Healthy, backoff: probe.Backoff{Initial: 5 * sec, Cap: 10 * sec, MaxRetries: 2}, factor: 0.95,
		},
		{
			// Regression: one probe of ten hung 5 s and the p95 read 9.7 ms, over the answers
			// alone; a success rate of 0.9 then passed as HEALTHY.
			name:    "a hung probe at the p95 is a slow tail",
			results: join(repeat(9, ok(9.7)), repeat(1, timedOut(5000))),
			verdict: probe.Degraded, backoff: probe.Backoff{Initial: 5 * sec, Cap: 30 * sec, MaxRetries: 3}, factor: 0.9,
			reasons: []string{"slow tail: p95 latency beyond the timeout (1 of 10 probes never answered in time)"},
		},
		{
			name:    "85% success is degraded",
			results: join(repeat(17, ok(100)), repeat(3, timedOut(5000))),
			verdict: probe.Degraded, backoff: probe.Backoff{Initial: 5 * sec, Cap: 30 * sec, MaxRetries: 3}, factor: 0.85,
			reasons: []string{"success rate 0.85 below 0.90 (failures: timeout 3)", "slow tail: p95 latency beyond the timeout (3 of 20"},
		},
		{
			name:    "40% success is critical",
			results: join(repeat(4, ok(100)), repeat(6, timedOut(5000))),
			verdict: probe.Critical, backoff: probe.Backoff{Initial: 5 * sec, Cap: 60 * sec, MaxRetries: 5}, factor: 0.4,
			reasons: []string{"success rate 0.40 below 0.50", "slow tail: p95 latency beyond the timeout"},
		},
		{
			// Mean 390 ms (the seed's mean rule would pass it), p95 3 s: the tail is slow.
			name:    "slow tail judged on p95",
			results: join(repeat(18, ok(100)), repeat(2, ok(3000))),
			verdict: probe.Degraded, backoff: probe.Backoff{Initial: 3 * sec, Cap: 30 * sec, MaxRetries: 3}, factor: 0.67,
			reasons: []string{"slow tail: p95 latency 3s above 2s"},
		},
		{
			// Mean 2.1 s (the seed's mean rule would fail it), p95 100 ms: one outlier.
			name:    "one extreme outlier is not a slow tail",
			results: join(repeat(99, ok(100)), repeat(1, ok(200000))),
			verdict: probe.Healthy, backoff: probe.Backoff{Initial: 1 * sec, Cap: 10 * sec, MaxRetries: 2}, factor: 1,
		},
		{
			// Retry-After 120 s: the first retry waits it out, and the cap makes room for it.
			name:    "Retry-After raises initial and cap",
			results: join(repeat(9, ok(100)), repeat(1, throttled(100, 120*sec))),
			verdict: probe.Critical, backoff: probe.Backoff{Initial: 120 * sec, Cap: 120 * sec, MaxRetries: 5}, factor: 0.45,
		},
		{
			name:    "Retry-After capped at MaxRetryAfter",
			results: join(repeat(9, ok(100)), repeat(1, throttled(100, 99999*sec))),
			policy:  probe.Policy{MaxRetryAfter: 10 * time.Minute},
			verdict: probe.Critical, backoff: probe.Backoff{Initial: 10 * time.Minute, Cap: 10 * time.Minute, MaxRetries: 5}, factor: 0.45,
		},
		{
			name:    "throttling tolerated below CriticalThrottled is degraded",
			results: join(repeat(19, ok(100)), repeat(1, throttled(100, 0))),
			policy:  probe.Policy{CriticalThrottled: 0.1},
			verdict: probe.Degraded, backoff: probe.Backoff{Initial: 2 * sec, Cap: 30 * sec, MaxRetries: 3}, factor: 0.48,
			reasons: []string{"throttled: 1 of 20 probes answered 429 (5.0%, tolerated up to 10.0%)"},
		},
		{
			name:    "throttle rule off",
			results: join(repeat(19, ok(100)), repeat(1, throttled(100, 0))),
			policy:  probe.Policy{CriticalThrottled: -1},
			verdict: probe.Healthy, backoff: probe.Backoff{Initial: 1 * sec, Cap: 10 * sec, MaxRetries: 2}, factor: 0.48,
		},
		{
			name:    "a challenge page degrades",
			results: join(repeat(19, ok(100)), repeat(1, blocked(100))),
			verdict: probe.Degraded, backoff: probe.Backoff{Initial: 2 * sec, Cap: 30 * sec, MaxRetries: 3}, factor: 0.95,
			reasons: []string{"blocked: 1 of 20 probes got a challenge or block page (cloudflare 1)"},
		},
		{
			name:    "everything cut by the deadline",
			results: repeat(5, cut()),
			verdict: probe.Critical, backoff: probe.Backoff{Initial: 5 * sec, Cap: 60 * sec, MaxRetries: 5}, factor: 0,
			reasons: []string{"success rate 0.00 below 0.50 (failures: deadline 5)", "slow tail: p95 latency beyond the timeout (5 of 5"},
		},
		{
			name:    "no probes",
			verdict: probe.Critical, backoff: probe.Backoff{Initial: 5 * sec, Cap: 60 * sec, MaxRetries: 5}, factor: 0,
			reasons: []string{"no probes"},
		},
		{
			name:    "stricter DegradedSuccess",
			results: join(repeat(19, ok(100)), repeat(1, timedOut(100))),
			policy:  probe.Policy{DegradedSuccess: 0.99},
			verdict: probe.Degraded, backoff: probe.Backoff{Initial: 2 * sec, Cap: 30 * sec, MaxRetries: 3}, factor: 0.95,
		},
		{
			name:    "slow-tail rule off",
			results: join(repeat(18, ok(100)), repeat(2, ok(3000))),
			policy:  probe.Policy{SlowP95: -1},
			verdict: probe.Healthy, backoff: probe.Backoff{Initial: 3 * sec, Cap: 10 * sec, MaxRetries: 2}, factor: 1,
		},
		{
			name:    "custom critical floor",
			results: []probe.Result{ok(120), throttled(180, 0), ok(1030)},
			policy:  probe.Policy{Critical: probe.Backoff{Initial: 10 * sec}},
			verdict: probe.Critical, backoff: probe.Backoff{Initial: 10 * sec, Cap: 60 * sec, MaxRetries: 5}, factor: 0.33,
		},
	} {
		s := probe.Summarize(tc.results, tc.policy)
		got := s.Assessment
		if got.Verdict != tc.verdict || got.Recommendation.Backoff != tc.backoff || got.Recommendation.ConcurrencyFactor != tc.factor {
			t.Errorf("%d %s: Assess = %v %+v ×%v, want %v %+v ×%v (reasons %q)", i, tc.name,
				got.Verdict, got.Recommendation.Backoff, got.Recommendation.ConcurrencyFactor,
				tc.verdict, tc.backoff, tc.factor, got.Reasons)
		}
		if tc.reasons != nil {
			if len(got.Reasons) != len(tc.reasons) {
				t.Errorf("%d %s: reasons = %q, want %d", i, tc.name, got.Reasons, len(tc.reasons))
				continue
			}
			for j, want := range tc.reasons {
				if !strings.Contains(got.Reasons[j], want) {
					t.Errorf("%d %s: reason %d = %q, want it to contain %q", i, tc.name, j, got.Reasons[j], want)
				}
			}
		}
		if tc.verdict == probe.Healthy && len(got.Reasons) != 0 {
			t.Errorf("%d %s: a healthy verdict with reasons %q", i, tc.name, got.Reasons)
		}
	}
}

// TestSeedExampleStats: the seed's example aggregates as the article reports it (success rate
// 0.67, one throttle, no ban), and nearest-rank percentiles pick observed values.
func TestSeedExampleStats(t *testing.T) {
	s := probe.Summarize([]probe.Result{ok(120), throttled(180, 0), ok(1030)}, probe.Policy{})
	want := probe.Latency{P50: 180, P95: 1030, P99: 1030, Mean: 443.333, Max: 1030}
	if s.SuccessRate != 0.6667 || s.Throttled != 1 || s.Blocked != 0 || s.LatencyMS != want {
		t.Errorf("Summarize(seed) = rate %v, throttled %d, blocked %d, latency %+v; want 0.6667, 1, 0, %+v",
			s.SuccessRate, s.Throttled, s.Blocked, s.LatencyMS, want)
	}
	if got := s.Statuses; !reflect.DeepEqual(got, map[string]int{"200": 2, "429": 1}) {
		t.Errorf("statuses = %v", got)
	}
}

// TestLatencyRanksHungProbes: probes that timed out or were cut before their headers rank above
// every answer, the queued first; the percentiles that fall on them are beyond the timeout.
func TestLatencyRanksHungProbes(t *testing.T) {
	queued := cut()
	queued.Phase = "queued"
	refused := probe.Result{Exit: "e", Target: "t", LatencyMS: 0.1, Outcome: pool.Transient, Class: pool.ClassProxyRefused, ErrorKind: "proxy_refused"}
	tests := []struct {
		name    string
		results []probe.Result
		want    probe.Latency
		beyond  []string
	}{
		{"answers only", repeat(10, ok(9.7)), probe.Latency{P50: 9.7, P95: 9.7, P99: 9.7, Mean: 9.7, Max: 9.7}, nil},
		{"one hung in ten", join(repeat(9, ok(9.7)), []probe.Result{timedOut(5000), refused}),
			probe.Latency{P50: 9.7, P95: 5000, P99: 5000, Mean: 9.7, Max: 5000, Hung: 1, HungFrom: "p95"}, []string{"p95", "p99", "max"}},
		{"one hung in twenty", join(repeat(19, ok(10)), []probe.Result{timedOut(3000)}),
			probe.Latency{P50: 10, P95: 10, P99: 3000, Mean: 10, Max: 3000, Hung: 1, HungFrom: "p99"}, []string{"p99", "max"}},
		{"cut and queued", join([]probe.Result{ok(10), timedOut(3000)}, repeat(2, queued)),
			probe.Latency{P50: 0, P95: 3000, P99: 3000, Mean: 10, Max: 3000, Hung: 3, HungFrom: "p50"}, []string{"p50", "p95", "p99", "max"}},
		{"never answered, never hung", repeat(3, refused), probe.Latency{}, nil},
	}
	for _, tt := range tests {
		got := probe.Summarize(tt.results, probe.Policy{}).LatencyMS
		if got != tt.want {
			t.Errorf("%s: Summarize().LatencyMS = %+v, want %+v", tt.name, got, tt.want)
		}
		for _, q := range []string{"p50", "p95", "p99", "max"} {
			if b, want := got.Beyond(q), slices.Contains(tt.beyond, q); b != want {
				t.Errorf("%s: Latency.Beyond(%q) = %v, want %v", tt.name, q, b, want)
			}
		}
	}
}

// TestPolicyValidate: out-of-range fields are errors, all reported together.
func TestPolicyValidate(t *testing.T) {
	if err := (probe.Policy{}).Validate(); err != nil {
		t.Errorf("Policy{}.Validate() = %v", err)
	}
	err := probe.Policy{CriticalSuccess: 1.5, ThrottleDecrease: 2, Degraded: probe.Backoff{Initial: time.Minute, Cap: time.Second}}.Validate()
	for _, want := range []string{"CriticalSuccess", "ThrottleDecrease", "Cap 1s below Initial 1m0s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to mention %q", err, want)
		}
	}
	if err := (probe.Policy{CriticalSuccess: 0.95}).Validate(); err == nil {
		t.Error("CriticalSuccess above the default DegradedSuccess: Validate() = nil")
	}
}

// TestPolicyJSONRoundTrip: the policy in a report reads back as it was written.
func TestPolicyJSONRoundTrip(t *testing.T) {
	p := probe.Policy{CriticalSuccess: 0.4, SlowP95: 1500 * time.Millisecond, Critical: probe.Backoff{Initial: 3 * time.Second, Cap: time.Minute, MaxRetries: 4}}
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var back probe.Policy
	if err := json.Unmarshal(data, &back); err != nil || back != p {
		t.Errorf("round trip of %s = %+v, %v; want %+v", data, back, err, p)
	}
}
