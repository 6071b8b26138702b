package servertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/serverproc"
)

// PrometheusStartTimeout bounds how long StartPrometheus waits for a started prometheus to report
// itself ready.
const PrometheusStartTimeout = 30 * time.Second

// prometheusStopTimeout bounds how long a stopping prometheus may take to exit after SIGTERM
// before it is killed.
const prometheusStopTimeout = 5 * time.Second

// prometheusPaths are tried, in order, after a PATH lookup.
var prometheusPaths = []string{"/usr/bin/prometheus", "/usr/sbin/prometheus"}

// PrometheusConfig is what a test's prometheus scrapes.
type PrometheusConfig struct {
	// Targets are the host:port addresses to scrape. Each must be a loopback IP address
	// (127.0.0.1 or ::1): no test scrapes anything off the machine.
	Targets []string
	// MetricsPath is the path scraped on every target. Default "/metrics".
	MetricsPath string
	// ScrapeInterval is how often the targets are scraped; the scrape timeout is the same. Default
	// 1 s.
	ScrapeInterval time.Duration
}

func (c *PrometheusConfig) validate() error {
	if len(c.Targets) == 0 {
		return errors.New("servertest: PrometheusConfig.Targets is empty")
	}
	for _, t := range c.Targets {
		host, port, err := net.SplitHostPort(t)
		if err != nil {
			return fmt.Errorf("servertest: PrometheusConfig.Targets: %q: %v", t, err)
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return fmt.Errorf("servertest: PrometheusConfig.Targets: %q is not a loopback IP address", t)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return fmt.Errorf("servertest: PrometheusConfig.Targets: %q: bad port", t)
		}
	}
	if c.MetricsPath == "" {
		c.MetricsPath = "/metrics"
	}
	if !strings.HasPrefix(c.MetricsPath, "/") || strings.ContainsAny(c.MetricsPath, "'\"\n\r\\ ") {
		return fmt.Errorf("servertest: PrometheusConfig.MetricsPath %q: must start with / and hold no quotes or spaces", c.MetricsPath)
	}
	if c.ScrapeInterval < 0 || (c.ScrapeInterval > 0 && c.ScrapeInterval < time.Second) {
		return fmt.Errorf("servertest: PrometheusConfig.ScrapeInterval %v: must be at least 1s", c.ScrapeInterval)
	}
	if c.ScrapeInterval == 0 {
		c.ScrapeInterval = time.Second
	}
	return nil
}

// conf renders the prometheus.yml for c (validated).
func (c *PrometheusConfig) conf() string {
	var b strings.Builder
	secs := int(c.ScrapeInterval / time.Second)
	fmt.Fprintf(&b, "global:\n  scrape_interval: %ds\n  scrape_timeout: %ds\n  evaluation_interval: %ds\n", secs, secs, secs)
	fmt.Fprintf(&b, "scrape_configs:\n  - job_name: servertest\n    metrics_path: '%s'\n    static_configs:\n      - targets:\n", c.MetricsPath)
	for _, t := range c.Targets {
		fmt.Fprintf(&b, "          - '%s'\n", t)
	}
	return b.String()
}

// PrometheusServer is a running prometheus that scrapes a test's endpoints, with a client for its
// HTTP API.
type PrometheusServer struct {
	t      testing.TB
	p      *serverproc.Process
	client *http.Client
}

// StartPrometheus starts a prometheus on 127.0.0.1 (a port chosen for it) that scrapes cfg's
// targets, and waits until it is ready. Its config, TSDB and output live in t.TempDir(); it is
// stopped, and waited for, when the test ends, and its output is copied to the test log if the
// test failed.
//
// When no prometheus binary is found the test is skipped, or fails when the CI environment
// variable is true. An invalid cfg, or a prometheus not ready within PrometheusStartTimeout,
// fails the test.
func StartPrometheus(t testing.TB, cfg PrometheusConfig) *PrometheusServer {
	t.Helper()
	bin := binary(t, "prometheus", prometheusPaths...)
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := &PrometheusServer{
		t:      t,
		client: &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second},
	}
	s.p = start(t, serverproc.Spec{
		Name:     "prometheus",
		Bin:      bin,
		Dir:      dir,
		Timeout:  PrometheusStartTimeout,
		Interval: 50 * time.Millisecond,
		Args: func(port int) ([]string, error) {
			conf := filepath.Join(dir, "prometheus.yml")
			if err := os.WriteFile(conf, []byte(cfg.conf()), 0o600); err != nil {
				return nil, err
			}
			return []string{
				"--config.file=" + conf,
				"--storage.tsdb.path=" + filepath.Join(dir, "data"),
				"--web.listen-address=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
				"--log.level=info",
			}, nil
		},
		Ready: s.ready,
	})
	t.Cleanup(func() { // before start's cleanup, which copies the output of a failed test
		s.Stop()
		s.client.CloseIdleConnections()
	})
	return s
}

