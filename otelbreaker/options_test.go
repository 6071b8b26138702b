package otelbreaker_test

import (
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
)

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  otelbreaker.Option
		want string
	}{
		{"nil tracer provider", otelbreaker.WithTracerProvider(nil), "nil provider"},
		{"nil meter provider", otelbreaker.WithMeterProvider(nil), "nil provider"},
		{"nil origin label", otelbreaker.WithOriginLabel(nil), "nil func"},
		{"negative port", otelbreaker.WithDefaultPort(-1), "must be in [0, 65535]"},
		{"huge port", otelbreaker.WithDefaultPort(70000), "must be in [0, 65535]"},
	} {
		_, err := otelbreaker.New(tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "otelbreaker: ") {
			t.Errorf("New(%s) = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// tripDown sends three timeouts to down.example through alpha at t0+at…: alpha×down trips at
// t0+at+2.5s.
func (b *bench) tripDown(at time.Duration) {
	b.t.Helper()
	b.base.On("alpha", "down.example", testkit.Reply{Err: testkit.ErrTimeout, Took: 500 * time.Millisecond})
	for i := range 3 {
		if r := b.get(at+time.Duration(i)*time.Second, down); r.exit != "alpha" {
			b.t.Fatalf("timeout %d carried by %q, want alpha", i, r.exit)
		}
	}
}

// TestWithoutOriginLabel: no metric carries the origin; pairs of one exit merge into one series,
// the worst state and the soonest probe.
func TestWithoutOriginLabel(t *testing.T) {
	b := newBench(t, otelbreaker.WithoutOriginLabel())
	b.get(0, shop)          // alpha×shop: success, no breaker
	b.tripDown(time.Second) // alpha×down OPEN from 3.5 s to 23.5 s
	got := series(t, b.collect(10*time.Second))
	want := map[string]float64{
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=alpha"):   0,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=bravo"):   0,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=charlie"): 0,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha"):   1,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=origin"):                                  0,

		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha"): 13.5,

		key("proxybreaker.breakers", "proxybreaker.breaker.scope=exit", "proxybreaker.state=closed"):   3,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=pair", "proxybreaker.state=open"):     1,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=origin", "proxybreaker.state=closed"): 2,
		key("proxybreaker.exits.parked"): 0,

		key("proxybreaker.breaker.trips", "proxybreaker.exit.label=alpha", "proxybreaker.breaker.scope=pair", "proxybreaker.breaker.cause=failures", "proxybreaker.breaker.reason=timeout"): 1,

		key("proxybreaker.attempts", "proxybreaker.exit.label=alpha", "proxybreaker.verdict.outcome=success", "proxybreaker.verdict.class=ok"):        1,
		key("proxybreaker.attempts", "proxybreaker.exit.label=alpha", "proxybreaker.verdict.outcome=transient", "proxybreaker.verdict.class=timeout"): 3,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.verdict.outcome=success") + ":count":                      1,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.verdict.outcome=success") + ":sum":                        0,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.verdict.outcome=transient") + ":count":                    3,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.verdict.outcome=transient") + ":sum":                      1.5,
	}
	diffSeries(t, "WithoutOriginLabel", got, want)
	// Spans leave the origin label out, as the metrics do, and keep the origin key.
	for _, s := range b.attemptSpans() {
		a := attrMap(s.Attributes())
		if a["proxybreaker.origin"] != nil || a["proxybreaker.origin.key"] == nil || a["server.address"] == nil {
			t.Errorf("span %v: origin label %v, key %v, server.address %v; want no label, the key and the address",
				s.SpanContext().SpanID(), a["proxybreaker.origin"], a["proxybreaker.origin.key"], a["server.address"])
		}
	}
}

