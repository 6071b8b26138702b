package probe

import (
	"encoding/json"
	"math"
	"strconv"
)

// The report's repeated elements — one Result per probe, one summary per exit and per target —
// are appended here by hand rather than by encoding/json, which spends most of its time in
// reflection and in a second pass that indents what it marshalled: at a hundred thousand exits
// that was most of the time after the deadline. The output is byte for byte what
// json.MarshalIndent(v, "    ", "  ") writes for an element of a top-level array
// (jsonenc_internal_test.go checks it against encoding/json on random and hostile values); any
// string or number off the common path is handed to encoding/json itself, so the escaping rules
// are its own.

// jsonEnc appends indented JSON to b, remembering the first error.
type jsonEnc struct {
	b   []byte
	err error
}

// jsonObj is an object being appended at a nesting depth (in indents).
type jsonObj struct {
	e     *jsonEnc
	depth int
	n     int // fields so far
}

func (e *jsonEnc) object(depth int) jsonObj {
	e.b = append(e.b, '{')
	return jsonObj{e: e, depth: depth}
}

// key starts the next field: name must need no escaping.
func (o *jsonObj) key(name string) *jsonEnc {
	if o.n > 0 {
		o.e.b = append(o.e.b, ',')
	}
	o.n++
	o.e.newline(o.depth + 1)
	o.e.b = append(o.e.b, '"')
	o.e.b = append(o.e.b, name...)
	o.e.b = append(o.e.b, '"', ':', ' ')
	return o.e
}

func (o *jsonObj) close() {
	if o.n > 0 {
		o.e.newline(o.depth)
	}
	o.e.b = append(o.e.b, '}')
}

func (e *jsonEnc) newline(depth int) {
	e.b = append(e.b, '\n')
	for range depth {
		e.b = append(e.b, ' ', ' ')
	}
}

func (e *jsonEnc) int(v int64) { e.b = strconv.AppendInt(e.b, v, 10) }

func (e *jsonEnc) bool(v bool) { e.b = strconv.AppendBool(e.b, v) }

// float appends f as encoding/json does: shortest 'f' form between 1e-6 and 1e21, its own
// treatment (exponent form, or an error for NaN and infinities) elsewhere.
func (e *jsonEnc) float(f float64) {
	if abs := math.Abs(f); abs == 0 || abs >= 1e-6 && abs < 1e21 {
		e.b = strconv.AppendFloat(e.b, f, 'f', -1, 64)
		return
	}
	e.marshal(f)
}

// string appends s quoted: printable ASCII other than the characters encoding/json escapes
// (" \ < > &) is copied; anything else is left to encoding/json.
func (e *jsonEnc) string(s string) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			e.marshal(s)
			return
		}
	}
	e.b = append(e.b, '"')
	e.b = append(e.b, s...)
	e.b = append(e.b, '"')
}

func (e *jsonEnc) marshal(v any) {
	data, err := json.Marshal(v)
	if err != nil && e.err == nil {
		e.err = err
	}
	e.b = append(e.b, data...)
}

// counts appends a histogram as encoding/json appends a map[string]int: keys sorted, null when
// nil.
func (e *jsonEnc) counts(m map[string]int, depth int) {
	if m == nil {
		e.b = append(e.b, "null"...)
		return
	}
	o := e.object(depth)
	for _, k := range sortedKeys(m) {
		if o.n > 0 {
			e.b = append(e.b, ',')
		}
		o.n++
		e.newline(depth + 1)
		e.string(k)
		e.b = append(e.b, ':', ' ')
		e.int(int64(m[k]))
	}
	o.close()
}

