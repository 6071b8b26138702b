package otelbreaker_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// trafficTally sums the bytes of the attempts it hears of.
type trafficTally struct {
	transport.NopObserver
	mu    sync.Mutex
	sum   pool.Traffic
	spend float64
}

func (o *trafficTally) AttemptFinished(_ context.Context, r transport.AttemptResult) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sum = o.sum.Add(r.Bytes)
	o.spend += r.Spend
}

// TestBytesCounter: requests through a real proxy, with credentials, count their bytes on the
// proxybreaker.bytes counter by direction, under the exit's label and the origin — what the
// transport reported on AttemptResult.Bytes, and never the proxy's password; and what they cost
// on proxybreaker.spend, the bytes × the exit's price per GB plus its price per request.
func TestBytesCounter(t *testing.T) {
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, strings.Repeat("z", 20_000))
	}))
	defer origin.Close()
	const pass = "bytes-S3cret"
	px, err := proxytest.Start(proxytest.Config{Name: "counted", User: "user", Pass: pass})
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	obs, err := otelbreaker.New(otelbreaker.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	exit, err := pool.NewExit(px.URL())
	if err != nil {
		t.Fatal(err)
	}
	const perGB, perRequest = 7.5, 0.002
	p, err := pool.New(pool.WithExits(exit.WithLabel("counted").WithCost(pool.Cost{PerGB: perGB, PerRequest: perRequest})))
	if err != nil {
		t.Fatal(err)
	}
	tally := &trafficTally{}
	tr, err := transport.New(p, transport.WithObserver(obs), transport.WithObserver(tally))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	c := &http.Client{Transport: tr}
	for range 3 {
		resp, err := c.Get(origin.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := series(t, rm)
	originKey := strings.TrimPrefix(origin.URL, "http://")
	for _, dir := range []struct {
		name string
		want int64
	}{{"transmit", tally.sum.Sent}, {"receive", tally.sum.Received}} {
		k := otelbreaker.MetricBytes + "{network.io.direction=" + dir.name + ",proxybreaker.exit.label=counted,proxybreaker.origin=" + originKey + "}"
		if got[k] != float64(dir.want) || dir.want <= 0 {
			t.Errorf("%s = %v, want the attempts' %d", k, got[k], dir.want)
		}
	}
	k := otelbreaker.MetricSpend + "{proxybreaker.exit.label=counted,proxybreaker.origin=" + originKey + "}"
	want := float64(tally.sum.Sent+tally.sum.Received)*perGB/1e9 + 3*perRequest
	// Each attempt's spend is rounded to a billionth of the unit.
	if d, e := got[k]-want, got[k]-tally.spend; d > 3e-9 || d < -3e-9 || e > 1e-12 || e < -1e-12 {
		t.Errorf("%s = %v, want the bytes' price %v (and the attempts' Spend %v)", k, got[k], want, tally.spend)
	}
	if tally.sum.Received < 3*20_000 {
		t.Errorf("attempts received %d bytes, want at least the three bodies' %d", tally.sum.Received, 3*20_000)
	}
	for k := range got {
		if strings.Contains(k, pass) {
			t.Errorf("series %s carries the proxy's password", k)
		}
	}
}
