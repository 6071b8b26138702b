package otelbreaker_test

import (
	"errors"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// attrs is a span's or event's attributes as key → Go value (int64, float64, bool, string).
type attrs map[string]any

func attrMap(kvs []attribute.KeyValue) attrs {
	m := attrs{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value.AsInterface()
	}
	return m
}

// with returns a copy of a with kv added (k1, v1, k2, v2, …).
func (a attrs) with(kv ...any) attrs {
	m := maps.Clone(a)
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// begin is the attributes an attempt span gets when it starts.
func begin(exit string, tier int64, host string, probe bool, pairBefore, exitBefore string) attrs {
	return attrs{
		"proxybreaker.exit.label":        exit,
		"proxybreaker.exit.key":          exit,
		"proxybreaker.exit.tier":         tier,
		"proxybreaker.origin":            host,
		"proxybreaker.origin.key":        host,
		"server.address":                 host,
		"server.port":                    int64(443),
		"http.request.method":            "GET",
		"proxybreaker.attempt.probe":     probe,
		"proxybreaker.pair.state_before": pairBefore,
		"proxybreaker.exit.state_before": exitBefore,
		"proxybreaker.verdict.scope":     "pair",
		"proxybreaker.pair.state_after":  "closed",
		"proxybreaker.exit.state_after":  "closed",
		"proxybreaker.verdict.outcome":   "success",
		"proxybreaker.verdict.class":     "ok",
		"http.response.status_code":      int64(200),
	}
}

// ok is the attributes of a successful attempt: begin's.
func ok(a attrs) attrs { return a }

func failed(a attrs, outcome, class, scope string, status int) attrs {
	a = a.with("proxybreaker.verdict.outcome", outcome, "proxybreaker.verdict.class", class,
		"proxybreaker.verdict.scope", scope, "error.type", class)
	if status == 0 {
		delete(a, "http.response.status_code")
	} else {
		a["http.response.status_code"] = int64(status)
	}
	return a
}

// transition is the attributes of a transition event.
func transition(scope, exit, origin, from, to, cause, reason string, trips, level int64) attrs {
	a := attrs{
		"proxybreaker.breaker.scope": scope, "proxybreaker.breaker.from": from,
		"proxybreaker.breaker.to": to, "proxybreaker.breaker.cause": cause,
		"proxybreaker.breaker.trip_count": trips, "proxybreaker.breaker.level": level,
	}
	if exit != "" {
		a["proxybreaker.exit.label"], a["proxybreaker.exit.key"] = exit, exit
	}
	if origin != "" {
		a["proxybreaker.origin"], a["proxybreaker.origin.key"] = origin, origin
	}
	if reason != "" {
		a["proxybreaker.breaker.reason"] = reason
	}
	return a
}

func opened(a attrs, parked bool, nextProbeIn float64) attrs {
	return a.with("proxybreaker.breaker.parked", parked, "proxybreaker.breaker.next_probe_in", nextProbeIn)
}

const (
	shop = "https://shop.example/items"
	down = "https://down.example/"
)

// step is one request of the scenario.
type step struct {
	name  string
	at    time.Duration // when it is sent, from t0
	url   string
	exit  string // who must carry it ("" when refused)
	err   error  // matched with errors.Is; nil for a response
	span  attrs  // the attempt span's attributes; nil when refused
	took  time.Duration
	fail  string  // the span status description when Error; "" for Unset
	event []attrs // transition events on the attempt span, in order
	// refused is the refusal event on the parent span (the request's), when refused.
	refused attrs
}

// TestScenario drives one transport through a trip by failures, an origin-guard trip and its
// refusal, a Retry-After trip, two parked exits, a no-healthy-exit refusal, and a probe that
// closes the pair, on a fake clock; it checks every span's parent, attributes, events and status,
// and every metric series at two instants.
func TestScenario(t *testing.T) {
	b := newBench(t)
	alpha, bravo, charlie := "alpha", "bravo", "charlie"
	b.base.On("*", "shop.example", testkit.Reply{Took: 1500 * time.Millisecond})
	b.base.On("*", "down.example", testkit.Reply{Err: testkit.ErrTimeout, Took: 500 * time.Millisecond})

	// The origin guard's OPEN window has jitter no setting turns off: its instants are read
	// back from the pool when known.
	var guardProbe time.Time

	steps := []step{
		{name: "s0 shop through alpha: ok", at: 0, url: shop, exit: alpha, took: 1500 * time.Millisecond,
			span: ok(begin(alpha, 0, "shop.example", false, "closed", "closed"))},
		{name: "s1 down through alpha: timeout", at: 2 * time.Second, url: down, exit: alpha,
			took: 500 * time.Millisecond, fail: "timeout",
			span: failed(begin(alpha, 0, "down.example", false, "closed", "closed"), "transient", "timeout", "pair", 0)},
		{name: "s2 down through alpha: timeout", at: 3 * time.Second, url: down, exit: alpha,
			took: 500 * time.Millisecond, fail: "timeout",
			span: failed(begin(alpha, 0, "down.example", false, "closed", "closed"), "transient", "timeout", "pair", 0)},
		{name: "s3 down through alpha: timeout trips the pair", at: 4 * time.Second, url: down, exit: alpha,
			took: 500 * time.Millisecond, fail: "timeout",
			span: failed(begin(alpha, 0, "down.example", false, "closed", "closed"), "transient", "timeout", "pair", 0).
				with("proxybreaker.pair.state_after", "open"),
			event: []attrs{opened(transition("pair", alpha, "down.example", "closed", "open", "failures", "timeout", 1, 1), false, 20)}},
		{name: "s4 down through bravo: timeout", at: 5 * time.Second, url: down, exit: bravo,
			took: 500 * time.Millisecond, fail: "timeout",
			span: failed(begin(bravo, 1, "down.example", false, "closed", "closed"), "transient", "timeout", "pair", 0)},
		{name: "s5 down through bravo: timeout", at: 6 * time.Second, url: down, exit: bravo,
			took: 500 * time.Millisecond, fail: "timeout",
			span: failed(begin(bravo, 1, "down.example", false, "closed", "closed"), "transient", "timeout", "pair", 0)},
		{name: "s6 down through bravo: timeout trips the pair", at: 7 * time.Second, url: down, exit: bravo,
			took: 500 * time.Millisecond, fail: "timeout",
			span: failed(begin(bravo, 1, "down.example", false, "closed", "closed"), "transient", "timeout", "pair", 0).
				with("proxybreaker.pair.state_after", "open"),
			event: []attrs{opened(transition("pair", bravo, "down.example", "closed", "open", "failures", "timeout", 1, 1), false, 20)}},
		{name: "s7 down through charlie: the third failing exit trips the origin guard", at: 8 * time.Second, url: down, exit: charlie,
			took: 500 * time.Millisecond, fail: "timeout",
			span:  failed(begin(charlie, 2, "down.example", false, "closed", "closed"), "transient", "timeout", "pair", 0),
			event: []attrs{opened(transition("origin", "", "down.example", "closed", "open", "failures", "timeout", 1, 1), false, -1)}},
		{name: "s8 down: refused, origin unhealthy", at: 9 * time.Second, url: down, err: pool.ErrOriginUnhealthy,
			refused: attrs{"proxybreaker.refusal.reason": "origin_unhealthy", "proxybreaker.origin": "down.example", "proxybreaker.origin.key": "down.example",
				"server.address": "down.example", "server.port": int64(443), "proxybreaker.refusal.retry_in": -1.0}},
		{name: "s9 shop through alpha: 429 Retry-After 30 trips the pair", at: 10 * time.Second, url: shop, exit: alpha,
			took: 200 * time.Millisecond, fail: "rate_limited",
			span: failed(begin(alpha, 0, "shop.example", false, "closed", "closed"), "transient", "rate_limited", "pair", 429).
				with("proxybreaker.pair.state_after", "open", "proxybreaker.verdict.retry_after", 30.0),
			event: []attrs{opened(transition("pair", alpha, "shop.example", "closed", "open", "retry_after", "rate_limited", 1, 0), false, 30)}},
		{name: "s10 shop through bravo: 407 parks the exit", at: 11 * time.Second, url: shop, exit: bravo,
			took: 100 * time.Millisecond, fail: "proxy_auth",
			span: failed(begin(bravo, 1, "shop.example", false, "closed", "closed"), "permanent", "proxy_auth", "exit", 407).
				with("proxybreaker.exit.state_after", "open"),
			event: []attrs{opened(transition("exit", bravo, "", "closed", "open", "permanent", "proxy_auth", 1, 0), true, 900)}},
		{name: "s11 shop through charlie: 407 parks the exit", at: 12 * time.Second, url: shop, exit: charlie,
			took: 100 * time.Millisecond, fail: "proxy_auth",
			span: failed(begin(charlie, 2, "shop.example", false, "closed", "closed"), "permanent", "proxy_auth", "exit", 407).
				with("proxybreaker.exit.state_after", "open"),
			event: []attrs{opened(transition("exit", charlie, "", "closed", "open", "permanent", "proxy_auth", 1, 0), true, 900)}},
		{name: "s12 shop: refused, no healthy exit", at: 13 * time.Second, url: shop, err: pool.ErrNoHealthyExit,
			refused: attrs{"proxybreaker.refusal.reason": "no_healthy_exit", "proxybreaker.origin": "shop.example", "proxybreaker.origin.key": "shop.example",
				"server.address": "shop.example", "server.port": int64(443), "proxybreaker.refusal.retry_in": 27.2}},
		{name: "s13 shop through alpha: the probe closes the pair", at: 41 * time.Second, url: shop, exit: alpha,
			took: 500 * time.Millisecond,
			span: ok(begin(alpha, 0, "shop.example", true, "half_open", "closed")),
			event: []attrs{
				transition("pair", alpha, "shop.example", "open", "half_open", "cooldown", "", 1, 0),
				transition("pair", alpha, "shop.example", "half_open", "closed", "probe_ok", "", 1, 0),
			}},
	}
	type sent struct {
		step
		result
	}
	var done []sent
	for i, s := range steps {
		switch s.name[:3] {
		case "s9 ":
			b.base.On(alpha, "shop.example", testkit.Reply{Status: http.StatusTooManyRequests, Header: testkit.RetryAfter(30), Took: s.took})
		case "s10":
			b.base.On(bravo, "shop.example", testkit.Reply{Status: http.StatusProxyAuthRequired, Took: s.took})
		case "s11":
			b.base.On(charlie, "shop.example", testkit.Reply{Status: http.StatusProxyAuthRequired, Took: s.took})
		case "s13":
			b.base.On(alpha, "shop.example", testkit.Reply{Took: s.took})
		}
		r := b.get(s.at, s.url)
		if r.exit != s.exit {
			t.Fatalf("step %d (%s): carried by %q, want %q (err %v)", i, s.name, r.exit, s.exit, r.err)
		}
		if s.err != nil && !errors.Is(r.err, s.err) {
			t.Fatalf("step %d (%s): err = %v, want %v", i, s.name, r.err, s.err)
		}
		if s.name[:3] == "s7 " {
			guardProbe = originSnapshot(t, b, "down.example").Breaker.NextProbe
			if d := guardProbe.Sub(t0.Add(8500 * time.Millisecond)); d < 10*time.Second || d > 12500*time.Millisecond {
				t.Fatalf("origin guard's OPEN window = %v, want [10s, 12.5s]", d)
			}
		}
		done = append(done, sent{s, r})
		if s.name[:3] == "s12" {
			// Metrics at t0+14s: three pairs OPEN, two exits parked, the origin guard OPEN.
			diffSeries(t, "at t0+14s", series(t, b.collect(14*time.Second)), midway(guardProbe))
		}
	}
	guardIn := guardProbe.Sub(t0.Add(8500 * time.Millisecond)).Seconds()
	// Fill in the guard's jittered instants.
	for i := range done {
		for _, ev := range done[i].event {
			if ev["proxybreaker.breaker.scope"] == "origin" {
				ev["proxybreaker.breaker.next_probe_in"] = guardIn
			}
		}
		if done[i].refused != nil && done[i].refused["proxybreaker.refusal.reason"] == "origin_unhealthy" {
			done[i].refused["proxybreaker.refusal.retry_in"] = guardProbe.Sub(t0.Add(9 * time.Second)).Seconds()
		}
	}

	// Spans: one per attempt, each a child of its request's span, ended in order.
	attempts := b.attemptSpans()
	parents := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range b.spans.Ended() {
		if s.Name() == "request" {
			parents[s.SpanContext().SpanID()] = s
		}
	}
	var want []sent
	for _, d := range done {
		if d.span != nil {
			want = append(want, d)
		}
	}
	if len(attempts) != len(want) {
		t.Fatalf("%d attempt spans, want %d", len(attempts), len(want))
	}
	for i, s := range attempts {
		w := want[i]
		name := w.name
		if s.Parent().SpanID() != w.parent.SpanID() || s.SpanContext().TraceID() != w.parent.TraceID() {
			t.Errorf("%s: span's parent = %v/%v, want the request's span %v/%v", name,
				s.SpanContext().TraceID(), s.Parent().SpanID(), w.parent.TraceID(), w.parent.SpanID())
		}
		if s.SpanKind() != trace.SpanKindInternal {
			t.Errorf("%s: span kind = %v, want internal", name, s.SpanKind())
		}
		if got := attrMap(s.Attributes()); !reflect.DeepEqual(got, w.span) {
			t.Errorf("%s: span attributes\n got %v\nwant %v", name, got, w.span)
		}
		start, end := t0.Add(w.at), t0.Add(w.at+w.took)
		if !s.StartTime().Equal(start) || !s.EndTime().Equal(end) {
			t.Errorf("%s: span from %v to %v, want %v to %v", name, s.StartTime(), s.EndTime(), start, end)
		}
		wantStatus := sdktrace.Status{Code: codes.Unset}
		if w.fail != "" {
			wantStatus = sdktrace.Status{Code: codes.Error, Description: w.fail}
		}
		if s.Status() != wantStatus {
			t.Errorf("%s: span status = %+v, want %+v", name, s.Status(), wantStatus)
		}
		events := s.Events()
		if len(events) != len(w.event) {
			t.Errorf("%s: %d events %v, want %d", name, len(events), events, len(w.event))
			continue
		}
		for j, ev := range events {
			if ev.Name != otelbreaker.EventTransition {
				t.Errorf("%s: event %d named %q, want %q", name, j, ev.Name, otelbreaker.EventTransition)
			}
			if got := attrMap(ev.Attributes); !reflect.DeepEqual(got, w.event[j]) {
				t.Errorf("%s: event %d attributes\n got %v\nwant %v", name, j, got, w.event[j])
			}
		}
		if s.InstrumentationScope().Name != otelbreaker.ScopeName || s.InstrumentationScope().Version != otelbreaker.Version {
			t.Errorf("%s: scope = %+v, want %s %s", name, s.InstrumentationScope(), otelbreaker.ScopeName, otelbreaker.Version)
		}
	}
	// Refusals: an event on the request's own span, and no attempt span.
	for _, d := range done {
		p, ok := parents[d.parent.SpanID()]
		if !ok {
			t.Fatalf("%s: parent span not ended", d.name)
		}
		var got []attrs
		for _, ev := range p.Events() {
			if ev.Name != otelbreaker.EventRefused {
				t.Errorf("%s: parent span has event %q", d.name, ev.Name)
				continue
			}
			got = append(got, attrMap(ev.Attributes))
		}
		var wantEv []attrs
		if d.refused != nil {
			wantEv = []attrs{d.refused}
		}
		if !reflect.DeepEqual(got, wantEv) {
			t.Errorf("%s: refusal events on the request's span\n got %v\nwant %v", d.name, got, wantEv)
		}
	}

	// Metrics at t0+42s: the probe closed alpha×shop; the down pairs and the guard are HALF_OPEN.
	rm := b.collect(42 * time.Second)
	m2 := midway(guardProbe)
	for k := range m2 {
		if slices.Contains([]string{"proxybreaker.breaker.state", "proxybreaker.breaker.time_to_probe", "proxybreaker.breakers"}, metricName(k)) {
			delete(m2, k)
		}
	}
	for k, v := range map[string]float64{
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=alpha"):                                     0,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=bravo"):                                     1,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=charlie"):                                   1,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example"): 2,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=bravo", "proxybreaker.origin=down.example"): 2,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example"): 0,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=origin", "proxybreaker.origin=down.example"):                                2,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=origin", "proxybreaker.origin=shop.example"):                                0,

		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=bravo"):                                     911.1 - 42,
		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=charlie"):                                   912.1 - 42,
		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example"): 0,
		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=bravo", "proxybreaker.origin=down.example"): 0,
		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=origin", "proxybreaker.origin=down.example"):                                0,

		key("proxybreaker.breakers", "proxybreaker.breaker.scope=exit", "proxybreaker.state=closed"):      1,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=exit", "proxybreaker.state=open"):        2,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=pair", "proxybreaker.state=closed"):      1,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=pair", "proxybreaker.state=half_open"):   2,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=origin", "proxybreaker.state=half_open"): 1,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=origin", "proxybreaker.state=closed"):    1,

		key("proxybreaker.attempts", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=success", "proxybreaker.verdict.class=ok"): 2,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=success") + ":count":               2,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=success") + ":sum":                 2.0,
	} {
		m2[k] = v
	}
	diffSeries(t, "at t0+42s", series(t, rm), m2)
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelbreaker.ScopeName || sm.Scope.Version != otelbreaker.Version {
			t.Errorf("metrics scope = %+v, want %s %s", sm.Scope, otelbreaker.ScopeName, otelbreaker.Version)
		}
	}
}

