package pool_test

import (
	"math"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestReadExitsCost: cost-per-gb and cost-per-request are attributes whose values must be
// decimals; a bad one is an error naming the line and the field, never the password.
func TestReadExitsCost(t *testing.T) {
	exits, err := pool.ReadExits(strings.NewReader(
		"http://u:hunter2@10.0.0.1:3128 cost-per-gb=4.5 cost-per-request=0.0002\n" +
			"http://10.0.0.2:3128 tier=1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := exits[0].Cost(); !ok || c != (pool.Cost{PerGB: 4.5, PerRequest: 0.0002}) {
		t.Errorf("exits[0].Cost() = %+v, %v, want {4.5 0.0002}, true", c, ok)
	}
	if c, ok := exits[1].Cost(); ok || c != (pool.Cost{}) {
		t.Errorf("exits[1].Cost() = %+v, %v, want {}, false", c, ok)
	}
	for _, bad := range []struct{ line, field string }{
		{"http://u:hunter2@10.0.0.1:3128 cost-per-gb=-1", "cost-per-gb"},
		{"http://u:hunter2@10.0.0.1:3128 cost-per-gb=1e3", "cost-per-gb"},
		{"http://u:hunter2@10.0.0.1:3128 cost-per-request=1.2.3", "cost-per-request"},
		{"http://u:hunter2@10.0.0.1:3128 cost-per-request=.", "cost-per-request"},
		{"http://u:hunter2@10.0.0.1:3128 cost-per-gb=9999999", "cost-per-gb"},
		{"http://u:hunter2@10.0.0.1:3128 cost-per-gb=0.1234567890123456", "cost-per-gb"},
	} {
		_, err := pool.ReadExits(strings.NewReader("# list\n" + bad.line + "\n"))
		if err == nil {
			t.Errorf("ReadExits(%q) = nil error, want one", bad.line)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "line 2") || !strings.Contains(msg, bad.field) || strings.Contains(msg, "hunter2") {
			t.Errorf("ReadExits(%q) = %q, want it to name line 2 and %s, and no password", bad.line, msg, bad.field)
		}
	}
}

// TestWithCostValidated: Exit.WithCost writes the attributes; a negative price fails when the
// exit joins a pool.
func TestWithCostValidated(t *testing.T) {
	e := pool.MustParseExit("10.0.0.1:3128").WithCost(pool.Cost{PerGB: 3})
	if v, ok := e.Attr(pool.AttrCostPerGB); !ok || v != "3" {
		t.Errorf("Attr(cost-per-gb) = %q, %v, want 3, true", v, ok)
	}
	if _, ok := e.Attr(pool.AttrCostPerRequest); ok {
		t.Errorf("Attr(cost-per-request) set for a zero price")
	}
	for _, c := range []pool.Cost{{PerGB: -1}, {PerRequest: math.Inf(1)}} {
		if _, err := pool.New(pool.WithExits(pool.MustParseExit("10.0.0.1:3128").WithCost(c))); err == nil {
			t.Errorf("New(exit WithCost(%+v)) = nil error, want one", c)
		}
	}
	if _, err := pool.New(pool.WithTierCost(0, pool.Cost{PerGB: -2})); err == nil {
		t.Errorf("New(WithTierCost(0, PerGB -2)) = nil error, want one")
	}
}

// TestSpendCounted: each report's spend is its bytes × its exit's price per GB plus its price per
// request — the exit's own prices over its tier's, field by field — on Reported, per exit and per
// origin in the snapshot.
func TestSpendCounted(t *testing.T) {
	clk := clock.NewFake(leaseT0)
	own := pool.MustParseExit("10.0.0.1:3128").WithLabel("own").WithCost(pool.Cost{PerGB: 8})
	p, err := pool.New(pool.WithExits(own), pool.WithClock(clk), pool.WithSeed(1),
		pool.WithTierCost(0, pool.Cost{PerGB: 1, PerRequest: 0.001}))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.CostOf(own), (pool.Cost{PerGB: 8, PerRequest: 0.001}); got != want {
		t.Fatalf("CostOf(own) = %+v, want %+v", got, want)
	}
	trs := []pool.Traffic{{Sent: 1000, Received: 250_000}, {Sent: 333, Received: 7}, {}}
	var total float64
	for i, tr := range trs {
		l := mustPick(t, p, "a.example")
		got := l.ReportTrafficAt(clk.Now(), okVerdict, tr).Spend
		want := float64(tr.Sent+tr.Received)*8/1e9 + 0.001
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("step %d: Reported.Spend = %v, want %v", i, got, want)
		}
		total += want
	}
	s := p.Snapshot()
	if got := s.Exits[0].Spend; math.Abs(got-total) > 1e-9*float64(len(trs)) {
		t.Errorf("Exits[0].Spend = %v, want %v", got, total)
	}
	if len(s.Traffic) != 1 || math.Abs(s.Traffic[0].Spend-total) > 1e-9*float64(len(trs)) {
		t.Errorf("Traffic = %+v, want a.example with spend %v", s.Traffic, total)
	}
	// Bytes outside a lease cost their price per byte, no price per request.
	p.AddTraffic(own, "a.example", pool.Traffic{Received: 1_000_000})
	if got, want := p.Snapshot().Exits[0].Spend, total+0.008; math.Abs(got-want) > 1e-8 {
		t.Errorf("after AddTraffic: Exits[0].Spend = %v, want %v", got, want)
	}
}
