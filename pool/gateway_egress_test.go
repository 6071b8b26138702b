package pool_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/proxybreaker/proxybreaker/pool"
)

// A session's egress IP, once blocked by an origin, is banned there: a session assigned it for
// that origin is replaced (RotationEgress), one assigned it for another origin is not, and the
// ban ends after EgressBanFor. GatewayStatus.EgressBans counts the bans in force.
func TestGatewayEgressBanPerIPAndOrigin(t *testing.T) {
	p, clk, rec := gatewayPool(t, gwBase+" sessions=1")
	ip := netip.MustParseAddr("203.0.113.7")
	pick := func(origin string) pool.Lease {
		t.Helper()
		l, err := p.Pick(context.Background(), pool.Request{Origin: origin})
		if err != nil {
			t.Fatalf("Pick(%s) = %v", origin, err)
		}
		return l
	}
	l := pick("a.example")
	if l.SetEgress(ip) {
		t.Fatal("SetEgress of an unknown IP reported it banned")
	}
	l.Report(gwBlocked) // a.example bans ip; the session rotates (blocked)
	if got := p.Snapshot().Gateways[0].EgressBans; got != 1 {
		t.Fatalf("EgressBans = %d, want 1", got)
	}
	if l := pick("b.example"); l.SetEgress(ip) {
		t.Error("ip reported banned for b.example, which never banned it")
	} else {
		l.Report(gwOK)
	}
	l = pick("a.example")
	if !l.SetEgress(ip) {
		t.Fatal("a new session assigned the IP a.example banned: SetEgress = false, want true")
	}
	l.Release()
	if got := rec.list(); len(got) != 2 || got[1].Reason != pool.RotationEgress || got[1].Origin != "a.example" {
		t.Fatalf("rotations = %+v, want blocked then egress for a.example", got)
	}
	clk.Advance(pool.EgressBanFor)
	l = pick("a.example")
	if l.SetEgress(ip) {
		t.Error("the ban outlived EgressBanFor")
	}
	l.Report(gwOK)
}
