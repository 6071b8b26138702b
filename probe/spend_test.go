package probe_test

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/probe"
)

// TestRunCountsBytesAndSpend: probes through two real proxies, one priced (cost attributes), one
// not, over HTTPS (CONNECT and TLS) and plain HTTP. Each exit's bytes in the report are what its
// proxy counted on its sockets (within 1 %); each result's spend is its bytes × the price per GB
// plus the price per request; the exits' and the run's spend sum them.
func TestRunCountsBytesAndSpend(t *testing.T) {
	const perGB, perRequest = 4.0, 0.0005
	secure, plain := startOrigin(t, true, nil, nil), startOrigin(t, false, nil, nil)
	priced := startProxy(t, proxytest.Config{Name: "priced"})
	free := startProxy(t, proxytest.Config{Name: "free"})
	exits := []*pool.Exit{
		exitVia(t, priced.URL(), "priced").WithCost(pool.Cost{PerGB: perGB, PerRequest: perRequest}),
		exitVia(t, free.URL(), "free"),
	}
	targets := []string{secure.URL + "/a", plain.URL + "/b", secure.URL + "/c"}
	p, err := probe.New(probe.Config{Exits: exits, Targets: targets, Template: template(secure)})
	if err != nil {
		t.Fatal(err)
	}
	rep := p.Run(context.Background())
	var spend float64
	for _, r := range rep.Results {
		if !r.Success() || r.Bytes <= 0 {
			t.Fatalf("result %+v: want a success that moved bytes", r)
		}
		want := 0.0
		if r.Exit == "priced" {
			want = float64(r.Bytes)*perGB/1e9 + perRequest
		}
		if math.Abs(r.Spend-want) > 1e-9 {
			t.Errorf("result %s %s: Spend = %v, want %v (%d bytes)", r.Exit, r.Target, r.Spend, want, r.Bytes)
		}
		spend += r.Spend
	}
	sockets := map[string]int64{}
	for name, px := range map[string]*proxytest.Proxy{"priced": priced, "free": free} {
		px.Close() // the counts are final once the proxy has closed
		sockets[name] = px.BytesFromClients() + px.BytesToClients()
	}
	exitBytes := map[string]int64{}
	for e := range rep.Exits() {
		exitBytes[e.Exit] = e.Bytes
		if d := math.Abs(float64(e.Bytes - sockets[e.Exit])); e.Bytes <= 0 || d > 0.01*float64(sockets[e.Exit]) {
			t.Errorf("exit %s: Bytes = %d, want the proxy's count %d within 1 %%", e.Exit, e.Bytes, sockets[e.Exit])
		}
		if e.Exit == "free" && e.Spend != 0 {
			t.Errorf("exit free: Spend = %v, want 0 (no prices)", e.Spend)
		}
	}
	if math.Abs(rep.Overall.Spend-spend) > 1e-9 || rep.Overall.Spend <= 3*perRequest {
		t.Errorf("Overall.Spend = %v, want the results' %v", rep.Overall.Spend, spend)
	}
	var b strings.Builder
	if err := rep.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		regexp.QuoteMeta(fmt.Sprintf("traffic: %d bytes through the proxies; spend %.6f", rep.Overall.Bytes, rep.Overall.Spend)),
		fmt.Sprintf(`\npriced .* %d +%.6f\n`, exitBytes["priced"], spend), // the priced exit's row ends so
	} {
		if !regexp.MustCompile(want).MatchString(b.String()) {
			t.Errorf("WriteTable lacks %q:\n%s", want, b.String())
		}
	}
}
