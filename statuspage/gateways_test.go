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
	exits, err := pool.ReadExits(strings.NewReader("http://acct-session-{session}:hunter2pw@gate.example:7777 label=gw sessions=2 session-ttl=10m"))
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
	for _, want := range []string{`<section id="gateways">`, `data-gateway="gw"`, "gw#1 gw#2", "proxy_auth", "TTL",
		`data-session="gw#1"`, `data-session="gw#2"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	js := get("?format=json")
	for _, secret := range []string{"hunter2pw", "acct-session-"} {
		if strings.Contains(page, secret) || strings.Contains(js, secret) {
			t.Errorf("the page or its JSON shows %q: a password or a minted session id", secret)
		}
	}
	var table statuspage.Table
	if err := json.Unmarshal([]byte(js), &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Gateways) != 1 || table.Gateways[0].Gateway != "gw" || len(table.Gateways[0].Sessions) != 2 || !table.Gateways[0].Parked {
		t.Errorf("JSON gateways = %+v, want gw parked with 2 sessions", table.Gateways)
	}
	// Each session is grouped under its gateway with its exit's status: both down while the
	// gateway's breaker (their exit breaker) is parked.
	if g := table.Gateways[0]; len(g.Live) != 2 || g.Live[0].Session != "gw#1" || g.Live[0].Status != statuspage.StatusDown || g.Live[1].Status != statuspage.StatusDown {
		t.Errorf("JSON gateway sessions = %+v, want gw#1 and gw#2, both down", g.Live)
	}
}
