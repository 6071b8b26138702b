package pool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

var gwT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	gwBase = "http://acct-session-{session}-country-{country}:s3cret@gate.example:7777 label=gw country=us"
	gwLine = gwBase + " sessions=3"
)

var (
	gwOK      = pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}
	gwBlocked = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked}
	gwAuth    = pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	gwReset   = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassConnection, ConnLevel: true}
)

// rotations records SessionRotated calls.
type rotations struct {
	pool.NopObserver
	events[pool.SessionRotation]
}

func (r *rotations) SessionRotated(x pool.SessionRotation) { r.add(x) }

// gatewayPool returns a pool on a fake clock made of the proxy-list text list.
func gatewayPool(t *testing.T, list string, opts ...pool.Option) (*pool.Pool, *clock.Fake, *rotations) {
	t.Helper()
	exits, err := pool.ReadExits(strings.NewReader(list))
	if err != nil {
		t.Fatalf("ReadExits = %v", err)
	}
	clk := clock.NewFake(gwT0)
	rec := &rotations{}
	p, err := pool.New(append([]pool.Option{pool.WithExits(exits...), pool.WithClock(clk), pool.WithInlineSweep(), pool.WithObserver(rec)}, opts...)...)
	if err != nil {
		t.Fatalf("New = %v", err)
	}
	t.Cleanup(p.Close)
	return p, clk, rec
}

func gwLabels(p *pool.Pool) []string {
	var out []string
	for _, e := range p.Exits() {
		out = append(out, e.Label())
	}
	return out
}

// sessionID returns the minted id in e's dialing URL.
func sessionID(t *testing.T, e *pool.Exit) string {
	t.Helper()
	user := e.ProxyURL().User.Username()
	id, ok := strings.CutPrefix(user, "acct-session-")
	if !ok {
		t.Fatalf("username %q: want acct-session-ID-country-us", user)
	}
	id, ok = strings.CutSuffix(id, "-country-us")
	if !ok {
		t.Fatalf("username %q: want the country filled in", user)
	}
	return id
}

func TestGatewayMintsSessions(t *testing.T) {
	p, _, _ := gatewayPool(t, gwLine)
	got := gwLabels(p)
	want := []string{"gw#1", "gw#2", "gw#3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Exits() = %v, want %v", got, want)
	}
	seen := map[string]bool{}
	for _, e := range p.Exits() {
		id := sessionID(t, e)
		if len(id) != pool.DefaultSessionIDLength || strings.Trim(id, pool.DefaultSessionAlphabet) != "" || seen[id] {
			t.Errorf("minted id %q: want %d fresh characters of %s", id, pool.DefaultSessionIDLength, pool.DefaultSessionAlphabet)
		}
		seen[id] = true
		if v, _ := e.Attr("country"); v != "us" {
			t.Errorf("session %s: country = %q, want the template's us", e.Label(), v)
		}
		if l := e.WithLabel("").Label(); strings.Contains(l, id) {
			t.Errorf("WithLabel(\"\") = %q: shows the minted id", l)
		}
	}
}

func TestGatewaySeededIDsReplay(t *testing.T) {
	a, _, _ := gatewayPool(t, gwLine+" session-length=6 session-chars=abcdef", pool.WithSeed(7))
	b, _, _ := gatewayPool(t, gwLine+" session-length=6 session-chars=abcdef", pool.WithSeed(7))
	for i := range a.Exits() {
		ia, ib := sessionID(t, a.Exits()[i]), sessionID(t, b.Exits()[i])
		if ia != ib || len(ia) != 6 || strings.Trim(ia, "abcdef") != "" {
			t.Errorf("session %d: seeded pools minted %q and %q, want the same 6 characters of abcdef", i, ia, ib)
		}
	}
}