// metricName returns the metric name of a series key.
func metricName(k string) string {
	for i, c := range k {
		if c == '{' {
			return k[:i]
		}
	}
	return k
}

// originSnapshot returns the origin guard's snapshot.
func originSnapshot(t *testing.T, b *bench, origin string) pool.OriginStatus {
	t.Helper()
	for _, o := range b.tr.Pool().Snapshot().Origins {
		if o.Origin == origin {
			return o
		}
	}
	t.Fatalf("no origin %q in the snapshot", origin)
	return pool.OriginStatus{}
}

// midway is every series at t0+14s, once s12 has been refused: three pairs OPEN, two exits
// parked, the origin guard OPEN until guardProbe.
func midway(guardProbe time.Time) map[string]float64 {
	return map[string]float64{
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=alpha"):                                     0,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=bravo"):                                     1,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=charlie"):                                   1,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example"): 1,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=bravo", "proxybreaker.origin=down.example"): 1,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example"): 1,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=origin", "proxybreaker.origin=down.example"):                                1,
		key("proxybreaker.breaker.state", "proxybreaker.breaker.scope=origin", "proxybreaker.origin=shop.example"):                                0,

		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=bravo"):                                     911.1 - 14,
		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=exit", "proxybreaker.exit.label=charlie"):                                   912.1 - 14,
		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example"): 24.5 - 14,
		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=bravo", "proxybreaker.origin=down.example"): 27.5 - 14,
		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=pair", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example"): 40.2 - 14,
		key("proxybreaker.breaker.time_to_probe", "proxybreaker.breaker.scope=origin", "proxybreaker.origin=down.example"):                                guardProbe.Sub(t0.Add(14 * time.Second)).Seconds(),

		key("proxybreaker.breakers", "proxybreaker.breaker.scope=exit", "proxybreaker.state=closed"):   1,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=exit", "proxybreaker.state=open"):     2,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=pair", "proxybreaker.state=open"):     3,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=origin", "proxybreaker.state=open"):   1,
		key("proxybreaker.breakers", "proxybreaker.breaker.scope=origin", "proxybreaker.state=closed"): 1,
		key("proxybreaker.exits.parked"): 2,

		key("proxybreaker.breaker.trips", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example", "proxybreaker.breaker.scope=pair", "proxybreaker.breaker.cause=failures", "proxybreaker.breaker.reason=timeout"):         1,
		key("proxybreaker.breaker.trips", "proxybreaker.exit.label=bravo", "proxybreaker.origin=down.example", "proxybreaker.breaker.scope=pair", "proxybreaker.breaker.cause=failures", "proxybreaker.breaker.reason=timeout"):         1,
		key("proxybreaker.breaker.trips", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.breaker.scope=pair", "proxybreaker.breaker.cause=retry_after", "proxybreaker.breaker.reason=rate_limited"): 1,
		key("proxybreaker.breaker.trips", "proxybreaker.exit.label=bravo", "proxybreaker.breaker.scope=exit", "proxybreaker.breaker.cause=permanent", "proxybreaker.breaker.reason=proxy_auth"):                                         1,
		key("proxybreaker.breaker.trips", "proxybreaker.exit.label=charlie", "proxybreaker.breaker.scope=exit", "proxybreaker.breaker.cause=permanent", "proxybreaker.breaker.reason=proxy_auth"):                                       1,
		key("proxybreaker.origin_guard.trips", "proxybreaker.origin=down.example", "proxybreaker.breaker.cause=failures", "proxybreaker.breaker.reason=timeout"):                                                                        1,

		key("proxybreaker.attempts", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=success", "proxybreaker.verdict.class=ok"):             1,
		key("proxybreaker.attempts", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example", "proxybreaker.verdict.outcome=transient", "proxybreaker.verdict.class=timeout"):      3,
		key("proxybreaker.attempts", "proxybreaker.exit.label=bravo", "proxybreaker.origin=down.example", "proxybreaker.verdict.outcome=transient", "proxybreaker.verdict.class=timeout"):      3,
		key("proxybreaker.attempts", "proxybreaker.exit.label=charlie", "proxybreaker.origin=down.example", "proxybreaker.verdict.outcome=transient", "proxybreaker.verdict.class=timeout"):    1,
		key("proxybreaker.attempts", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=transient", "proxybreaker.verdict.class=rate_limited"): 1,
		key("proxybreaker.attempts", "proxybreaker.exit.label=bravo", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=permanent", "proxybreaker.verdict.class=proxy_auth"):   1,
		key("proxybreaker.attempts", "proxybreaker.exit.label=charlie", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=permanent", "proxybreaker.verdict.class=proxy_auth"): 1,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=success") + ":count":                           1,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=success") + ":sum":                             1.5,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example", "proxybreaker.verdict.outcome=transient") + ":count":                         3,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.origin=down.example", "proxybreaker.verdict.outcome=transient") + ":sum":                           1.5,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=bravo", "proxybreaker.origin=down.example", "proxybreaker.verdict.outcome=transient") + ":count":                         3,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=bravo", "proxybreaker.origin=down.example", "proxybreaker.verdict.outcome=transient") + ":sum":                           1.5,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=charlie", "proxybreaker.origin=down.example", "proxybreaker.verdict.outcome=transient") + ":count":                       1,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=charlie", "proxybreaker.origin=down.example", "proxybreaker.verdict.outcome=transient") + ":sum":                         0.5,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=transient") + ":count":                         1,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=transient") + ":sum":                           0.2,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=bravo", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=permanent") + ":count":                         1,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=bravo", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=permanent") + ":sum":                           0.1,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=charlie", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=permanent") + ":count":                       1,
		key("proxybreaker.attempt.duration", "proxybreaker.exit.label=charlie", "proxybreaker.origin=shop.example", "proxybreaker.verdict.outcome=permanent") + ":sum":                         0.1,

		key("proxybreaker.refusals", "proxybreaker.origin=down.example", "proxybreaker.refusal.reason=origin_unhealthy"): 1,
		key("proxybreaker.refusals", "proxybreaker.origin=shop.example", "proxybreaker.refusal.reason=no_healthy_exit"):  1,
	}
}
