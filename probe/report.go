package probe

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// SchemaVersion is the version of the Report's JSON schema (docs/probe.md). It changes when a
// field is removed or changes meaning; added fields do not change it.
const SchemaVersion = 1

// Report is what a probe run found. It marshals to the JSON schema documented in docs/probe.md
// (WriteJSON streams it; json.Marshal gives the same document) and holds no credentials: exits
// appear by label, targets redacted.
//
// It keeps one Result per probe and the overall Stats; the summaries per target and per exit
// ("targets" and "exits" in the JSON) are derived from the Results when they are written or asked
// for (Targets, Exits), so that neither Run nor the memory has to pay for a hundred thousand exit
// summaries at once. A Report decoded from JSON has everything but those two, which its methods
// recompute from Results and Policy.
type Report struct {
	SchemaVersion int `json:"schema_version"`
	// Started is when the run began; ElapsedMS how long it took, in milliseconds.
	Started   time.Time `json:"started"`
	ElapsedMS float64   `json:"elapsed_ms"`
	// DeadlineMS is the run's hard deadline in milliseconds.
	DeadlineMS int64 `json:"deadline_ms"`
	// CutByDeadline reports that the deadline (or the caller) cut at least one probe short.
	CutByDeadline bool `json:"cut_by_deadline"`

	// Verdict, Reasons and Recommendation are the overall assessment (Assess of Overall).
	Verdict        Health         `json:"verdict"`
	Reasons        []string       `json:"reasons"`
	Recommendation Recommendation `json:"recommendation"`

	// Overall aggregates every probe.
	Overall Stats `json:"overall"`
	// Capacity is each origin's capacity as a pool would read it after meeting the run's answers
	// (Capacities); nil unless the caller fills it in (cmd/proxyprobe does).
	Capacity []pool.Capacity `json:"capacity,omitempty"`
	// Results holds one entry per (exit, target), exit by exit, in the order of the Config.
	Results []Result `json:"results"`
	// Policy is the policy the verdicts were derived under, defaults filled in.
	Policy Policy `json:"policy"`

	grid grid // how Run laid the Results out, for the summaries
}

// Result is one probe: one GET of one target through one exit.
type Result struct {
	Exit   string `json:"exit"`   // the exit's label
	Target string `json:"target"` // the target URL, credentials redacted
	Origin string `json:"origin"` // the target's origin key, as the Pool keys breakers
	// Status is the HTTP status of the response, 0 when none arrived.
	Status int `json:"status,omitempty"`
	// LatencyMS is the time from the probe's start until its response headers arrived or it failed,
	// in milliseconds; for a probe cut by the deadline, until the cut; 0 for one never started.
	LatencyMS float64 `json:"latency_ms"`
	// Outcome, Scope and Class are the classifier's verdict (pool.Verdict).
	Outcome pool.Outcome `json:"outcome"`
	Scope   pool.Scope   `json:"scope"`
	Class   pool.Class   `json:"class"`
	// Blocked reports a WAF challenge or block page; Detector names the detector that matched.
	Blocked  bool   `json:"blocked,omitempty"`
	Detector string `json:"detector,omitempty"`
	// RetryAfterMS is the origin's Retry-After in milliseconds, when it sent one with a 429, 403
	// or 503.
	RetryAfterMS int64 `json:"retry_after_ms,omitempty"`
	// ErrorKind says why the probe did not complete: "timeout" (one of the probe's own timeouts),
	// "deadline" (cut by the run's deadline), "canceled" (the caller gave up), "body_read" (the
	// body died mid-read), or the verdict's class for other failures without a response
	// ("proxy_auth", "proxy_refused", "connection", …). Empty when a response arrived and its
	// body was read.
	ErrorKind string `json:"error_kind,omitempty"`
	// Phase is where a probe that did not complete stopped: "queued" (never started), "connect"
	// (TCP to the proxy), "proxy" (the CONNECT or SOCKS handshake), "tls", "headers" or "body".
	Phase string `json:"phase,omitempty"`
	// Error is the error's text, with the exit's password removed.
	Error string `json:"error,omitempty"`
	// Bytes is what the probe's connections carried to and from the proxy, both directions
	// (spend.go); Spend that at the exit's own prices (its cost attributes), in their unit.
	Bytes int64   `json:"bytes,omitempty"`
	Spend float64 `json:"spend,omitempty"`
}

