package otelbreaker_test

import (
	"context"
	"math"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/ratelimit"
)

// shopEvery10s allows shop.example one request every 10 s, across all exits.
func shopEvery10s(failFast bool) []pool.Option {
	return []pool.Option{pool.WithRateLimits(ratelimit.Limits{
		Origins:  map[string]ratelimit.Limit{"shop.example": ratelimit.Every(10 * time.Second)},
		FailFast: failFast,
	})}
}

// TestRateLimitWait: a request that waits 10 s (on the fake clock) for shop's token is a sample of
// the wait histogram and a throttled event on its request's span.
func TestRateLimitWait(t *testing.T) {
	b := newBenchFull(t, benchExits(), shopEvery10s(false))
	if r := b.get(0, shop); r.status != http.StatusOK {
		t.Fatalf("first request: %+v", r)
	}
	done := make(chan result, 1)
	go func() { done <- b.get(0, shop) }()
	waitFor(t, func() bool { return b.clock.Timers() == 1 }) // the second request waits for a token
	b.clock.Advance(10 * time.Second)
	if r := <-done; r.status != http.StatusOK || r.exit != "alpha" {
		t.Fatalf("second request: %+v, want 200 through alpha", r)
	}
	got := series(t, b.collect(10*time.Second))
	k := key("proxybreaker.ratelimit.wait", "proxybreaker.exit.label=alpha", "proxybreaker.origin=shop.example",
		"proxybreaker.ratelimit.scope=origin", "proxybreaker.ratelimit.refused=false")
	if got[k+":count"] != 1 || got[k+":sum"] != 10 {
		t.Errorf("%s: count %v, sum %v; want 1, 10", k, got[k+":count"], got[k+":sum"])
	}
	ended := b.spans.Ended()
	parent := ended[len(ended)-1]
	want := []attrs{{"proxybreaker.ratelimit.scope": "origin", "proxybreaker.ratelimit.waited": 10.0,
		"proxybreaker.ratelimit.refused": false, "proxybreaker.exit.label": "alpha", "proxybreaker.exit.key": "alpha",
		"proxybreaker.origin": "shop.example", "proxybreaker.origin.key": "shop.example"}}
	var events []attrs
	for _, ev := range parent.Events() {
		if ev.Name == otelbreaker.EventThrottled {
			events = append(events, attrMap(ev.Attributes))
		}
	}
	if parent.Name() != "request" || !reflect.DeepEqual(events, want) {
		t.Errorf("span %s: throttled events %v, want %v", parent.Name(), events, want)
	}
}

// TestRateLimitRefusal: with FailFast, a request that finds no token is refused: a refusal with
// reason throttled, and a refused sample of the wait histogram.
func TestRateLimitRefusal(t *testing.T) {
	b := newBenchFull(t, benchExits(), shopEvery10s(true))
	b.get(0, shop)
	r := b.get(4*time.Second, shop)
	if r.err == nil {
		t.Fatalf("second request went through: %+v", r)
	}
	got := series(t, b.collect(5*time.Second))
	for k, v := range map[string]float64{
		key("proxybreaker.refusals", "proxybreaker.origin=shop.example", "proxybreaker.refusal.reason=throttled"):                                                       1,
		key("proxybreaker.ratelimit.wait", "proxybreaker.origin=shop.example", "proxybreaker.ratelimit.scope=origin", "proxybreaker.ratelimit.refused=true") + ":count": 1,
		key("proxybreaker.ratelimit.wait", "proxybreaker.origin=shop.example", "proxybreaker.ratelimit.scope=origin", "proxybreaker.ratelimit.refused=true") + ":sum":   0,
	} {
		if v2, ok := got[k]; !ok || v2 != v {
			t.Errorf("series %s = %v (present %v), want %v", k, v2, ok, v)
		}
	}
	ended := b.spans.Ended()
	var refused attrs
	for _, ev := range ended[len(ended)-1].Events() {
		if ev.Name == otelbreaker.EventRefused {
			refused = attrMap(ev.Attributes)
		}
	}
	// The token bucket's float arithmetic says 5.999999999 s: compare to the microsecond.
	if in, _ := refused["proxybreaker.refusal.retry_in"].(float64); math.Abs(in-6) > 1e-6 {
		t.Errorf("retry_in = %v, want 6", in)
	}
	delete(refused, "proxybreaker.refusal.retry_in")
	want := attrs{"proxybreaker.refusal.reason": "throttled", "proxybreaker.origin": "shop.example", "proxybreaker.origin.key": "shop.example",
		"server.address": "shop.example", "server.port": int64(443)}
	if !reflect.DeepEqual(refused, want) {
		t.Errorf("refusal event = %v, want %v", refused, want)
	}
}

// waitFor polls cond every millisecond for at most 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatal("condition not met within 5s")
		case <-tick.C:
		}
	}
}
