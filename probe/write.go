package probe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"iter"
)

// WriteJSON writes r to w as indented JSON (two spaces), followed by a newline: the document
// json.MarshalIndent(r, "", "  ") gives, streamed. The summaries per target and per exit are
// computed one at a time as they are written and every value is encoded on its own, so the memory
// it needs does not grow with the number of exits or probes; the time it takes does, in
// proportion to the size of the report (about 1 KB per exit and target probed). It buffers its
// writes and returns the first error of w.
func (r *Report) WriteJSON(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	jw := newJSONWriter(bw)
	jw.raw("{\n")
	jw.field("schema_version", r.SchemaVersion)
	jw.field("started", r.Started)
	jw.field("elapsed_ms", r.ElapsedMS)
	jw.field("deadline_ms", r.DeadlineMS)
	jw.field("cut_by_deadline", r.CutByDeadline)
	jw.field("verdict", r.Verdict)
	jw.field("reasons", r.Reasons)
	jw.field("recommendation", r.Recommendation)
	jw.field("overall", r.Overall)
	if len(r.Capacity) > 0 {
		jw.field("capacity", r.Capacity) // capacity.go
	}
	writeArray(jw, "targets", r.summaries(true, true), func(e *jsonEnc, g group, s *Summary) {
		e.targetSummary(&TargetSummary{Target: g.key, Origin: g.origin, Summary: *s}, 2)
	})
	writeArray(jw, "exits", r.summaries(false, true), func(e *jsonEnc, g group, s *Summary) {
		e.exitSummary(&ExitSummary{Exit: g.key, Summary: *s}, 2)
	})
	writeArray(jw, "results", indexed(r.Results), func(e *jsonEnc, _ int, res *Result) {
		e.result(res, 2)
	})
	jw.raw(`  "policy": `)
	jw.value(jw.top, r.Policy)
	jw.raw("\n}\n")
	if jw.err != nil {
		return jw.err
	}
	return bw.Flush()
}

// MarshalJSON encodes r as WriteJSON does (json.Marshal then compacts it, or indents it for
// json.MarshalIndent): the summaries per target and per exit are included.
func (r Report) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	if err := r.WriteJSON(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// jsonWriter writes the parts of an indented JSON document, remembering the first error.
type jsonWriter struct {
	w   *bufio.Writer
	err error
	// top encodes the values of top-level fields with the indentation their lines need, into a
	// writer that drops the newline Encode adds. The elements of the arrays go through jsonEnc.
	top *json.Encoder
}

func newJSONWriter(w *bufio.Writer) *jsonWriter {
	jw := &jsonWriter{w: w}
	out := &chompWriter{jw}
	jw.top = json.NewEncoder(out)
	jw.top.SetIndent("  ", "  ")
	return jw
}

func (jw *jsonWriter) raw(s string) {
	if jw.err == nil {
		_, jw.err = jw.w.WriteString(s)
	}
}

func (jw *jsonWriter) value(enc *json.Encoder, v any) {
	if jw.err == nil {
		jw.err = enc.Encode(v)
	}
}

// field writes one top-level field, not the last: `  "name": value,` and a newline.
func (jw *jsonWriter) field(name string, v any) {
	jw.raw(`  "` + name + `": `)
	jw.value(jw.top, v)
	jw.raw(",\n")
}

// writeArray writes the top-level field name (not the last) with an element for each step of
// seq, appended by elem: `[]` when there are none, as encoding/json writes an empty slice.
func writeArray[K, V any](jw *jsonWriter, name string, seq iter.Seq2[K, V], elem func(*jsonEnc, K, V)) {
	jw.raw(`  "` + name + `": [`)
	n := 0
	e := &jsonEnc{}
	for k, v := range seq {
		if jw.err != nil {
			return
		}
		e.b = e.b[:0]
		if n > 0 {
			e.b = append(e.b, ',')
		}
		e.newline(2)
		elem(e, k, v)
		if e.err != nil {
			jw.err = e.err
			return
		}
		if _, err := jw.w.Write(e.b); err != nil {
			jw.err = err
			return
		}
		n++
	}
	if n > 0 {
		jw.raw("\n  ")
	}
	jw.raw("],\n")
}

// indexed yields each element of s by index and pointer (a Result is too large to copy for
// nothing).
func indexed[T any](s []T) iter.Seq2[int, *T] {
	return func(yield func(int, *T) bool) {
		for i := range s {
			if !yield(i, &s[i]) {
				return
			}
		}
	}
}

// chompWriter writes to a jsonWriter what json.Encoder.Encode writes, without the newline it
// ends each value with (Encode makes one Write call per value).
type chompWriter struct{ jw *jsonWriter }

func (c *chompWriter) Write(p []byte) (int, error) {
	q := bytes.TrimSuffix(p, []byte("\n"))
	if _, err := c.jw.w.Write(q); err != nil {
		return 0, err
	}
	return len(p), nil
}
