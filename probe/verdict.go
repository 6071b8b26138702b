package probe

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// Defaults for Policy fields left at their zero value: the thresholds of the seed article
// (docs/probe.md), with the slow tail judged on p95 instead of the mean.
const (
	DefaultCriticalSuccess  = 0.5
	DefaultDegradedSuccess  = 0.9
	DefaultSlowP95          = 2 * time.Second
	DefaultThrottleDecrease = ratelimit.DefaultDecrease
	DefaultMaxRetryAfter    = breaker.DefaultMaxRetryAfter
)

// The default backoff for each verdict.
var (
	DefaultHealthyBackoff  = Backoff{Initial: 1 * time.Second, Cap: 10 * time.Second, MaxRetries: 2}
	DefaultDegradedBackoff = Backoff{Initial: 2 * time.Second, Cap: 30 * time.Second, MaxRetries: 3}
	DefaultCriticalBackoff = Backoff{Initial: 5 * time.Second, Cap: 60 * time.Second, MaxRetries: 5}
)

// Policy turns Stats into a verdict and a recommendation (Assess). Every field's zero value means
// its default, so Policy{} is the recommended policy. Shares are fractions of the probes, in [0, 1].
type Policy struct {
	// CriticalSuccess: a success rate below it is CRITICAL. Default 0.5; negative disables.
	CriticalSuccess float64
	// CriticalThrottled: a share of 429 responses above it is CRITICAL. The default, 0, makes any
	// 429 critical; throttling at or below a raised threshold is still DEGRADED. Negative disables.
	CriticalThrottled float64
	// DegradedSuccess: a success rate below it is DEGRADED. Default 0.9; negative disables.
	DegradedSuccess float64
	// SlowP95: a p95 response latency above it is DEGRADED (the tail, not the mean: a few slow
	// exits should not hide behind many fast ones, nor one extreme outlier condemn them all).
	// Default 2 s; negative disables.
	SlowP95 time.Duration
	// DegradedBlocked: a share of challenge or block pages above it is DEGRADED. The default, 0,
	// makes any challenge page degrade the verdict. Negative disables.
	DegradedBlocked float64

	// Healthy, Degraded and Critical are the backoff floors for each verdict. A zero field takes the
	// field of DefaultHealthyBackoff, DefaultDegradedBackoff or DefaultCriticalBackoff. Assess
	// raises Initial to the slow tail (p99) and the median Retry-After, and Cap to the longest
	// Retry-After.
	Healthy, Degraded, Critical Backoff

	// ThrottleDecrease multiplies the concurrency factor when any probe was answered 429, as the
	// transport's adaptive rate limits cut a pair's pace on a 429. Default 0.5; in (0, 1].
	ThrottleDecrease float64
	// MaxRetryAfter caps the Retry-After values the recommendation (and StateFrom) honours, so a
	// hostile "Retry-After: 99999999" cannot stall a pipeline for years. Default 1 h.
	MaxRetryAfter time.Duration
}

// Backoff is an exponential retry backoff: Initial, doubled per retry up to Cap, at most
// MaxRetries retries. It marshals to JSON in milliseconds: {"initial_ms", "cap_ms", "max_retries"}.
type Backoff struct {
	Initial    time.Duration
	Cap        time.Duration
	MaxRetries int
}

type backoffJSON struct {
	InitialMS  int64 `json:"initial_ms"`
	CapMS      int64 `json:"cap_ms"`
	MaxRetries int   `json:"max_retries"`
}