// result appends r at depth.
func (e *jsonEnc) result(r *Result, depth int) {
	o := e.object(depth)
	o.key("exit").string(r.Exit)
	o.key("target").string(r.Target)
	o.key("origin").string(r.Origin)
	if r.Status != 0 {
		o.key("status").int(int64(r.Status))
	}
	o.key("latency_ms").float(r.LatencyMS)
	o.key("outcome").string(r.Outcome.String())
	o.key("scope").string(r.Scope.String())
	o.key("class").string(string(r.Class))
	if r.Blocked {
		o.key("blocked").bool(true)
	}
	if r.Detector != "" {
		o.key("detector").string(r.Detector)
	}
	if r.RetryAfterMS != 0 {
		o.key("retry_after_ms").int(r.RetryAfterMS)
	}
	if r.ErrorKind != "" {
		o.key("error_kind").string(r.ErrorKind)
	}
	if r.Phase != "" {
		o.key("phase").string(r.Phase)
	}
	if r.Error != "" {
		o.key("error").string(r.Error)
	}
	if r.Bytes != 0 {
		o.key("bytes").int(r.Bytes)
	}
	if r.Spend != 0 {
		o.key("spend").float(r.Spend)
	}
	o.close()
}

// summary appends the fields of s to o, an object at depth: its Stats, then its Assessment.
func (e *jsonEnc) summary(o *jsonObj, s *Summary) {
	d := o.depth + 1 // the depth of the fields' values
	st := &s.Stats
	o.key("probes").int(int64(st.Probes))
	o.key("completed").int(int64(st.Completed))
	o.key("cut").int(int64(st.Cut))
	o.key("responses").int(int64(st.Responses))
	o.key("successes").int(int64(st.Successes))
	o.key("success_rate").float(st.SuccessRate)
	o.key("latency_ms")
	lat := e.object(d)
	lat.key("p50").float(st.LatencyMS.P50)
	lat.key("p95").float(st.LatencyMS.P95)
	lat.key("p99").float(st.LatencyMS.P99)
	lat.key("mean").float(st.LatencyMS.Mean)
	lat.key("max").float(st.LatencyMS.Max)
	lat.key("hung").int(int64(st.LatencyMS.Hung))
	if st.LatencyMS.HungFrom != "" {
		lat.key("hung_from").string(st.LatencyMS.HungFrom)
	}
	lat.close()
	o.key("statuses").counts(st.Statuses, d)
	o.key("classes").counts(st.Classes, d)
	o.key("failures").counts(st.Failures, d)
	o.key("throttled").int(int64(st.Throttled))
	o.key("blocked").int(int64(st.Blocked))
	o.key("permanent").int(int64(st.Permanent))
	if len(st.Detectors) > 0 {
		o.key("detectors").counts(st.Detectors, d)
	}
	if ra := st.RetryAfterMS; ra != nil {
		o.key("retry_after_ms")
		r := e.object(d)
		r.key("count").int(int64(ra.Count))
		r.key("p50").int(ra.P50)
		r.key("max").int(ra.Max)
		r.close()
	}
	if st.Bytes != 0 {
		o.key("bytes").int(st.Bytes)
	}
	if st.Spend != 0 {
		o.key("spend").float(st.Spend)
	}

	a := &s.Assessment
	o.key("verdict").string(a.Verdict.String())
	o.key("reasons")
	switch {
	case a.Reasons == nil:
		e.b = append(e.b, "null"...)
	case len(a.Reasons) == 0:
		e.b = append(e.b, '[', ']')
	default:
		e.b = append(e.b, '[')
		for i, reason := range a.Reasons {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			e.newline(d + 1)
			e.string(reason)
		}
		e.newline(d)
		e.b = append(e.b, ']')
	}
	o.key("recommendation")
	rec := e.object(d)
	rec.key("backoff")
	b := e.object(d + 1)
	b.key("initial_ms").int(a.Recommendation.Backoff.Initial.Milliseconds())
	b.key("cap_ms").int(a.Recommendation.Backoff.Cap.Milliseconds())
	b.key("max_retries").int(int64(a.Recommendation.Backoff.MaxRetries))
	b.close()
	rec.key("concurrency_factor").float(a.Recommendation.ConcurrencyFactor)
	rec.close()
}

// exitSummary appends s at depth.
func (e *jsonEnc) exitSummary(s *ExitSummary, depth int) {
	o := e.object(depth)
	o.key("exit").string(s.Exit)
	e.summary(&o, &s.Summary)
	o.close()
}

// targetSummary appends s at depth.
func (e *jsonEnc) targetSummary(s *TargetSummary, depth int) {
	o := e.object(depth)
	o.key("target").string(s.Target)
	o.key("origin").string(s.Origin)
	e.summary(&o, &s.Summary)
	o.close()
}