// URL returns http://127.0.0.1:PORT, the base of prometheus's web UI and API.
func (s *PrometheusServer) URL() *url.URL { return &url.URL{Scheme: "http", Host: s.p.Addr()} }

// Stop stops prometheus (SIGTERM, then SIGKILL after a few seconds) and waits for it. Stopping a
// stopped server does nothing.
func (s *PrometheusServer) Stop() { s.p.Stop(prometheusStopTimeout) }

// ready reports whether the prometheus on addr answers /-/ready with 200.
func (s *PrometheusServer) ready(addr string) error {
	resp, err := s.client.Get("http://" + addr + "/-/ready")
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/-/ready answered %s", resp.Status)
	}
	return nil
}

// Sample is one element of an instant vector.
type Sample struct {
	Labels map[string]string
	Value  float64
	At     time.Time
}

// Query evaluates expr now with the instant-query API (/api/v1/query) and returns the vector.
func (s *PrometheusServer) Query(ctx context.Context, expr string) ([]Sample, error) {
	u := s.URL().JoinPath("/api/v1/query")
	u.RawQuery = url.Values{"query": {expr}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status    string `json:"status"`
		Error     string `json:"error"`
		ErrorType string `json:"errorType"`
		Data      struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&body); err != nil {
		return nil, fmt.Errorf("servertest: query %q: HTTP %d: %v", expr, resp.StatusCode, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("servertest: query %q: %s: %s", expr, body.ErrorType, body.Error)
	}
	if body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("servertest: query %q: result type %q, want vector", expr, body.Data.ResultType)
	}
	out := make([]Sample, 0, len(body.Data.Result))
	for _, r := range body.Data.Result {
		ts, _ := r.Value[0].(float64)
		str, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("servertest: query %q: value %q: %v", expr, str, err)
		}
		sec := int64(ts)
		out = append(out, Sample{Labels: r.Metric, Value: v, At: time.Unix(sec, int64((ts-float64(sec))*1e9))})
	}
	return out, nil
}

// WaitForQuery evaluates expr every 250 ms until ok accepts the result, and returns it. It fails
// the test, with the last result or error and the targets' scrape health, when timeout passes
// first.
func (s *PrometheusServer) WaitForQuery(expr string, timeout time.Duration, ok func([]Sample) bool) []Sample {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last []Sample
	var lastErr error
	for {
		last, lastErr = s.Query(ctx, expr)
		if lastErr == nil && ok(last) {
			return last
		}
		select {
		case <-ctx.Done():
			s.t.Fatalf("servertest: prometheus query %q not satisfied within %v: last result %v, error %v; targets: %s",
				expr, timeout, last, lastErr, s.targetHealth())
			return nil
		case <-tick.C:
		}
	}
}

// targetHealth summarises /api/v1/targets for failure messages.
func (s *PrometheusServer) targetHealth() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL().JoinPath("/api/v1/targets").String(), nil)
	resp, err := s.client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var body struct {
		Data struct {
			ActiveTargets []struct {
				ScrapeURL  string `json:"scrapeUrl"`
				Health     string `json:"health"`
				LastError  string `json:"lastError"`
				LastScrape string `json:"lastScrape"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return err.Error()
	}
	var parts []string
	for _, t := range body.Data.ActiveTargets {
		parts = append(parts, fmt.Sprintf("%s %s (last scrape %s) %s", t.ScrapeURL, t.Health, t.LastScrape, t.LastError))
	}
	return strings.Join(parts, "; ")
}