// MarshalJSON encodes b with its durations in milliseconds.
func (b Backoff) MarshalJSON() ([]byte, error) {
	return json.Marshal(backoffJSON{b.Initial.Milliseconds(), b.Cap.Milliseconds(), b.MaxRetries})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (b *Backoff) UnmarshalJSON(data []byte) error {
	var j backoffJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*b = Backoff{time.Duration(j.InitialMS) * time.Millisecond, time.Duration(j.CapMS) * time.Millisecond, j.MaxRetries}
	return nil
}

type policyJSON struct {
	CriticalSuccess   float64 `json:"critical_success"`
	CriticalThrottled float64 `json:"critical_throttled"`
	DegradedSuccess   float64 `json:"degraded_success"`
	SlowP95MS         int64   `json:"slow_p95_ms"`
	DegradedBlocked   float64 `json:"degraded_blocked"`
	Healthy           Backoff `json:"healthy"`
	Degraded          Backoff `json:"degraded"`
	Critical          Backoff `json:"critical"`
	ThrottleDecrease  float64 `json:"throttle_decrease"`
	MaxRetryAfterMS   int64   `json:"max_retry_after_ms"`
}

// MarshalJSON encodes p with snake_case names and durations in milliseconds.
func (p Policy) MarshalJSON() ([]byte, error) {
	return json.Marshal(policyJSON{
		p.CriticalSuccess, p.CriticalThrottled, p.DegradedSuccess, p.SlowP95.Milliseconds(), p.DegradedBlocked,
		p.Healthy, p.Degraded, p.Critical, p.ThrottleDecrease, p.MaxRetryAfter.Milliseconds(),
	})
}

// UnmarshalJSON decodes what MarshalJSON encodes.
func (p *Policy) UnmarshalJSON(data []byte) error {
	var j policyJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*p = Policy{
		CriticalSuccess: j.CriticalSuccess, CriticalThrottled: j.CriticalThrottled, DegradedSuccess: j.DegradedSuccess,
		SlowP95: time.Duration(j.SlowP95MS) * time.Millisecond, DegradedBlocked: j.DegradedBlocked,
		Healthy: j.Healthy, Degraded: j.Degraded, Critical: j.Critical,
		ThrottleDecrease: j.ThrottleDecrease, MaxRetryAfter: time.Duration(j.MaxRetryAfterMS) * time.Millisecond,
	}
	return nil
}

// Validate reports every field of p that is out of range.
func (p Policy) Validate() error {
	var errs []error
	share := func(name string, v float64) {
		if math.IsNaN(v) || v > 1 {
			errs = append(errs, fmt.Errorf("probe: Policy.%s = %v: want a share in [0, 1], or negative to disable", name, v))
		}
	}
	share("CriticalSuccess", p.CriticalSuccess)
	share("CriticalThrottled", p.CriticalThrottled)
	share("DegradedSuccess", p.DegradedSuccess)
	share("DegradedBlocked", p.DegradedBlocked)
	if d := p.ThrottleDecrease; math.IsNaN(d) || d < 0 || d > 1 {
		errs = append(errs, fmt.Errorf("probe: Policy.ThrottleDecrease = %v: want (0, 1]", d))
	}
	if p.MaxRetryAfter < 0 {
		errs = append(errs, fmt.Errorf("probe: Policy.MaxRetryAfter = %v: must not be negative", p.MaxRetryAfter))
	}
	for _, b := range []struct {
		name string
		b    Backoff
	}{{"Healthy", p.Healthy}, {"Degraded", p.Degraded}, {"Critical", p.Critical}} {
		if b.b.Initial < 0 || b.b.Cap < 0 || b.b.MaxRetries < 0 {
			errs = append(errs, fmt.Errorf("probe: Policy.%s = %+v: must not be negative", b.name, b.b))
		}
		if b.b.Initial > 0 && b.b.Cap > 0 && b.b.Cap < b.b.Initial {
			errs = append(errs, fmt.Errorf("probe: Policy.%s: Cap %v below Initial %v", b.name, b.b.Cap, b.b.Initial))
		}
	}
	w := p.withDefaults()
	if w.CriticalSuccess >= 0 && w.DegradedSuccess >= 0 && w.CriticalSuccess > w.DegradedSuccess {
		errs = append(errs, fmt.Errorf("probe: Policy: CriticalSuccess %v above DegradedSuccess %v", w.CriticalSuccess, w.DegradedSuccess))
	}
	return errors.Join(errs...)
}

// withDefaults returns p with every zero field set to its default.
func (p Policy) withDefaults() Policy {
	if p.CriticalSuccess == 0 {
		p.CriticalSuccess = DefaultCriticalSuccess
	}
	if p.DegradedSuccess == 0 {
		p.DegradedSuccess = DefaultDegradedSuccess
	}
	if p.SlowP95 == 0 {
		p.SlowP95 = DefaultSlowP95
	}
	if p.ThrottleDecrease == 0 {
		p.ThrottleDecrease = DefaultThrottleDecrease
	}
	if p.MaxRetryAfter == 0 {
		p.MaxRetryAfter = DefaultMaxRetryAfter
	}
	p.Healthy = p.Healthy.or(DefaultHealthyBackoff)
	p.Degraded = p.Degraded.or(DefaultDegradedBackoff)
	p.Critical = p.Critical.or(DefaultCriticalBackoff)
	return p
}

func (b Backoff) or(def Backoff) Backoff {
	if b.Initial == 0 {
		b.Initial = def.Initial
	}
	if b.Cap == 0 {
		b.Cap = max(def.Cap, b.Initial)
	}
	if b.MaxRetries == 0 {
		b.MaxRetries = def.MaxRetries
	}
	return b
}

// Assess derives a verdict and a recommendation from s under p (docs/probe.md, "Verdict"):
//
//   - CRITICAL when there were no probes, when the share of 429 responses is above
//     CriticalThrottled (by default: any 429), or when the success rate is below CriticalSuccess;
//   - otherwise DEGRADED when any 429 was tolerated, the success rate is below DegradedSuccess,
//     the p95 latency is above SlowP95 or beyond the timeout (Latency.Beyond: the probe at that
//     rank hung), or the share of challenge pages is above DegradedBlocked (by default: any);
//   - otherwise HEALTHY.
//
// The backoff starts from the verdict's floor in p; Initial is raised to the p99 response latency
// (retrying sooner than the slow tail answers only piles on) and to the median Retry-After; Cap to
// the longest Retry-After (each capped at MaxRetryAfter) and never below Initial. The concurrency
// factor is the success rate, times ThrottleDecrease when any probe was throttled, times
// SlowP95 / p95 when the answers' tail is slow (a p95 beyond the timeout falls on failures, which
// the success rate already counts), rounded to two decimals.
//
// A p that Validate rejects is replaced by the defaults. Reasons are in English, one per rule that
// fired; a HEALTHY verdict has none.
func Assess(s Stats, p Policy) Assessment {
	if p.Validate() != nil {
		p = Policy{}
	}
	p = p.withDefaults()
	var a Assessment
	a.Reasons = []string{}
	raise := func(h Health, format string, args ...any) {
		a.Verdict = max(a.Verdict, h)
		a.Reasons = append(a.Reasons, fmt.Sprintf(format, args...))
	}
	if s.Probes == 0 {
		raise(Critical, "no probes")
	} else {
		n := float64(s.Probes)
		throttled, blocked := float64(s.Throttled)/n, float64(s.Blocked)/n
		if s.Throttled > 0 && p.CriticalThrottled >= 0 {
			if throttled > p.CriticalThrottled {
				raise(Critical, "throttled: %d of %d probes answered 429 (%s above %s)", s.Throttled, s.Probes, pct(throttled), pct(p.CriticalThrottled))
			} else {
				raise(Degraded, "throttled: %d of %d probes answered 429 (%s, tolerated up to %s)", s.Throttled, s.Probes, pct(throttled), pct(p.CriticalThrottled))
			}
		}
		switch rate := s.SuccessRate; {
		case p.CriticalSuccess >= 0 && rate < p.CriticalSuccess:
			raise(Critical, "success rate %.2f below %.2f (failures: %s)", rate, p.CriticalSuccess, histogram(s.Failures))
		case p.DegradedSuccess >= 0 && rate < p.DegradedSuccess:
			raise(Degraded, "success rate %.2f below %.2f (failures: %s)", rate, p.DegradedSuccess, histogram(s.Failures))
		}
		if p.SlowP95 >= 0 {
			switch p95 := msDuration(s.LatencyMS.P95); {
			case s.LatencyMS.Beyond("p95"):
				raise(Degraded, "slow tail: p95 latency beyond the timeout (%d of %d probes never answered in time)", s.LatencyMS.Hung, s.Probes)
			case s.Responses > 0 && p95 > p.SlowP95:
				raise(Degraded, "slow tail: p95 latency %v above %v", p95.Round(time.Millisecond), p.SlowP95)
			}
		}
		if s.Blocked > 0 && p.DegradedBlocked >= 0 && blocked > p.DegradedBlocked {
			raise(Degraded, "blocked: %d of %d probes got a challenge or block page (%s)", s.Blocked, s.Probes, detectorList(s.Detectors))
		}
	}
	a.Recommendation = recommend(s, p, a.Verdict)
	return a
}

// recommend derives the backoff and concurrency factor for verdict h from s.
func recommend(s Stats, p Policy, h Health) Recommendation {
	b := [...]Backoff{Healthy: p.Healthy, Degraded: p.Degraded, Critical: p.Critical}[min(h, Critical)]
	b.Initial = max(b.Initial, ceilMS(msDuration(s.LatencyMS.P99)))
	if ra := s.RetryAfterMS; ra != nil {
		b.Initial = max(b.Initial, min(msDuration(float64(ra.P50)), p.MaxRetryAfter))
		b.Cap = max(b.Cap, min(msDuration(float64(ra.Max)), p.MaxRetryAfter))
	}
	b.Cap = max(b.Cap, b.Initial)

	f := s.SuccessRate
	if s.Throttled > 0 {
		f *= p.ThrottleDecrease
	}
	// A p95 beyond the timeout falls on probes that hung: failures, which the success rate holds.
	if p95 := msDuration(s.LatencyMS.P95); p.SlowP95 > 0 && s.Responses > 0 && !s.LatencyMS.Beyond("p95") && p95 > p.SlowP95 {
		f *= float64(p.SlowP95) / float64(p95)
	}
	f = math.Round(min(max(f, 0), 1)*100) / 100
	return Recommendation{Backoff: b, ConcurrencyFactor: f}
}

func msDuration(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

// ceilMS rounds d up to a whole millisecond.
func ceilMS(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", f*100) }

func detectorList(m map[string]int) string {
	if len(m) == 0 {
		return "no detector named"
	}
	return histogram(m)
}

// histogram formats m as "a 2, b 1": counts descending, then keys.
func histogram(m map[string]int) string {
	keys := sortedKeys(m)
	slices.SortStableFunc(keys, func(a, b string) int { return cmp.Compare(m[b], m[a]) })
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
