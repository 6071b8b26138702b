package probe

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// tableBlock is how many rows WriteTable aligns at a time: the columns of a block are as wide as
// its widest cell, and a block is all the table holds in memory, however many exits there are.
const tableBlock = 1000

// WriteTable writes r for people: the verdict and its reasons, the recommendation, then one row
// per target and one per exit (aligned in blocks of a thousand rows). A latency percentile that
// falls on a probe that hung reads "> timeout"; one of a row with no latency to rank (no probe
// answered or hung) reads "-". Machines should read the JSON instead.
func (r *Report) WriteTable(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	ew := &errWriter{w: bw}
	cut := ""
	if r.CutByDeadline {
		cut = fmt.Sprintf(", %d cut by the deadline", r.Overall.Cut)
	}
	fmt.Fprintf(ew, "verdict: %s (%d probes in %.0f ms, deadline %d ms%s)\n", r.Verdict, r.Overall.Probes, r.ElapsedMS, r.DeadlineMS, cut)
	for _, reason := range r.Reasons {
		fmt.Fprintf(ew, "  - %s\n", reason)
	}
	b := r.Recommendation.Backoff
	fmt.Fprintf(ew, "recommendation: backoff %v initial, %v cap, %d retries; concurrency × %.2f\n",
		b.Initial, b.Cap, b.MaxRetries, r.Recommendation.ConcurrencyFactor)
	fmt.Fprintf(ew, "traffic: %d bytes through the proxies; spend %s (estimated at the exits' prices)\n\n", r.Overall.Bytes, spendCell(r.Overall.Spend))

	writeCapacity(ew, r.Capacity) // capacity.go
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	n := 0
	flush := func() {
		if n++; n%tableBlock == 0 {
			tw.Flush()
		}
	}
	fmt.Fprintln(tw, "TARGET\tVERDICT\tSUCCESS\tP50 ms\tP95 ms\tP99 ms\t429\tBLOCKED\tCUT\tSTATUSES\tFAILURES\tBYTES\tSPEND")
	for t := range r.Targets() {
		if ew.err != nil {
			return ew.err
		}
		row(tw, t.Target, &t.Summary)
		flush()
	}
	tw.Flush()
	n = 0
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "EXIT\tVERDICT\tSUCCESS\tP50 ms\tP95 ms\tP99 ms\t429\tBLOCKED\tCUT\tSTATUSES\tFAILURES\tBYTES\tSPEND")
	for e := range r.Exits() {
		if ew.err != nil {
			return ew.err
		}
		row(tw, e.Exit, &e.Summary)
		flush()
	}
	tw.Flush()
	if ew.err != nil {
		return ew.err
	}
	return bw.Flush()
}

func row(w io.Writer, name string, s *Summary) {
	l := &s.LatencyMS
	fmt.Fprintf(w, "%s\t%s\t%d/%d\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d\t%s\n", name, s.Verdict,
		s.Successes, s.Probes, percentile(s, "p50", l.P50), percentile(s, "p95", l.P95), percentile(s, "p99", l.P99),
		s.Throttled, s.Blocked, s.Cut, counts(s.Statuses), counts(s.Failures), s.Bytes, spendCell(s.Spend))
}

// percentile formats the latency percentile q of s, whose value is v: "> timeout" when it falls
// on a probe that hung, "-" when no probe answered or hung (there is no latency to rank), else
// whole milliseconds.
func percentile(s *Summary, q string, v float64) string {
	switch {
	case s.LatencyMS.Beyond(q):
		return "> timeout"
	case s.Responses == 0 && s.LatencyMS.Hung == 0:
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// spendCell formats a spend, in the exits' cost unit: "-" for none, else up to six decimals.
func spendCell(v float64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 6, 64)
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
