package pool_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/pool"
)

// TestGatewayLossesCountOnlyForSessionsThatNeverServed: a session that served and then lost its
// IP to connection failures (a flaky or recycled address) is replaced without counting against
// the gateway, however many do; sessions that fail before they ever serve are the gateway failing,
// and enough of them park it. (Counting every loss parked a 20-session gateway for 31–82 min of
// each simulated 3 h in the gateway world, 10 % of whose IPs are flaky.)
func TestGatewayLossesCountOnlyForSessionsThatNeverServed(t *testing.T) {
	threshold := pool.DefaultExitSettings().FailureThreshold
	for _, tc := range []struct {
		name      string
		serve     bool
		wantState breaker.State
	}{
		{"served first", true, breaker.Closed},
		{"never served", false, breaker.Open},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, rec := gatewayPool(t, gwBase+" sessions=2")
			ctx := context.Background()
			losses := 2 * threshold
			for k := range losses {
				target := p.Exits()[0].Label()
				if tc.serve {
					l, err := p.Pick(ctx, pool.Request{Origin: "o.example", Exit: target})
					if err != nil {
						t.Fatalf("loss %d: Pick(%s) = %v", k, target, err)
					}
					l.Report(gwOK)
				}
				for i := range threshold {
					l, err := p.Pick(ctx, pool.Request{Origin: fmt.Sprint("o", k, "-", i, ".example"), Exit: target})
					if err != nil {
						if !tc.serve {
							break // the gateway is parked: that is this case's point
						}
						t.Fatalf("loss %d, attempt %d: Pick(%s) = %v", k, i, target, err)
					}
					l.Report(gwReset)
				}
			}
			if n := len(rec.list()); tc.serve && n != losses {
				t.Errorf("%d rotations, want %d (one per session lost)", n, losses)
			}
			var gw *pool.GatewayStatus
			for _, g := range p.Snapshot().Gateways {
				if g.Gateway == "gw" {
					gw = &g
				}
			}
			if gw == nil || gw.Breaker.State != tc.wantState {
				t.Errorf("gateway after %d sessions lost (%s) = %+v, want its breaker %v", losses, tc.name, gw, tc.wantState)
			}
		})
	}
}
