package main_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

// TestSpendFromList: exits priced in the list (cost-per-gb=, cost-per-request=) give the report
// bytes per exit and the run's estimated spend, and the summary line says it; a bad price is a
// usage error naming the line and the field, never the password.
func TestSpendFromList(t *testing.T) {
	o := origin(t, false, nil, nil)
	a, b := startProxy(t, proxytest.Config{}), startProxy(t, proxytest.Config{})
	r := run(t, "", "-proxies", list(t, line(a.URL(), "a")+" cost-per-gb=5 cost-per-request=0.001", line(b.URL(), "b")),
		"-target", o.URL, "-target", o.URL+"/second")
	rep := r.report(t)
	bytes := map[string]int64{}
	for e := range rep.Exits() {
		bytes[e.Exit] = e.Bytes
		if e.Exit == "a" {
			if want := float64(e.Bytes)*5/1e9 + 2*0.001; e.Spend < want-1e-9 || e.Spend > want+1e-9 {
				t.Errorf("exit a: spend %v, want %v (%d bytes)", e.Spend, want, e.Bytes)
			}
		}
	}
	if bytes["a"] <= 0 || bytes["b"] <= 0 || rep.Overall.Bytes != bytes["a"]+bytes["b"] {
		t.Errorf("bytes per exit %v, overall %d: want both moved bytes, and their sum", bytes, rep.Overall.Bytes)
	}
	if want := fmt.Sprintf("; 2 targets; spend %.6f; ", rep.Overall.Spend); !strings.Contains(r.stderr, want) || !summaryRE.MatchString(r.stderr) {
		t.Errorf("stderr %q: want one summary line with %q", r.stderr, want)
	}

	bad := run(t, "", "-proxies", list(t, "# priced", "http://u:pr1ce-s3cret@127.0.0.1:1 cost-per-gb=4,5"), "-target", o.URL)
	if bad.code < 64 || !strings.Contains(bad.stderr, "line 2") || !strings.Contains(bad.stderr, "cost-per-gb") || strings.Contains(bad.stderr, "pr1ce-s3cret") {
		t.Errorf("a bad price: code %d, stderr %q; want a usage error naming line 2 and cost-per-gb, no password", bad.code, bad.stderr)
	}
}
