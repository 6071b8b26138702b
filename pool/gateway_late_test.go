package pool_test

import (
	"context"
	"testing"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// Connection failures of attempts still in flight through a session when it was replaced are its
// IP's, as they were before: they never count against the gateway's breaker, which would park
// every session. (Found by the simulation's gateway world: timeouts of 15 s outlived their
// sessions' rotations and parked the gateway most of the time.)
func TestGatewayLateFailuresOfRetiredSessionSpareTheGateway(t *testing.T) {
	p, _, rec := gatewayPool(t, gwLine)
	ctx := context.Background()
	var leases []pool.Lease
	for range 6 {
		l, err := p.Pick(ctx, pool.Request{Origin: "shop.example", Exit: "gw#1"})
		if err != nil {
			t.Fatalf("Pick = %v", err)
		}
		leases = append(leases, l)
	}
	leases[0].Report(gwBlocked)
	if got := rec.list(); len(got) != 1 || got[0].Old.Label() != "gw#1" {
		t.Fatalf("rotations = %v, want gw#1 replaced", got)
	}
	for _, l := range leases[1:] {
		l.Report(gwReset)
	}
	if b := p.Snapshot().Gateways[0].Breaker; b.State != breaker.Closed || b.FailuresInWindow != 0 {
		t.Fatalf("gateway breaker = %s with %d failures after a retired session's late failures, want closed with none", b.State, b.FailuresInWindow)
	}
	if _, err := p.Pick(ctx, pool.Request{Origin: "shop.example"}); err != nil {
		t.Fatalf("Pick after late failures = %v, want a session", err)
	}
}
