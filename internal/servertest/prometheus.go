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
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// PrometheusStartTimeout bounds how long StartPrometheus waits for a started prometheus to report
// itself ready.
const PrometheusStartTimeout = 30 * time.Second

// prometheusStopTimeout bounds how long a stopping prometheus may take to exit after SIGTERM
// before it is killed.
const prometheusStopTimeout = 5 * time.Second

// prometheusAttempts is how many ports StartPrometheus tries (see tinyproxyAttempts).
const prometheusAttempts = 3

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
	bin    string
	dir    string
	cfg    PrometheusConfig
	addr   string
	client *http.Client

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan error
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
	bin, err := findPrometheus()
	if err != nil {
		if inCI() {
			t.Fatalf("servertest: %v; CI must install prometheus, never skip", err)
		}
		t.Skipf("servertest: %v; `make test` installs it", err)
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	s := &PrometheusServer{
		t: t, bin: bin, dir: t.TempDir(), cfg: cfg,
		client: &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second},
	}
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err == nil {
			s.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			err = s.start()
		}
		if err == nil {
			break
		}
		if !errors.Is(err, errExited) || attempt == prometheusAttempts {
			t.Fatalf("servertest: prometheus, attempt %d: %v", attempt, err)
		}
	}
	t.Cleanup(func() {
		s.Stop()
		s.client.CloseIdleConnections()
		if t.Failed() {
			t.Logf("servertest: prometheus on %s:\n%s", s.addr, tailFile(filepath.Join(s.dir, "prometheus.out")))
		}
	})
	return s
}

// URL returns http://127.0.0.1:PORT, the base of prometheus's web UI and API.
func (s *PrometheusServer) URL() *url.URL { return &url.URL{Scheme: "http", Host: s.addr} }

// Stop stops prometheus (SIGTERM, then SIGKILL after a few seconds) and waits for it. Stopping a
// stopped server does nothing.
func (s *PrometheusServer) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(prometheusStopTimeout):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd = nil
}

// start runs prometheus on s.addr and waits until it is ready.
func (s *PrometheusServer) start() error {
	confPath := filepath.Join(s.dir, "prometheus.yml")
	if err := os.WriteFile(confPath, []byte(s.cfg.conf()), 0o600); err != nil {
		return err
	}
	out, err := os.OpenFile(filepath.Join(s.dir, "prometheus.out"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(s.bin,
		"--config.file="+confPath,
		"--storage.tsdb.path="+filepath.Join(s.dir, "data"),
		"--web.listen-address="+s.addr,
		"--log.level=info",
	)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	if err := s.waitReady(exited); err != nil {
		if !errors.Is(err, errExited) {
			cmd.Process.Kill()
			<-exited
		}
		return fmt.Errorf("%s: %w\n%s", s.addr, err, tailFile(filepath.Join(s.dir, "prometheus.out")))
	}
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	return nil
}

// waitReady polls /-/ready until it answers 200, the process exits, or PrometheusStartTimeout
// passes.
func (s *PrometheusServer) waitReady(exited <-chan error) error {
	deadline := time.NewTimer(PrometheusStartTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	ready := s.URL().JoinPath("/-/ready").String()
	for {
		if resp, err := s.client.Get(ready); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case err := <-exited:
			return fmt.Errorf("%w (%v)", errExited, err)
		case <-deadline.C:
			return fmt.Errorf("not ready after %v", PrometheusStartTimeout)
		case <-tick.C:
		}
	}
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

// findPrometheus returns the path of the prometheus binary.
func findPrometheus() (string, error) {
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p, nil
	}
	for _, p := range prometheusPaths {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("prometheus not found on PATH or at %s", strings.Join(prometheusPaths, ", "))
}

// tailFile returns the last few KiB of a file, for failure messages.
func tailFile(path string) string {
	const max = 4 << 10
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}
