package main_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

// TestReportHasCapacity: the report answers the capacity question per origin (probe.Capacities):
// of two exits, the one the origin answered 429 is not usable, the other is, and the origin's
// typical latency is the answers'; the table shows the same.
func TestReportHasCapacity(t *testing.T) {
	reg := &proxytest.Registry{}
	o := origin(t, false, reg, map[string]int{"throttled": http.StatusTooManyRequests})
	good := startProxy(t, proxytest.Config{Name: "good", Registry: reg})
	thr := startProxy(t, proxytest.Config{Name: "throttled", Registry: reg})
	proxies := list(t, line(good.URL(), "good"), line(thr.URL(), "thr"))
	rep := run(t, "", "-proxies", proxies, "-target", o.URL).report(t)
	if len(rep.Capacity) != 1 {
		t.Fatalf("capacity = %+v, want one origin", rep.Capacity)
	}
	c := rep.Capacity[0]
	if c.Origin != rep.Results[0].Origin || c.Exits != 2 || c.Usable != 1 || c.Latency <= 0 {
		t.Errorf("capacity = %+v; want origin %s, 1 of 2 exits usable (the other answered 429), a typical latency", c, rep.Results[0].Origin)
	}
	table := run(t, "", "-proxies", proxies, "-target", o.URL, "-format", "table").stdout
	if !strings.Contains(table, "ORIGIN") || !strings.Contains(table, "1/2") {
		t.Errorf("-format table has no capacity row with 1/2 usable:\n%s", table)
	}
}
