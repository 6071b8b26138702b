package probe

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// hostile are strings encoding/json escapes, or does not: each must come out as it writes it.
var hostile = []string{
	"", "plain", "exit-000042", "https://u:xxxxx@shop.example/robots.txt?q=1#f", "<script>&amp;</script>",
	`quote" back\slash`, "\x00\x01\x1f\x7f", "\b\f\n\r\t", "ünïcödé 日本", "\u2028\u2029", "\xff\xfe invalid",
	"proxyconnect tcp: dial tcp 127.0.0.1:1: connect: connection refused", "a\u00a0b", "emoji 🙂",
}

// appendedAsEncodingJSON checks that append gives what json.MarshalIndent(v, "    ", "  ") gives.
func appendedAsEncodingJSON(t *testing.T, what string, v any, appendFn func(*jsonEnc)) {
	t.Helper()
	want, wantErr := json.MarshalIndent(v, "    ", "  ")
	e := &jsonEnc{}
	appendFn(e)
	if (e.err != nil) != (wantErr != nil) {
		t.Fatalf("%s: error %v, encoding/json's %v", what, e.err, wantErr)
	}
	if wantErr == nil && !bytes.Equal(e.b, want) {
		t.Fatalf("%s: appended\n%s\nencoding/json\n%s", what, e.b, want)
	}
}

func randomString(r *rand.Rand) string {
	if r.IntN(3) == 0 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		return string(b)
	}
	return hostile[r.IntN(len(hostile))]
}

func randomFloat(r *rand.Rand) float64 {
	fs := []float64{0, math.Copysign(0, -1), 1, 0.5, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 123.456, 1030, 392.5, 0.3333, -2.5e-9}
	switch r.IntN(3) {
	case 0:
		return fs[r.IntN(len(fs))]
	case 1:
		return roundMS(r.Float64() * 10000)
	default:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(50)-25))
	}
}

func randomCounts(r *rand.Rand) map[string]int {
	switch r.IntN(4) {
	case 0:
		return nil
	case 1:
		return map[string]int{}
	}
	m := map[string]int{}
	for range r.IntN(6) {
		m[randomString(r)] = r.IntN(2000) - 10
	}
	return m
}

func randomResult(r *rand.Rand) Result {
	return Result{
		Exit: randomString(r), Target: randomString(r), Origin: randomString(r),
		Status: []int{0, 200, 404, 429, 999, -1}[r.IntN(6)], LatencyMS: randomFloat(r),
		Outcome: pool.Outcome(r.IntN(5)), Scope: pool.Scope([]int{0, 1, 2, 3, 255}[r.IntN(5)]),
		Class: pool.Class(randomString(r)), Blocked: r.IntN(2) == 0, Detector: randomString(r),
		RetryAfterMS: []int64{0, 1, 30000, -5, math.MaxInt64}[r.IntN(5)],
		ErrorKind:    randomString(r), Phase: randomString(r), Error: randomString(r),
	}
}

func randomSummary(r *rand.Rand) Summary {
	var s Summary
	st := &s.Stats
	st.Probes, st.Completed, st.Cut, st.Responses, st.Successes = r.IntN(100), r.IntN(100), r.IntN(100), r.IntN(100), r.IntN(100)
	st.SuccessRate = randomFloat(r)
	st.LatencyMS = Latency{randomFloat(r), randomFloat(r), randomFloat(r), randomFloat(r), randomFloat(r), r.IntN(100), []string{"", "p95", randomString(r)}[r.IntN(3)]}
	st.Statuses, st.Classes, st.Failures, st.Detectors = randomCounts(r), randomCounts(r), randomCounts(r), randomCounts(r)
	st.Throttled, st.Blocked, st.Permanent = r.IntN(10), r.IntN(10), r.IntN(10)
	if r.IntN(2) == 0 {
		st.RetryAfterMS = &RetryAfter{Count: r.IntN(9), P50: r.Int64N(1e9), Max: r.Int64N(1e9)}
	}
	s.Verdict = Health(r.IntN(4))
	switch r.IntN(3) {
	case 1:
		s.Reasons = []string{}
	case 2:
		for range 1 + r.IntN(3) {
			s.Reasons = append(s.Reasons, randomString(r))
		}
	}
	s.Recommendation = Recommendation{
		Backoff:           Backoff{Initial: time.Duration(r.Int64N(1e12)) - 1e9, Cap: time.Duration(r.Int64N(1e12)), MaxRetries: r.IntN(9)},
		ConcurrencyFactor: randomFloat(r),
	}
	return s
}

// TestJSONEncMatchesEncodingJSON: the hand-written encoders of the report's elements write what
// encoding/json writes, for random and hostile values (escapes, invalid UTF-8, U+2028, nil and
// empty maps, out-of-range enums, numbers in exponent form).
func TestJSONEncMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		res := randomResult(r)
		appendedAsEncodingJSON(t, "result", res, func(e *jsonEnc) { e.result(&res, 2) })
		es := ExitSummary{Exit: randomString(r), Summary: randomSummary(r)}
		appendedAsEncodingJSON(t, "exit summary", es, func(e *jsonEnc) { e.exitSummary(&es, 2) })
		ts := TargetSummary{Target: randomString(r), Origin: randomString(r), Summary: randomSummary(r)}
		appendedAsEncodingJSON(t, "target summary", ts, func(e *jsonEnc) { e.targetSummary(&ts, 2) })
		if t.Failed() {
			t.Fatalf("case %d", i)
		}
	}
}

// TestJSONEncNaN: a NaN latency is an error, as in encoding/json, not invalid JSON.
func TestJSONEncNaN(t *testing.T) {
	res := Result{LatencyMS: math.NaN()}
	e := &jsonEnc{}
	e.result(&res, 2)
	if e.err == nil {
		t.Errorf("result with a NaN latency: no error, wrote %s", e.b)
	}
}

// FuzzJSONEnc: for any string and number, the encoder writes what encoding/json writes.
func FuzzJSONEnc(f *testing.F) {
	for i, s := range hostile {
		f.Add(s, float64(i)*1.5e-7, int64(i))
	}
	f.Fuzz(func(t *testing.T, s string, x float64, n int64) {
		res := Result{Exit: s, Target: s, Origin: s, Status: int(n), LatencyMS: x, Class: pool.Class(s), Detector: s,
			RetryAfterMS: n, ErrorKind: s, Phase: s, Error: s}
		appendedAsEncodingJSON(t, "result", res, func(e *jsonEnc) { e.result(&res, 2) })
		es := ExitSummary{Exit: s, Summary: Summary{
			Stats:      Stats{SuccessRate: x, Statuses: map[string]int{s: int(n)}, Detectors: map[string]int{s: 1, s + "x": 2}},
			Assessment: Assessment{Reasons: []string{s}, Recommendation: Recommendation{ConcurrencyFactor: x}},
		}}
		appendedAsEncodingJSON(t, "exit summary", es, func(e *jsonEnc) { e.exitSummary(&es, 2) })
	})
}
