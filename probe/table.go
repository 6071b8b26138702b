package probe

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// WriteTable writes r for people: the verdict and its reasons, the recommendation, then one row
// per target and one per exit. Machines should read the JSON instead.
func (r *Report) WriteTable(w io.Writer) error {
	ew := &errWriter{w: w}
	cut := ""
	if r.CutByDeadline {
		cut = fmt.Sprintf(", %d cut by the deadline", r.Overall.Cut)
	}
	fmt.Fprintf(ew, "verdict: %s (%d probes in %.0f ms, deadline %d ms%s)\n", r.Verdict, r.Overall.Probes, r.ElapsedMS, r.DeadlineMS, cut)
	for _, reason := range r.Reasons {
		fmt.Fprintf(ew, "  - %s\n", reason)
	}
	b := r.Recommendation.Backoff
	fmt.Fprintf(ew, "recommendation: backoff %v initial, %v cap, %d retries; concurrency × %.2f\n\n",
		b.Initial, b.Cap, b.MaxRetries, r.Recommendation.ConcurrencyFactor)

	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TARGET\tVERDICT\tSUCCESS\tP50 ms\tP95 ms\tP99 ms\t429\tBLOCKED\tCUT\tSTATUSES\tFAILURES")
	for _, t := range r.Targets {
		row(tw, t.Target, &t.Summary)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "EXIT\tVERDICT\tSUCCESS\tP50 ms\tP95 ms\tP99 ms\t429\tBLOCKED\tCUT\tSTATUSES\tFAILURES")
	for _, e := range r.Exits {
		row(tw, e.Exit, &e.Summary)
	}
	tw.Flush()
	return ew.err
}

func row(w io.Writer, name string, s *Summary) {
	fmt.Fprintf(w, "%s\t%s\t%d/%d\t%.0f\t%.0f\t%.0f\t%d\t%d\t%d\t%s\t%s\n", name, s.Verdict,
		s.Successes, s.Probes, s.LatencyMS.P50, s.LatencyMS.P95, s.LatencyMS.P99,
		s.Throttled, s.Blocked, s.Cut, counts(s.Statuses), counts(s.Failures))
}

// counts formats a histogram as "k:v k:v", keys sorted, or "-".
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, k+":"+strconv.Itoa(m[k]))
	}
	return strings.Join(parts, " ")
}

// errWriter remembers the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}
