package transport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/otelbreaker"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestGatewayCredentialScan runs traffic through two gateways — one whose sessions get banned and
// rotated, over HTTP and HTTPS, and one with a wrong password (407) — with every output of the
// library plugged in, and greps all of it for the password and for every session id the gateways
// were asked for: errors, the snapshot and saved state as JSON, the status page as HTML and JSON,
// OTel spans and metrics, and debug logs.
func TestGatewayCredentialScan(t *testing.T) {
	const pass = "Pa55-w0rd-XYZ"
	bo := &proxytest.BanOrigin{BanAfter: 2}
	plain := httptest.NewServer(bo)
	t.Cleanup(plain.Close)
	tlsSrv := httptest.NewUnstartedServer(bo)
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	// Four addresses for three sessions: replacements are handed banned ones, which the pool
	// rejects by the reported egress IP (egress-header=), so egress errors are scanned too.
	good, err := proxytest.StartGateway(proxytest.GatewayConfig{User: "acct", Pass: pass, AddrHeader: "X-Exit-IP",
		First: netip.MustParseAddr("127.0.0.10"), Last: netip.MustParseAddr("127.0.0.13")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { good.Close() })
	bad, err := proxytest.StartGateway(proxytest.GatewayConfig{User: "acct", Pass: "other"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bad.Close() })
	list := good.Template() + " label=good sessions=3 session-ttl=5m egress-header=X-Exit-IP\n" + strings.Replace(bad.Template(), ":other@", ":Wr0ngPass@", 1) + " label=bad sessions=2\n"
	exits, err := pool.ReadExits(strings.NewReader(list))
	if err != nil {
		t.Fatal(err)
	}

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	otelObs, err := otelbreaker.New(otelbreaker.WithTracerProvider(tp), otelbreaker.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	var logs integLockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	clk := newIntegClock()
	tr, client := integNew(t, []*httptest.Server{tlsSrv}, pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(3),
		transport.WithObserver(otelObs), transport.WithLogger(logger))

	var out strings.Builder
	for i := range 40 {
		target := plain.URL
		if i%2 == 1 {
			target = tlsSrv.URL
		}
		res := integGet(client, target)
		fmt.Fprintf(&out, "%d %s %v\n", res.status, res.exit, res.err)
		if res.err != nil {
			fmt.Fprintf(&out, "%+v %#v\n", res.err, res.err)
		}
		if i == 20 {
			clk.Advance(5 * 60e9) // past the TTL: every good session rotates
		}
	}
	if bo.Blocks() == 0 || len(good.SessionIDs()) <= 3 || bad.Rejected() == 0 {
		t.Fatalf("traffic did not exercise the gateways: %d blocks, %d session ids, %d 407s", bo.Blocks(), len(good.SessionIDs()), bad.Rejected())
	}

	snap, _ := json.Marshal(tr.Pool().Snapshot())
	saved, _ := json.Marshal(tr.Pool().Save(clk.Now()))
	out.Write(snap)
	out.Write(saved)
	page, err := statuspage.New(tr.Pool())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"", "?format=json"} {
		rec := httptest.NewRecorder()
		page.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+q, nil))
		io.Copy(&out, rec.Body)
	}
	for _, s := range spans.Ended() {
		fmt.Fprintf(&out, "%s %v %v %v\n", s.Name(), s.Attributes(), s.Events(), s.Status())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&out, "%+v\n", rm)
	out.WriteString(logs.String())
	for _, e := range tr.Pool().Exits() {
		fmt.Fprintf(&out, "%v %s %#v\n", e, e, e)
	}

	all := out.String()
	if !strings.Contains(all, "good#") || !strings.Contains(all, "proxy_auth") || !strings.Contains(all, "egress IPs are banned") {
		t.Fatalf("outputs hold no session label or 407: the scan looked at nothing\n%s", all)
	}
	secrets := append([]string{pass, "Wr0ngPass"}, good.SessionIDs()...)
	secrets = append(secrets, bad.SessionIDs()...)
	for _, s := range secrets {
		if i := strings.Index(all, s); i >= 0 {
			t.Errorf("outputs show secret %q: …%s…", s, all[max(0, i-80):min(len(all), i+80)])
		}
	}
}