// UnmarshalJSON decodes a Result as MarshalJSON (the default encoding) writes it: pool.Outcome
// has a text form but no parser, so the outcome is read here.
func (r *Result) UnmarshalJSON(data []byte) error {
	type plain Result // without methods: no recursion
	var aux struct {
		plain
		Outcome string `json:"outcome"`
	}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	*r = Result(aux.plain)
	for o := pool.Success; o <= pool.Neutral; o++ {
		if o.String() == aux.Outcome {
			r.Outcome = o
			return nil
		}
	}
	return fmt.Errorf("probe: unknown outcome %q", aux.Outcome)
}

// Success reports whether the probe counts as a success: the classifier's outcome is Success and
// the body, if any, was read without failing.
func (r *Result) Success() bool { return r.Outcome == pool.Success && r.ErrorKind == "" }

// cut reports whether the deadline or the caller cut the probe short.
func (r *Result) cut() bool { return r.ErrorKind == KindDeadline || r.ErrorKind == KindCanceled }

// hung reports whether the probe never answered because it ran out of time: a timeout of its own
// or the deadline (or the caller) cut it before its response headers.
func (r *Result) hung() bool { return r.Status == 0 && (r.ErrorKind == KindTimeout || r.cut()) }

// Error kinds of a Result besides the verdict classes.
const (
	KindTimeout  = "timeout"
	KindDeadline = "deadline"
	KindCanceled = "canceled"
	KindBodyRead = "body_read"
)

// Stats aggregates a set of probes.
type Stats struct {
	// Probes is how many probes were planned; Completed how many finished (with a response or an
	// error of their own) before the deadline; Cut how many the deadline or the caller cut short.
	Probes    int `json:"probes"`
	Completed int `json:"completed"`
	Cut       int `json:"cut"`
	// Responses is how many probes received response headers.
	Responses int `json:"responses"`
	// Successes counts probes that succeeded (Result.Success); SuccessRate is Successes / Probes,
	// rounded to 4 decimals: a probe cut by the deadline counts as a failure.
	Successes   int     `json:"successes"`
	SuccessRate float64 `json:"success_rate"`
	// LatencyMS summarises the latencies of the probes that received a response and of those
	// that hung (Latency.Hung).
	LatencyMS Latency `json:"latency_ms"`
	// Statuses counts responses by HTTP status code ("200": 3).
	Statuses map[string]int `json:"statuses"`
	// Classes counts probes by verdict class.
	Classes map[string]int `json:"classes"`
	// Failures counts the probes that did not succeed by cause: the error kind when the probe did
	// not complete ("timeout", "deadline", "proxy_refused", …), else the verdict class of the
	// response ("rate_limited", "blocked", "proxy_auth", "origin_5xx", …).
	Failures map[string]int `json:"failures"`
	// Throttled counts 429 responses; Blocked WAF challenge or block pages (a 429 challenge page
	// counts in both); Permanent the exit-scoped permanent failures that park an exit.
	Throttled int `json:"throttled"`
	Blocked   int `json:"blocked"`
	Permanent int `json:"permanent"`
	// Detectors counts blocked responses by detector name.
	Detectors map[string]int `json:"detectors,omitempty"`
	// RetryAfterMS summarises the Retry-After values received, when any was.
	RetryAfterMS *RetryAfter `json:"retry_after_ms,omitempty"`
	// Bytes and Spend sum the probes' Bytes and Spend (spend.go): Overall.Spend estimates what
	// the run cost at the providers.
	Bytes int64   `json:"bytes,omitempty"`
	Spend float64 `json:"spend,omitempty"`
}