// TestWithOriginLabelBuckets: origins mapped to buckets merge, the worst state wins.
func TestWithOriginLabelBuckets(t *testing.T) {
	bucket := func(origin string) string {
		if origin == "down.example" || origin == "api.example" {
			return "flaky"
		}
		return "other"
	}
	b := newBench(t, otelbreaker.WithOriginLabel(bucket))
	b.base.On("alpha", "api.example", testkit.Reply{Err: testkit.ErrTimeout, Took: 500 * time.Millisecond})
	// alpha×api: one failure, a CLOSED breaker; alpha×down: OPEN. Both are "flaky".
	b.get(0, "https://api.example/")
	b.tripDown(time.Second)
	got := series(t, b.collect(10*time.Second))
	for k, v := range map[string]float64{
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha", "proxybreaker.origin=flaky"):                                         1,
		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha", "proxybreaker.origin=flaky"):                                 13.5,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=origin", "proxybreaker.origin=flaky"):                                                                        0,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=pair", "proxybreaker.state=open"):                                                                                 1,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=pair", "proxybreaker.state=closed"):                                                                               1,
		key("proxybreaker.attempts", "proxybreaker.exit.label=alpha", "proxybreaker.origin=flaky", "proxybreaker.verdict.outcome=transient", "proxybreaker.verdict.class=timeout"): 4,
	} {
		if got[k] != v {
			t.Errorf("series %s = %v, want %v", k, got[k], v)
		}
	}
	for k := range got {
		if strings.Contains(k, "down.example") || strings.Contains(k, "api.example") {
			t.Errorf("series %s carries an origin the bucket func maps away", k)
		}
	}
}

// TestWithMaxSeries: counters accept two (exit, origin) pairs, then record OverflowLabel; gauges
// report two series, the OPEN pair first.
func TestWithMaxSeries(t *testing.T) {
	b := newBench(t, otelbreaker.WithMaxSeries(2))
	b.tripDown(0)                              // (alpha, down.example): the first pair
	b.get(5*time.Second, shop)                 // (alpha, shop.example): the second
	b.get(6*time.Second, "https://c.example/") // (alpha, c.example): over the cap
	got := series(t, b.collect(10*time.Second))
	want := map[string]float64{
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example"):         1,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=alpha"):                                             0,
		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example"): 12.5,

		key("proxybreaker.breakers", "proxybreaker.breaker.scope=exit", "proxybreaker.state=closed"):   3,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=pair", "proxybreaker.state=open"):     1,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=origin", "proxybreaker.state=closed"): 3,
		key("proxybreaker.exits.parked"): 0,

		key("proxybreaker.breaker.trips", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example", "proxybreaker.breaker.scope=pair", "proxybreaker.breaker.cause=failures", "proxybreaker.breaker.reason=timeout"): 1,

		key("proxybreaker.attempts", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example", "proxybreaker.verdict.outcome=transient", "proxybreaker.verdict.class=timeout"): 3,
		key("proxybreaker.attempts", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=success", "proxybreaker.verdict.class=ok"):        1,
		key("proxybreaker.attempts", "proxybreaker.exit.label=_other", "proxybreaker.origin=_other", "proxybreaker.verdict.outcome=success", "proxybreaker.verdict.class=ok"):             1,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example", "proxybreaker.verdict.outcome=transient") + ":count":                    3,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example", "proxybreaker.verdict.outcome=transient") + ":sum":                      1.5,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=success") + ":count":                      1,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=success") + ":sum":                        0,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=_other", "proxybreaker.origin=_other", "proxybreaker.verdict.outcome=success") + ":count":                           1,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=_other", "proxybreaker.origin=_other", "proxybreaker.verdict.outcome=success") + ":sum":                             0,
	}
	diffSeries(t, "WithMaxSeries(2)", got, want)
}

// TestWithDefaultPort: an origin key without a port gets the configured server.port, or none.
func TestWithDefaultPort(t *testing.T) {
	for _, tc := range []struct {
		port int
		url  string
		want any // nil: no server.port
	}{
		{443, shop, int64(443)},
		{80, shop, int64(80)},
		{0, shop, nil},
		{0, "https://shop.example:8443/", int64(8443)},
		{443, "http://[::1]:8080/", int64(8080)},
	} {
		b := newBench(t, otelbreaker.WithDefaultPort(tc.port))
		b.get(0, tc.url)
		spans := b.attemptSpans()
		if len(spans) != 1 {
			t.Fatalf("port %d, %s: %d spans", tc.port, tc.url, len(spans))
		}
		a := attrMap(spans[0].Attributes())
		if a["server.port"] != tc.want {
			t.Errorf("WithDefaultPort(%d), GET %s: server.port = %v, want %v", tc.port, tc.url, a["server.port"], tc.want)
		}
		if strings.Contains(tc.url, "[::1]") && a["server.address"] != "::1" {
			t.Errorf("GET %s: server.address = %v, want ::1", tc.url, a["server.address"])
		}
	}
}
