package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/examples/internal/exampletest"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

// noOTLP makes sure no OTLP endpoint is configured, so the example exports no traces.
func noOTLP(t *testing.T) {
	t.Helper()
	for _, v := range otlpEndpointVars {
		t.Setenv(v, "")
	}
}

// startApp starts the example on an ephemeral loopback port, runs its traffic until the test
// ends, and waits (bounded) until both broken exits are parked.
func startApp(t *testing.T) *app {
	t.Helper()
	a, err := start(context.Background(), config{Listen: "127.0.0.1:0", Workers: 4, Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		a.traffic(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		if err := a.close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	waitFor(t, 20*time.Second, "auth-bad and dead parked, busy's pairs open, flaky's guard open, a request refused", func() bool {
		if a.refused.Load() == 0 {
			return false
		}
		s := a.tr.Pool().Snapshot()
		parked, busyOpen, flakyOpen := 0, 0, false
		for _, e := range s.Exits {
			if e.Breaker.Parked {
				parked++
			}
		}
		for _, p := range s.Pairs {
			if a.world.SiteName(p.Origin) == originBusy && p.Breaker.State == breaker.Open {
				busyOpen++
			}
		}
		for _, o := range s.Origins {
			flakyOpen = flakyOpen || (a.world.SiteName(o.Origin) == originFlaky && o.Breaker.State == breaker.Open)
		}
		return parked == 2 && busyOpen == 2 && flakyOpen
	})
	return a
}

// waitFor polls cond every 20 ms until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			t.Fatalf("not within %v: %s", timeout, what)
		case <-tick.C:
		}
	}
}

// get fetches url (with an Accept header when not empty) from the example's server.
func get(t *testing.T, url, accept string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	c := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d, %v", url, resp.StatusCode, err)
	}
	return resp, string(body)
}

// documented returns the Prometheus metric names and label names docs/metrics.md lists.
func documented(t *testing.T) (metrics, labels []string) {
	t.Helper()
	doc, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile("`(proxybreaker_[a-z_]+)`")
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(line, "|")
		switch {
		case strings.HasPrefix(line, "| `proxybreaker.") && len(cells) == 8: // the metrics table
			for _, m := range name.FindAllStringSubmatch(cells[5], -1) {
				metrics = append(metrics, m[1])
			}
		case strings.HasPrefix(line, "| `proxybreaker.") && len(cells) == 5: // the attributes table
			for _, m := range name.FindAllStringSubmatch(cells[2], -1) {
				labels = append(labels, m[1])
			}
		}
	}
	if len(metrics) < 10 || len(labels) < 10 { // at least the ten of round 2: fewer means the parse broke
		t.Fatalf("docs/metrics.md: found %d metrics %v and %d labels; the tables changed shape", len(metrics), metrics, len(labels))
	}
	return metrics, labels
}

// TestExposition reads the example's /metrics as Prometheus would and checks that it holds every
// documented name (the rate-limit histogram only appears when a rate limit holds a request back,
// which the example does not configure), that each documented name is exactly what the exporter
// emits, and that no password appears.
func TestExposition(t *testing.T) {
	noOTLP(t)
	a := startApp(t)
	_, text := get(t, "http://"+a.addr()+"/metrics", "")
	emitted := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			emitted[strings.Fields(rest)[0]] = true
		}
	}
	metrics, labels := documented(t)
	for _, m := range metrics {
		if m == "proxybreaker_ratelimit_wait_seconds" {
			continue
		}
		if !emitted[m] {
			t.Errorf("documented metric %s is not in the exposition; it has %v", m, emitted)
		}
	}
	for m := range emitted {
		if strings.HasPrefix(m, "proxybreaker_") && !slices.Contains(metrics, m) {
			t.Errorf("the exposition has %s, which docs/metrics.md does not list", m)
		}
	}
	for _, want := range []string{
		`proxybreaker_breaker_state{`, `proxybreaker_breaker_scope="exit"`, `proxybreaker_exit_label="auth-bad"`,
		`proxybreaker_origin="busy"`, `otel_scope_name="github.com/proxybreaker/proxybreaker/otelbreaker"`,
		`proxybreaker_attempt_duration_seconds_bucket{`, `le="0.005"`, `target_info{`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the exposition lacks %s", want)
		}
	}
	labelRE := regexp.MustCompile(`[{,](proxybreaker_[a-z_]+)=`)
	for _, m := range labelRE.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(labels, m[1]) {
			t.Errorf("label %s is not documented", m[1])
			break
		}
	}
	for _, s := range secrets() {
		if strings.Contains(text, s) {
			t.Errorf("the exposition holds password %q", s)
		}
	}
}