// Latency is a latency distribution in milliseconds, over the probes that received response
// headers and those that hung: ran out of time before them (a timeout of their own, or the
// deadline or the caller cut them). A hung probe never answered, so it ranks above every answer.
// Percentiles are nearest-rank: the smallest value at least p % of the values do not exceed. A
// percentile (or the maximum) whose rank falls on a hung probe is beyond the timeout: HungFrom
// says which, and its value is only how long that probe had waited (hung probes rank among
// themselves by that wait; 0 for one the deadline left queued). Mean is over the answers alone.
// All zero when there are no values.
type Latency struct {
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	P99  float64 `json:"p99"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
	// Hung counts the hung probes ranked.
	Hung int `json:"hung"`
	// HungFrom is the first of "p50", "p95", "p99" and "max" that falls on a hung probe: it and
	// every one after it are beyond the timeout. Empty when all of them are answers.
	HungFrom string `json:"hung_from,omitempty"`
}

// latencyRanks are the names of Latency's ranked values, lowest rank first, as in HungFrom.
var latencyRanks = [...]string{"p50", "p95", "p99", "max"}

// Beyond reports whether the ranked value named q ("p50", "p95", "p99" or "max") falls on a hung
// probe: the probe at that rank never answered, so the value is beyond its timeout.
func (l Latency) Beyond(q string) bool {
	if l.HungFrom == "" {
		return false
	}
	from, at := slices.Index(latencyRanks[:], l.HungFrom), slices.Index(latencyRanks[:], q)
	return from >= 0 && at >= from
}

// RetryAfter summarises Retry-After values in milliseconds.
type RetryAfter struct {
	Count int   `json:"count"`
	P50   int64 `json:"p50"`
	Max   int64 `json:"max"`
}

// Health is a verdict on a set of probes.
type Health uint8

// The verdicts, from best to worst. The zero value is Healthy.
const (
	Healthy  Health = iota // dispatch at full concurrency
	Degraded               // dispatch at reduced concurrency, with the recommended backoff
	Critical               // do not dispatch: circuit-break the pipeline, or probe again later
)

var healthNames = [...]string{"HEALTHY", "DEGRADED", "CRITICAL"}

// String returns "HEALTHY", "DEGRADED" or "CRITICAL".
func (h Health) String() string {
	if int(h) < len(healthNames) {
		return healthNames[h]
	}
	return fmt.Sprintf("Health(%d)", uint8(h))
}

// MarshalText encodes a Health as its String form.
func (h Health) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText decodes the String form of a Health.
func (h *Health) UnmarshalText(b []byte) error {
	for i, n := range healthNames {
		if string(b) == n {
			*h = Health(i)
			return nil
		}
	}
	return fmt.Errorf("probe: unknown verdict %q", b)
}

// ExitCode is the process exit code cmd/proxyprobe uses for h: 0, 1 or 2.
func (h Health) ExitCode() int { return int(min(h, Critical)) }

// Recommendation is what a scheduler should do given a verdict.
type Recommendation struct {
	// Backoff is the retry backoff to use: exponential from Initial, capped at Cap, at most
	// MaxRetries retries.
	Backoff Backoff `json:"backoff"`
	// ConcurrencyFactor is the share of the planned concurrency to dispatch with, in [0, 1].
	ConcurrencyFactor float64 `json:"concurrency_factor"`
}

// Assessment is a verdict with its reasons and recommendation.
type Assessment struct {
	Verdict        Health         `json:"verdict"`
	Reasons        []string       `json:"reasons"`
	Recommendation Recommendation `json:"recommendation"`
}

// Summary is the Stats of a set of probes and their Assessment.
type Summary struct {
	Stats
	Assessment
}

// TargetSummary summarises one target's probes through every exit.
type TargetSummary struct {
	Target string `json:"target"`
	Origin string `json:"origin"`
	Summary
}

// ExitSummary summarises one exit's probes of every target.
type ExitSummary struct {
	Exit string `json:"exit"`
	Summary
}
