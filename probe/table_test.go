package probe_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
)

// Regression: the table showed P50 and P95 0 for an exit whose probes never answered, and the
// answers' percentiles for one whose probes hung.
func TestWriteTableLatencyCells(t *testing.T) {
	refused := probe.Result{Target: "t", LatencyMS: 0.1, Outcome: pool.Transient, Class: pool.ClassProxyRefused, ErrorKind: "proxy_refused"}
	var results []probe.Result
	add := func(exit string, rs ...probe.Result) {
		for _, r := range rs {
			r.Exit = exit
			results = append(results, r)
		}
	}
	add("fast", join(repeat(19, ok(12)), []probe.Result{timedOut(5000)})...)
	add("hung", join(repeat(10, ok(12)), repeat(10, timedOut(5000)))...)
	add("refused", repeat(20, refused)...)
	var b bytes.Buffer
	if err := probe.NewReport(results, probe.Policy{}).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{ // P50, P95, P99
		"fast":    {"12", "12", "> timeout"},
		"hung":    {"12", "> timeout", "> timeout"}, // half answered: the median is an answer
		"refused": {"-", "-", "-"},
	}
	_, exits, _ := strings.Cut(b.String(), "\nEXIT ")
	for _, line := range strings.Split(exits, "\n")[1:] {
		cells := strings.Split(line, "  ")
		var fields []string
		for _, c := range cells {
			if c = strings.TrimSpace(c); c != "" {
				fields = append(fields, c)
			}
		}
		if len(fields) == 0 {
			continue
		}
		w, ok := want[fields[0]]
		if !ok {
			t.Errorf("WriteTable: unexpected exit row %q", line)
			continue
		}
		delete(want, fields[0])
		if len(fields) < 6 || fields[3] != w[0] || fields[4] != w[1] || fields[5] != w[2] {
			t.Errorf("WriteTable: row %q: P50, P95, P99 = %q, want %q", line, fields[3:min(6, len(fields))], w)
		}
	}
	for exit := range want {
		t.Errorf("WriteTable: no row for exit %q:\n%s", exit, b.String())
	}
}
