package statuspage_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/statuspage"
)

func TestPageShowsGatewaysWithSessions(t *testing.T) {
	exits, err := pool.ReadExits(strings.NewReader("http://acct-session-{session}:pw@gate.example:7777 label=gw sessions=2 session-ttl=10m"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(pool.WithExits(exits...), pool.WithClock(clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))))
	if err != nil {
		t.Fatal(err)
	}
	l, err := p.Pick(context.Background(), pool.Request{Origin: "a.example"})
	if err != nil {
		t.Fatal(err)
	}
	l.Report(pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth})
	h, err := statuspage.New(p)
	if err != nil {
		t.Fatal(err)
	}
	get := func(q string) string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/"+q, nil))
		return rec.Body.String()
	}
	page := get("")
	for _, want := range []string{`<section id="gateways">`, `data-gateway="gw"`, "gw#1 gw#2", "proxy_auth", "TTL"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	var table statuspage.Table
	if err := json.Unmarshal([]byte(get("?format=json")), &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Gateways) != 1 || table.Gateways[0].Gateway != "gw" || len(table.Gateways[0].Sessions) != 2 || !table.Gateways[0].Parked {
		t.Errorf("JSON gateways = %+v, want gw parked with 2 sessions", table.Gateways)
	}
}
