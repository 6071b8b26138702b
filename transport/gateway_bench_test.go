package transport_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// BenchmarkGatewayRecovery measures what rotation buys, through proxytest.Gateway, on the pool's
// fake clock: 20 static lines with fixed session ids (what a user writes today) against one
// gateway line with sessions=20, both at their defaults. The origin bans an address for 20 s
// once it has served it 30 requests; requests go one after another, 50 ms apart, 1,500 of them
// (75 s). Per slot — a static line, or a gateway's slot whose session is replaced — recovery is
// the time from the ban's first 403 to the slot's next 200, on the fake clock (in steps of 50 ms)
// and on the wall (what the replacement takes through the real gateway and sockets: the new
// session, its connection, its request; no step sleeps on the wall). Reported: the median and
// maximum of each, goodput (the share of requests served) and the 403s sent. For static lines the
// wall figure only says how fast the loop ran through the 20 s of fake time a ban lasts.
//
//	go test -run XXX -bench GatewayRecovery -benchtime 1x ./transport
func BenchmarkGatewayRecovery(b *testing.B) {
	for _, mode := range []string{"static", "gateway"} {
		b.Run(mode, func(b *testing.B) {
			var r recoveryRun
			for range b.N {
				r = runRecovery(b, mode == "gateway")
			}
			b.ReportMetric(r.median.Seconds(), "median-recovery-s")
			b.ReportMetric(r.max.Seconds(), "max-recovery-s")
			b.ReportMetric(float64(r.wallMedian.Microseconds())/1e3, "median-recovery-wall-ms")
			b.ReportMetric(float64(r.wallMax.Microseconds())/1e3, "max-recovery-wall-ms")
			b.ReportMetric(r.goodput, "goodput")
			b.ReportMetric(float64(r.blocked), "403s")
		})
	}
}

type recoveryRun struct {
	median, max         time.Duration
	wallMedian, wallMax time.Duration
	goodput             float64
	blocked             int
}

// slotTracker follows a gateway's slots through rotations: each replacement takes its old
// session's slot.
type slotTracker struct {
	pool.NopObserver
	mu   sync.Mutex
	slot map[string]string
}

func (s *slotTracker) SessionRotated(r pool.SessionRotation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slot[r.New.Label()] = s.slot[r.Old.Label()]
}

func (s *slotTracker) of(label string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.slot[label]; ok {
		return v
	}
	return label
}

func runRecovery(tb testing.TB, rotate bool) recoveryRun {
	const (
		lines    = 20
		requests = 1500
		step     = 50 * time.Millisecond
	)
	clk := newIntegClock()
	gw, err := proxytest.StartGateway(proxytest.GatewayConfig{User: "acct", Pass: "pw", Now: clk.Now})
	if err != nil {
		tb.Fatal(err)
	}
	defer gw.Close()
	bo := &proxytest.BanOrigin{BanAfter: 30, BanFor: 20 * time.Second, Now: clk.Now}
	srv := httptest.NewServer(bo)
	defer srv.Close()

	var list strings.Builder
	if rotate {
		fmt.Fprintf(&list, "%s label=gw sessions=%d\n", gw.Template(), lines)
	} else {
		for i := range lines {
			fmt.Fprintf(&list, "%s label=line-%d\n", strings.Replace(gw.Template(), "{session}", fmt.Sprint("static", i), 1), i)
		}
	}
	exits, err := pool.ReadExits(strings.NewReader(list.String()))
	if err != nil {
		tb.Fatal(err)
	}
	slots := &slotTracker{slot: map[string]string{}}
	p, err := pool.New(pool.WithExits(exits...), pool.WithClock(clk), pool.WithSeed(1), pool.WithObserver(slots))
	if err != nil {
		tb.Fatal(err)
	}
	tr, err := transport.New(p)
	if err != nil {
		tb.Fatal(err)
	}
	defer tr.Close()
	client := &http.Client{Transport: tr}

	banStart, banWall := map[string]time.Time{}, map[string]time.Time{}
	var recoveries, walls []time.Duration
	served, blocked := 0, 0
	for range requests {
		res := integGet(client, srv.URL)
		now, wall := clk.Now(), time.Now()
		slot := slots.of(res.exit)
		switch {
		case res.status == http.StatusOK:
			served++
			if t0, ok := banStart[slot]; ok {
				recoveries = append(recoveries, now.Sub(t0))
				walls = append(walls, wall.Sub(banWall[slot]))
				delete(banStart, slot)
			}
		case res.status == http.StatusForbidden:
			blocked++
			if _, ok := banStart[slot]; !ok {
				banStart[slot], banWall[slot] = now, wall
			}
		}
		clk.Advance(step)
	}
	if len(recoveries) == 0 {
		tb.Fatalf("no slot recovered from a ban (%d served, %d blocked)", served, blocked)
	}
	slices.Sort(recoveries)
	slices.Sort(walls)
	return recoveryRun{median: recoveries[len(recoveries)/2], max: recoveries[len(recoveries)-1],
		wallMedian: walls[len(walls)/2], wallMax: walls[len(walls)-1],
		goodput: float64(served) / requests, blocked: blocked}
}
