package pool_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// TestGatewayRotationStress picks and reports from many goroutines while sessions are banned,
// fail and expire, and a reload syncs the same list: the gateway ends with exactly its sessions,
// each label once, none of them one it retired.
func TestGatewayRotationStress(t *testing.T) {
	list := gwBase + " sessions=5 session-ttl=1m"
	p, clk, rec := gatewayPool(t, list)
	exits, err := pool.ReadExits(strings.NewReader(list))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				origin := fmt.Sprint("o", i%3, ".example")
				l, err := p.Pick(ctx, pool.Request{Origin: origin, Session: fmt.Sprint("s", g)})
				if err != nil {
					continue
				}
				switch i % 7 {
				case 0:
					l.Report(gwBlocked)
				case 1, 2:
					l.Report(gwReset)
				default:
					l.Report(gwOK)
				}
				if g == 0 && i%50 == 0 {
					clk.Advance(20 * time.Second)
				}
				if g == 1 && i%100 == 0 {
					if _, err := p.Sync(exits); err != nil {
						t.Error(err)
					}
				}
			}
		}()
	}
	wg.Wait()
	if len(rec.list()) == 0 {
		t.Fatal("no rotation happened: the test exercised nothing")
	}
	got := gwLabels(p)
	seen := map[string]bool{}
	for _, l := range got {
		if seen[l] || !strings.HasPrefix(l, "gw#") {
			t.Errorf("Exits() = %v: label %s twice or not a session", got, l)
		}
		seen[l] = true
	}
	snap := p.Snapshot()
	if len(got) != 5 || len(snap.Gateways) != 1 || fmt.Sprint(snap.Gateways[0].Sessions) != fmt.Sprint(got) {
		t.Errorf("after the run: exits %v, gateways %+v; want the gateway's 5 live sessions", got, snap.Gateways)
	}
	for _, r := range rec.list() {
		if seen[r.Old.Label()] {
			t.Errorf("session %s is live and retired", r.Old.Label())
		}
	}
}