func TestGatewayTemplateErrors(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"http://a-session-{session}:pw9@g:1 sessions=0", "sessions \"0\""},
		{"http://a-session-{session}:pw9@g:1 session-ttl=soon", "session-ttl"},
		{"http://a-session-{session}:pw9@g:1 rotate=maybe", "rotate"},
		{"http://a-session-{session}-country-{country}:pw9@g:1", "placeholder {country}"},
		{"http://a-session-{session}:pw9@g:1 session-chars=ab-", "session-chars"},
		{"g:1:a-session-{session}:pw9 session-length=2", "session-length"},
	} {
		_, err := pool.ReadExits(strings.NewReader(tc.line))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("ReadExits(%q) = %v, want an error naming line 1 and %s", tc.line, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw9") {
			t.Errorf("ReadExits(%q) = %v: shows the password", tc.line, err)
		}
	}
}

func TestGatewayRotatesBannedSession(t *testing.T) {
	p, _, rec := gatewayPool(t, gwBase+" sessions=1")
	ctx := context.Background()
	l, err := p.Pick(ctx, pool.Request{Origin: "shop.example"})
	if err != nil {
		t.Fatal(err)
	}
	first := l.Exit()
	l.Report(gwBlocked)
	// The next pick is served at once, by a new session, with nothing waited.
	l, err = p.Pick(ctx, pool.Request{Origin: "shop.example"})
	if err != nil {
		t.Fatalf("Pick after the ban = %v, want the replacement session", err)
	}
	if l.Exit().Label() != "gw#2" || sessionID(t, l.Exit()) == sessionID(t, first) {
		t.Errorf("after the ban picked %s (id changed: %v), want gw#2 with a new id", l.Exit().Label(), sessionID(t, l.Exit()) != sessionID(t, first))
	}
	l.Report(gwOK)
	got := rec.list()
	if len(got) != 1 || got[0].Reason != pool.RotationBlocked || got[0].Origin != "shop.example" || got[0].Old != first || got[0].New.Label() != "gw#2" || got[0].Gateway != "gw" {
		t.Errorf("rotations = %+v, want one, blocked by shop.example, gw#1 → gw#2", got)
	}
	if fmt.Sprint(gwLabels(p)) != "[gw#2]" {
		t.Errorf("Exits() = %v, want [gw#2]", gwLabels(p))
	}
}

func TestGatewayRotateOffWaits(t *testing.T) {
	p, _, rec := gatewayPool(t, gwBase+" sessions=1 rotate=off")
	ctx := context.Background()
	l, _ := p.Pick(ctx, pool.Request{Origin: "shop.example"})
	l.Report(gwBlocked)
	if _, err := p.Pick(ctx, pool.Request{Origin: "shop.example"}); !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Errorf("Pick after a ban with rotate=off = %v, want ErrNoHealthyExit (the session waits)", err)
	}
	if n := len(rec.list()); n != 0 {
		t.Errorf("%d rotations with rotate=off, want 0", n)
	}
}

func TestGatewayScopeParksEverySession(t *testing.T) {
	p, clk, _ := gatewayPool(t, gwBase+" sessions=5")
	ctx := context.Background()
	l, _ := p.Pick(ctx, pool.Request{Origin: "a.example"})
	l.Report(gwAuth)
	for _, origin := range []string{"a.example", "b.example"} {
		if _, err := p.Pick(ctx, pool.Request{Origin: origin}); !errors.Is(err, pool.ErrNoHealthyExit) {
			t.Errorf("Pick(%s) after one 407 = %v, want every session parked", origin, err)
		}
	}
	var gw *pool.GatewayStatus
	snap := p.Snapshot()
	for i := range snap.Gateways {
		if snap.Gateways[i].Gateway == "gw" {
			gw = &snap.Gateways[i]
		}
	}
	if gw == nil || gw.Breaker.State != breaker.Open || len(gw.Sessions) != 5 {
		t.Fatalf("Snapshot().Gateways = %+v, want gw OPEN with 5 sessions", snap.Gateways)
	}
	// One probe finds the gateway back for all of them.
	clk.Advance(pool.DefaultExitSettings().ParkFor + 24*time.Hour)
	l, err := p.Pick(ctx, pool.Request{Origin: "a.example"})
	if err != nil {
		t.Fatalf("Pick after the park = %v", err)
	}
	if _, err := p.Pick(ctx, pool.Request{Origin: "b.example"}); !errors.Is(err, pool.ErrNoHealthyExit) {
		t.Errorf("second Pick while the gateway's probe is out = %v, want one probe for every session", err)
	}
	l.Report(gwOK)
	for range 5 {
		l, err := p.Pick(ctx, pool.Request{Origin: "b.example"})
		if err != nil {
			t.Fatalf("Pick after the probe = %v", err)
		}
		l.Report(gwOK)
	}
}

