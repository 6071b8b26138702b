package otelbreaker_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
	"github.com/proxybreaker/proxybreaker/transport"
)

// export is everything a bench exported after exportAll's events: the SDK's metrics (manual
// reader) and the Prometheus exporter's metric families.
type export struct {
	b        *bench
	rm       metricdata.ResourceMetrics
	families []family
}

// family is one Prometheus metric family as the OTel Prometheus exporter made it.
type family struct {
	name, typ, help string   // typ: COUNTER, GAUGE, HISTOGRAM…
	labels          []string // every label name of its metrics, sorted; "le" for a histogram
}

// series returns the names of the series f is exposed as: its name, or for a histogram the
// _bucket, _sum and _count series.
func (f family) series() []string {
	if f.typ == "HISTOGRAM" {
		return []string{f.name + "_bucket", f.name + "_sum", f.name + "_count"}
	}
	return []string{f.name}
}

// exportAll drives a bench through every kind of event — a rate-limit wait, a success, failures
// that trip a pair and an origin guard, a refusal, a 407 that parks an exit — so that every
// instrument has data points with every attribute it can carry, and collects them at the end.
func exportAll(t *testing.T) export {
	t.Helper()
	b := newBenchFull(t, benchExits(), []pool.Option{pool.WithRateLimits(ratelimit.Limits{
		Origins: map[string]ratelimit.Limit{"paced.example": ratelimit.Every(10 * time.Second)},
	})})
	const paced = "https://paced.example/"
	b.base.On("*", "down.example", testkit.Reply{Err: testkit.ErrTimeout, Took: 500 * time.Millisecond})
	b.base.On("alpha", "auth.example", testkit.Reply{Status: http.StatusProxyAuthRequired})

	b.get(0, paced)
	done := make(chan result, 1)
	go func() { done <- b.get(0, paced) }()
	waitFor(t, func() bool { return b.clock.Timers() == 1 }) // the second waits for paced's token
	b.clock.Advance(10 * time.Second)
	<-done
	// alpha×down and bravo×down trip, charlie's failure trips down's guard, then down is refused.
	for i := range 8 {
		b.get(time.Duration(11+i)*time.Second, down)
	}
	b.get(20*time.Second, "https://auth.example/") // alpha parked
	// The scripted base moves no bytes over a wire (TestBytesCounter sends real ones): an attempt's
	// as the transport reports it.
	b.obs.AttemptFinished(context.Background(), transport.AttemptResult{
		AttemptInfo: transport.AttemptInfo{LeaseInfo: pool.LeaseInfo{Exit: b.tr.Pool().Exits()[0], Origin: "shop.example"}},
		Bytes:       pool.Traffic{Sent: 300, Received: 4000}, Spend: 0.25,
	})

	e := export{b: b, rm: b.collect(21 * time.Second)}
	names := map[string]bool{}
	for _, sm := range e.rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			names[m.Name] = true
		}
	}
	for _, n := range allInstruments {
		if !names[n] {
			t.Fatalf("exportAll: no data for %s: the events did not reach every instrument", n)
		}
	}
	mfs, err := b.prom.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		f := family{name: mf.GetName(), typ: mf.GetType().String(), help: mf.GetHelp()}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				f.labels = append(f.labels, l.GetName())
			}
		}
		if f.typ == "HISTOGRAM" {
			f.labels = append(f.labels, "le")
		}
		slices.Sort(f.labels)
		f.labels = slices.Compact(f.labels)
		e.families = append(e.families, f)
	}
	return e
}

// allInstruments names every instrument the observer makes.
var allInstruments = []string{
	otelbreaker.MetricBreakerState, otelbreaker.MetricTimeToProbe, otelbreaker.MetricBreakers,
	otelbreaker.MetricParkedExits, otelbreaker.MetricTrips, otelbreaker.MetricGuardTrips,
	otelbreaker.MetricAttempts, otelbreaker.MetricAttemptTime, otelbreaker.MetricRefusals,
	otelbreaker.MetricRateLimitWait, otelbreaker.MetricBytes, otelbreaker.MetricSpend,
}

// ours returns the families of the observer's instruments (not the exporter's target_info).
func (e export) ours() []family {
	var out []family
	for _, f := range e.families {
		if strings.HasPrefix(f.name, "proxybreaker_") {
			out = append(out, f)
		}
	}
	return out
}

// family returns the family of an OTel instrument, found by its description.
func (e export) family(t *testing.T, m metricdata.Metrics) family {
	t.Helper()
	for _, f := range e.families {
		if f.help == m.Description {
			return f
		}
	}
	t.Fatalf("no Prometheus family with the description of %s (%q)", m.Name, m.Description)
	return family{}
}
