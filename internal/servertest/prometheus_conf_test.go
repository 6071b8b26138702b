package servertest

import (
	"strings"
	"testing"
	"time"
)

func TestPrometheusConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  PrometheusConfig
		want string // "" for valid
	}{
		{PrometheusConfig{Targets: []string{"127.0.0.1:9464"}}, ""},
		{PrometheusConfig{Targets: []string{"[::1]:9464", "127.0.0.1:1"}, MetricsPath: "/m", ScrapeInterval: 2 * time.Second}, ""},
		{PrometheusConfig{}, "Targets is empty"},
		{PrometheusConfig{Targets: []string{"10.0.0.1:9464"}}, "not a loopback"},
		{PrometheusConfig{Targets: []string{"localhost:9464"}}, "not a loopback"},
		{PrometheusConfig{Targets: []string{"127.0.0.1"}}, "missing port"},
		{PrometheusConfig{Targets: []string{"127.0.0.1:0"}}, "bad port"},
		{PrometheusConfig{Targets: []string{"127.0.0.1:1"}, MetricsPath: "metrics"}, "MetricsPath"},
		{PrometheusConfig{Targets: []string{"127.0.0.1:1"}, MetricsPath: "/m'\n- x"}, "MetricsPath"},
		{PrometheusConfig{Targets: []string{"127.0.0.1:1"}, ScrapeInterval: 100 * time.Millisecond}, "at least 1s"},
	}
	for i, tc := range tests {
		err := tc.cfg.validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%d: validate(%+v) = %v, want nil", i, tc.cfg, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%d: validate(%+v) = %v, want an error containing %q", i, tc.cfg, err, tc.want)
		}
	}
}

func TestPrometheusConfigConf(t *testing.T) {
	cfg := PrometheusConfig{Targets: []string{"127.0.0.1:9464", "[::1]:80"}, ScrapeInterval: 2 * time.Second}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	want := `global:
  scrape_interval: 2s
  scrape_timeout: 2s
  evaluation_interval: 2s
scrape_configs:
  - job_name: servertest
    metrics_path: '/metrics'
    static_configs:
      - targets:
          - '127.0.0.1:9464'
          - '[::1]:80'
`
	if got := cfg.conf(); got != want {
		t.Errorf("conf() =\n%s\nwant\n%s", got, want)
	}
}