func TestGatewayConnectionFailuresRotateOneSession(t *testing.T) {
	p, _, rec := gatewayPool(t, gwBase+" sessions=2")
	ctx := context.Background()
	target := p.Exits()[0].Label()
	for i := 0; i < pool.DefaultExitSettings().FailureThreshold; i++ {
		l, err := p.Pick(ctx, pool.Request{Origin: fmt.Sprint("o", i, ".example"), Exit: target})
		if err != nil {
			t.Fatalf("attempt %d: Pick = %v", i, err)
		}
		l.Report(gwReset)
	}
	got := rec.list()
	if len(got) != 1 || got[0].Reason != pool.RotationConnection || got[0].Old.Label() != target {
		t.Fatalf("rotations = %+v, want %s replaced for its connection failures", got, target)
	}
	// The other session and the gateway are untouched.
	for range 4 {
		l, err := p.Pick(ctx, pool.Request{Origin: "o0.example"})
		if err != nil {
			t.Fatalf("Pick after the rotation = %v", err)
		}
		l.Report(gwOK)
	}
}

func TestGatewayTTLRetiresSessions(t *testing.T) {
	p, clk, rec := gatewayPool(t, gwLine+" session-ttl=10m")
	ctx := context.Background()
	pickOK := func() {
		t.Helper()
		l, err := p.Pick(ctx, pool.Request{Origin: "a.example"})
		if err != nil {
			t.Fatal(err)
		}
		l.Report(gwOK)
	}
	clk.Advance(10*time.Minute - time.Second)
	pickOK()
	if n := len(rec.list()); n != 0 {
		t.Fatalf("%d rotations before the TTL, want 0", n)
	}
	clk.Advance(time.Second)
	pickOK()
	got := rec.list()
	if len(got) != 3 || got[0].Reason != pool.RotationTTL {
		t.Fatalf("rotations at the TTL = %+v, want the 3 sessions retired for their TTL", got)
	}
	if fmt.Sprint(gwLabels(p)) != "[gw#4 gw#5 gw#6]" {
		t.Errorf("Exits() = %v, want [gw#4 gw#5 gw#6]", gwLabels(p))
	}
	clk.Advance(5 * time.Minute)
	pickOK()
	if n := len(rec.list()); n != 3 {
		t.Errorf("%d rotations half a TTL later, want still 3", n)
	}
}

func TestGatewayStickySessionFollowsRotation(t *testing.T) {
	p, _, rec := gatewayPool(t, gwLine)
	ctx := context.Background()
	cart := pool.Request{Origin: "shop.example", Session: "cart-1"}
	l, _ := p.Pick(ctx, cart)
	first := l.Exit()
	if l.Info().SessionMoved {
		t.Errorf("first pick of a session: SessionMoved, want not")
	}
	l.Report(gwBlocked)
	l, err := p.Pick(ctx, cart)
	if err != nil {
		t.Fatal(err)
	}
	got := rec.list()
	if len(got) != 1 || got[0].Followers != 1 || l.Exit() != got[0].New || !l.Info().SessionMoved {
		t.Fatalf("after the ban: exit %s moved=%v, rotations %+v: want the replacement of %s, SessionMoved, one follower", l.Exit(), l.Info().SessionMoved, got, first)
	}
	l.Report(gwOK)
	l, _ = p.Pick(ctx, cart)
	if l.Info().SessionMoved || l.Exit() != got[0].New {
		t.Errorf("next pick: %s moved=%v, want %s, not moved", l.Exit(), l.Info().SessionMoved, got[0].New)
	}
	l.Report(gwOK)
}

