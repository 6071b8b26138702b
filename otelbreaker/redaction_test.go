package otelbreaker_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

// leakyErr is the kind of error a careless base RoundTripper returns: it prints the proxy URL,
// password and all. The observer must never export an error's text.
type leakyErr struct{ proxy string }

func (e *leakyErr) Error() string   { return "proxyconnect tcp " + e.proxy + ": i/o timeout" }
func (e *leakyErr) Timeout() bool   { return true }
func (e *leakyErr) Temporary() bool { return true }

// TestNoCredentialsExported runs every kind of event through exits with passwords — labelled and
// unlabelled, URL and host:port:user:pass forms, errors that print the proxy URL — and greps every
// exported span (names, attributes, events, status), every metric (names, descriptions, units,
// attribute keys and values, the Prometheus exposition) and the status page (JSON and HTML) for the
// passwords: none may appear.
func TestNoCredentialsExported(t *testing.T) {
	const deltaPass = "delta-Unl4belled!pw"
	secrets := append([]string{deltaPass}, passwords...)
	exits := append(benchExits(), pool.MustParseExit("http://delta-user:"+deltaPass+"@10.0.0.4:3128").WithTier(3))
	b := newBenchWith(t, exits)

	// The same metrics through the Prometheus exporter, as an operator would scrape them.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	promObs, err := otelbreaker.New(otelbreaker.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))))
	if err != nil {
		t.Fatal(err)
	}
	// The pool's half alone: its events and gauges, no transport.
	unplug, err := b.tr.Pool().Observe(promObs)
	if err != nil {
		t.Fatal(err)
	}
	defer unplug()

	for _, e := range exits {
		b.base.On(e.Label(), "down.example", testkit.Reply{Err: &leakyErr{e.ProxyURL().String()}, Took: 100 * time.Millisecond})
	}
	b.base.On("*", "auth.example", testkit.Reply{Status: http.StatusProxyAuthRequired})
	b.base.On("*", "busy.example", testkit.Reply{Status: http.StatusTooManyRequests, Header: testkit.RetryAfter(5)})
	at := time.Duration(0)
	next := func() time.Duration { at += 100 * time.Millisecond; return at }
	for range 4 {
		b.get(next(), shop)
		b.get(next(), "https://busy.example/")
	}
	for range 12 {
		b.get(next(), down)
	}
	for range 5 {
		b.get(next(), "https://auth.example/")
	}
	b.get(next(), shop) // refused: every exit parked or open
	ctx, span := b.tracer.Start(context.Background(), "request")
	for _, o := range []*otelbreaker.Observer{b.obs, promObs} {
		o.Throttled(ctx, pool.Throttle{Origin: "shop.example", Exit: exits[3], Scope: pool.ScopeExit, Waited: time.Second})
	}
	span.End()
	if len(b.attemptSpans()) < 10 {
		t.Fatalf("only %d attempt spans: the scenario did not run", len(b.attemptSpans()))
	}

	var out strings.Builder
	for _, s := range b.spans.Ended() {
		dumpSpan(&out, s)
	}
	var rm metricdata.ResourceMetrics
	if err := b.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			fmt.Fprintf(&out, "metric %s %s %s\n", m.Name, m.Description, m.Unit)
		}
	}
	for k := range series(t, rm) {
		fmt.Fprintln(&out, k)
	}
	prom := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer prom.Close()
	out.WriteString(fetch(t, prom.URL, ""))

	page, err := statuspage.New(b.tr.Pool())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(page)
	defer srv.Close()
	jsonPage, htmlPage := fetch(t, srv.URL+"/?format=json", ""), fetch(t, srv.URL, "text/html")
	out.WriteString(jsonPage)
	out.WriteString(htmlPage)

	dump := out.String()
	for _, want := range []string{"delta-user", "proxy_auth", "rate_limited", "proxybreaker_breaker_state", "exits_parked", "alpha"} {
		if !strings.Contains(dump, want) {
			t.Errorf("the dump lacks %q: the greps below would prove little", want)
		}
	}
	for _, secret := range secrets {
		for _, form := range []string{secret, strings.ReplaceAll(secret, "!", "%21")} {
			if i := strings.Index(dump, form); i >= 0 {
				lo, hi := max(i-200, 0), min(i+200, len(dump))
				t.Errorf("password %q exported:\n%s", secret, dump[lo:hi])
			}
		}
	}
}

// dumpSpan writes everything a span exporter would see of s.
func dumpSpan(w io.Writer, s sdktrace.ReadOnlySpan) {
	fmt.Fprintf(w, "span %s %s %v\n", s.Name(), s.Status().Description, s.InstrumentationScope())
	for _, kv := range s.Attributes() {
		fmt.Fprintf(w, "  %s=%s\n", kv.Key, kv.Value.Emit())
	}
	for _, ev := range s.Events() {
		fmt.Fprintf(w, "  event %s\n", ev.Name)
		for _, kv := range ev.Attributes {
			fmt.Fprintf(w, "    %s=%s\n", kv.Key, kv.Value.Emit())
		}
	}
	for _, l := range s.Links() {
		fmt.Fprintf(w, "  link %v\n", l.Attributes)
	}
	fmt.Fprintf(w, "  resource %v\n", s.Resource().Attributes())
}

func fetch(t *testing.T, url, accept string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d, %v", url, resp.StatusCode, err)
	}
	return string(body)
}
