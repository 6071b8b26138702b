package servertest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
)

// TestPrometheusScrapes: a real prometheus scrapes a loopback endpoint, and the query API returns
// its samples with their labels.
func TestPrometheusScrapes(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprint(w, "# TYPE servertest_answer gauge\nservertest_answer{kind=\"life\"} 42\nservertest_answer{kind=\"half\"} 21\n")
	}))
	defer target.Close()
	prom := servertest.StartPrometheus(t, servertest.PrometheusConfig{Targets: []string{strings.TrimPrefix(target.URL, "http://")}})
	if u := prom.URL(); !strings.HasPrefix(u.Host, "127.0.0.1:") {
		t.Errorf("URL() = %v, want http://127.0.0.1:PORT", u)
	}
	got := prom.WaitForQuery(`servertest_answer{kind="life"}`, 30*time.Second, func(s []servertest.Sample) bool { return len(s) == 1 })
	if got[0].Value != 42 || got[0].Labels["kind"] != "life" || got[0].Labels["job"] != "servertest" {
		t.Errorf("sample = %+v, want 42 with kind=life, job=servertest", got[0])
	}
	if _, err := prom.Query(context.Background(), "sum(("); err == nil {
		t.Errorf("a bad query returned no error")
	}
	sum, err := prom.Query(context.Background(), "sum(servertest_answer)")
	if err != nil || len(sum) != 1 || sum[0].Value != 63 {
		t.Errorf("sum = %+v, %v; want 63", sum, err)
	}
}