func TestStrictSessionFailsOnRotation(t *testing.T) {
	p, _, _ := gatewayPool(t, gwLine, pool.WithStrictSessions())
	ctx := context.Background()
	cart := pool.Request{Origin: "shop.example", Session: "cart-1"}
	l, _ := p.Pick(ctx, cart)
	l.Report(gwBlocked)
	_, err := p.Pick(ctx, cart)
	var lost *pool.SessionLostError
	if !errors.As(err, &lost) || !errors.Is(err, pool.ErrSessionLost) || !lost.Rotated || lost.Origin != "shop.example" {
		t.Fatalf("Pick after the rotation = %v, want a *SessionLostError, rotated, for shop.example", err)
	}
	if strings.Contains(err.Error(), "cart-1") {
		t.Errorf("error %q names the caller's session", err)
	}
	l, err = p.Pick(ctx, cart)
	if err != nil || l.Info().SessionMoved {
		t.Errorf("Pick after the error = %v (moved %v), want a fresh start", err, l.Info().SessionMoved)
	}
}

func TestGatewaySyncAndRemove(t *testing.T) {
	p, _, _ := gatewayPool(t, gwLine)
	before := gwLabels(p)
	read := func(text string) []*pool.Exit {
		exits, err := pool.ReadExits(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return exits
	}
	if _, err := p.Sync(read(gwLine + "\nhttp://dc.example:8080 label=dc")); err != nil {
		t.Fatal(err)
	}
	if got := gwLabels(p); fmt.Sprint(got) != fmt.Sprint(append(before, "dc")) {
		t.Errorf("Sync with the same template: %v, want its sessions kept and dc added", got)
	}
	if _, err := p.Sync(read(strings.Replace(gwLine, "sessions=3", "sessions=2", 1))); err != nil {
		t.Fatal(err)
	}
	if got := gwLabels(p); fmt.Sprint(got) != "[gw#1 gw#2]" {
		t.Errorf("Sync with a changed template: %v, want a fresh gateway of 2 sessions", got)
	}
	if err := p.Remove("gw#1"); err == nil {
		t.Errorf("Remove(a session) = nil, want an error naming its gateway")
	}
	if err := p.Remove("gw"); err != nil || len(p.Exits()) != 0 {
		t.Errorf("Remove(gw) = %v, exits %v, want every session gone", err, gwLabels(p))
	}
	if err := p.Add(read(gwLine)...); err != nil || len(p.Exits()) != 3 {
		t.Errorf("Add after Remove = %v, exits %v", err, gwLabels(p))
	}
	if err := p.Add(read(gwLine)...); err == nil {
		t.Errorf("Add of a gateway twice = nil, want a duplicate label")
	}
}

func TestGatewayOutputsHideCredentials(t *testing.T) {
	p, _, _ := gatewayPool(t, gwBase+" sessions=2")
	ctx := context.Background()
	l, _ := p.Pick(ctx, pool.Request{Origin: "a.example"})
	l.Report(gwBlocked)
	l, _ = p.Pick(ctx, pool.Request{Origin: "a.example"})
	l.Report(gwAuth)
	snap, _ := json.Marshal(p.Snapshot())
	saved, _ := json.Marshal(p.Save(p.Clock().Now()))
	_, perr := p.Pick(ctx, pool.Request{Origin: "a.example"})
	out := string(snap) + string(saved) + fmt.Sprint(perr) + fmt.Sprintf("%v %#v", p.Exits(), p.Exits())
	for _, e := range p.Exits() {
		if id := sessionID(t, e); strings.Contains(out, id) {
			t.Errorf("outputs show minted id %s: %s", id, out)
		}
	}
	if strings.Contains(out, "s3cret") {
		t.Errorf("outputs show the password: %s", out)
	}
	if !strings.Contains(string(saved), `"exit":"gw"`) {
		t.Errorf("Save() = %s, want the gateway's parked breaker under its label", saved)
	}
}