// TestDashboardUsesDocumentedNames: every proxybreaker_ name in dashboard.json's queries is a
// documented metric (with a histogram suffix) or label.
func TestDashboardUsesDocumentedNames(t *testing.T) {
	metrics, labels := documented(t)
	known := slices.Clone(labels)
	for _, m := range metrics {
		known = append(known, m)
		if strings.HasSuffix(m, "_seconds") {
			known = append(known, m+"_bucket", m+"_sum", m+"_count")
		}
	}
	exprs := dashboardExprs(t)
	if len(exprs) < 10 {
		t.Fatalf("dashboard.json has %d queries", len(exprs))
	}
	name := regexp.MustCompile(`proxybreaker_[a-z_]+`)
	for _, e := range exprs {
		for _, n := range name.FindAllString(e, -1) {
			if !slices.Contains(known, n) {
				t.Errorf("dashboard query %q uses %s, which docs/metrics.md does not list", e, n)
			}
		}
	}
}

// dashboardExprs returns every PromQL expression in dashboard.json: the panels' targets and the
// template variables' queries.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Definition != "" {
			out = append(out, v.Definition)
		}
	}
	return out
}

// TestPrometheusScrapesExample runs a real Prometheus that scrapes the example's /metrics, and
// queries its HTTP API until the breaker-state series appear with the values the pool holds: the
// two parked exits OPEN, the healthy ones CLOSED, busy's pairs OPEN (or HALF_OPEN while a probe
// is out: busy answers every request 429), flaky's guard out of CLOSED. Then every dashboard
// query must evaluate, and return data unless it is about rate limits, which the example does not
// configure.
func TestPrometheusScrapesExample(t *testing.T) {
	noOTLP(t)
	a := startApp(t)
	prom := servertest.StartPrometheus(t, servertest.PrometheusConfig{Targets: []string{a.addr()}})

	byExit := func(s []servertest.Sample) map[string]float64 {
		m := map[string]float64{}
		for _, x := range s {
			m[x.Labels["proxybreaker_exit_label"]] = x.Value
		}
		return m
	}
	exitStates := prom.WaitForQuery(`proxybreaker_breaker_state{proxybreaker_breaker_scope="exit"}`, 60*time.Second,
		func(s []servertest.Sample) bool {
			m := byExit(s)
			return len(m) == 4 && m["auth-bad"] == 1 && m["dead"] == 1 && m["dc-1"] == 0 && m["dc-2"] == 0
		})
	for _, s := range exitStates {
		if s.Labels["job"] != "servertest" || s.Labels["otel_scope_name"] != "github.com/proxybreaker/proxybreaker/otelbreaker" {
			t.Errorf("sample labels %v: want job=servertest and the otelbreaker scope", s.Labels)
		}
	}
	// The pool agrees: the parked exits are parked, the others CLOSED.
	for _, e := range a.tr.Pool().Snapshot().Exits {
		want := 0.0
		if e.Breaker.State == breaker.Open {
			want = 1
		}
		if got := byExit(exitStates)[e.Exit]; got != want {
			t.Errorf("exit %s: Prometheus says %v, the pool %s", e.Exit, got, e.Breaker.State)
		}
	}
	prom.WaitForQuery(`proxybreaker_breaker_state{proxybreaker_breaker_scope="pair", proxybreaker_origin="busy"}`, 30*time.Second,
		func(s []servertest.Sample) bool {
			m := byExit(s)
			return len(m) == 2 && m["dc-1"] >= 1 && m["dc-2"] >= 1
		})
	prom.WaitForQuery(`proxybreaker_breaker_state{proxybreaker_breaker_scope="origin", proxybreaker_origin="flaky"}`, 30*time.Second,
		func(s []servertest.Sample) bool { return len(s) == 1 && s[0].Value >= 1 })
	prom.WaitForQuery(`proxybreaker_exits_parked`, 30*time.Second,
		func(s []servertest.Sample) bool { return len(s) == 1 && s[0].Value == 2 })
	prom.WaitForQuery(`sum(proxybreaker_refusals_total{proxybreaker_refusal_reason="no_healthy_exit", proxybreaker_origin="busy"})`, 30*time.Second,
		func(s []servertest.Sample) bool { return len(s) == 1 && s[0].Value > 0 })

	subst := strings.NewReplacer("$__rate_interval", "1m", "$exit", ".*")
	for _, e := range dashboardExprs(t) {
		if strings.HasPrefix(e, "label_values(") {
			continue // a Grafana function, not PromQL
		}
		expr := subst.Replace(e)
		if strings.Contains(expr, "ratelimit") {
			if _, err := prom.Query(context.Background(), expr); err != nil {
				t.Errorf("dashboard query %q: %v", expr, err)
			}
			continue
		}
		prom.WaitForQuery(expr, 30*time.Second, func(s []servertest.Sample) bool { return len(s) > 0 })
	}
}

// TestStatusPage: the example serves the status page, parked exits first, in JSON and HTML, with
// no password.
func TestStatusPage(t *testing.T) {
	noOTLP(t)
	a := startApp(t)
	_, jsonPage := get(t, "http://"+a.addr()+"/status", "application/json")
	var tab statuspage.Table
	if err := json.Unmarshal([]byte(jsonPage), &tab); err != nil {
		t.Fatal(err)
	}
	if len(tab.Exits) != 4 || !tab.Exits[0].Parked || !tab.Exits[1].Parked {
		t.Fatalf("exits = %+v, want 4 with the two parked ones first", tab.Exits)
	}
	if got := []string{tab.Exits[0].LastFailure, tab.Exits[1].LastFailure}; !slices.Contains(got, "proxy_auth") || !slices.Contains(got, "proxy_refused") {
		t.Errorf("parked exits' last failures = %v, want proxy_auth and proxy_refused", got)
	}
	resp, htmlPage := get(t, "http://"+a.addr()+"/status", "")
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Errorf("Content-Type = %q, want text/html", ct)
	}
	for _, s := range secrets() {
		if strings.Contains(jsonPage, s) || strings.Contains(htmlPage, s) {
			t.Errorf("the status page holds password %q", s)
		}
	}
}

// TestRun runs the program's main loop briefly: it prints where to look, says traces are not
// exported, prints status lines without passwords, and leaves no goroutine behind.
func TestRun(t *testing.T) {
	exampletest.CheckLeaks(t)
	noOTLP(t)
	var out bytes.Buffer
	if err := run(context.Background(), config{Listen: "127.0.0.1:0", Workers: 2, Interval: 20 * time.Millisecond, Duration: 6 * time.Second}, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	text := out.String()
	for _, want := range []string{"metrics:     http://127.0.0.1:", "status page: http://127.0.0.1:", "traces:      not exported", "parked: auth-bad, dead"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	for _, s := range secrets() {
		if strings.Contains(text, s) {
			t.Errorf("output holds password %q", s)
		}
	}
}

// TestListenLoopbackOnly: the example refuses to serve anywhere but on loopback.
func TestListenLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:9464", ":9464", "192.0.2.1:9464", "example.com:80"} {
		if _, err := start(context.Background(), config{Listen: addr, Workers: 1}); err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("start(-listen %s) = %v, want a loopback error", addr, err)
		}
	}
}

// TestOTLPExport: with OTEL_EXPORTER_OTLP_ENDPOINT set (to a collector stand-in on 127.0.0.1),
// attempt spans are exported over OTLP/HTTP, and carry no password.
func TestOTLPExport(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			mu.Lock()
			bodies = append(bodies, body)
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "none")

	var out bytes.Buffer
	if err := run(context.Background(), config{Listen: "127.0.0.1:0", Workers: 2, Interval: 20 * time.Millisecond, Duration: time.Second}, &out); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(out.String(), "traces:      OTLP/HTTP, OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL) {
		t.Errorf("output does not say where traces go:\n%s", out.String())
	}
	mu.Lock()
	all := bytes.Join(bodies, nil)
	mu.Unlock()
	for _, want := range []string{"proxybreaker.attempt", "proxybreaker.exit.label", "proxybreaker.breaker.transition", "proxy_auth"} {
		if !bytes.Contains(all, []byte(want)) {
			t.Errorf("the exported traces (%d requests, %d bytes) lack %q", len(bodies), len(all), want)
		}
	}
	for _, s := range secrets() {
		if bytes.Contains(all, []byte(s)) {
			t.Errorf("the exported traces hold password %q", s)
		}
	}
}

// TestHelp: -h says what the example shows and how it is run, not a bare "Usage of" and the
// temporary binary's path.
func TestHelp(t *testing.T) {
	exampletest.CheckHelp(t, command(new(config)))
}
