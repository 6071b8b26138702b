package sim

import (
	"testing"
	"time"
)

func TestProviderSessionsStickUntilTTL(t *testing.T) {
	p := NewProvider(ProviderIPs, ProviderTTL, 1)
	user := func(i int) string { return "cust-session-s" + string(rune('a'+i%26)) + string(rune('a'+i/26)) }
	first := make([]int, 50)
	distinct := map[int]bool{}
	for i := range first {
		first[i] = p.IP(user(i), Epoch)
		distinct[first[i]] = true
	}
	if len(distinct) < 30 {
		t.Fatalf("50 sessions drew %d distinct IPs of %d, want the provider's draws spread", len(distinct), ProviderIPs)
	}
	// Sticky until the TTL after the first request, whatever requests come in between.
	for _, at := range []time.Duration{time.Second, 5 * time.Minute, ProviderTTL - time.Nanosecond} {
		for i := range first {
			if got := p.IP(user(i), Epoch.Add(at)); got != first[i] {
				t.Fatalf("session %d at +%v: IP %d, want its sticky %d", i, at, got, first[i])
			}
		}
	}
	// Recycled at the TTL: a fresh draw, which sticks in its turn.
	changed := 0
	for i := range first {
		ip := p.IP(user(i), Epoch.Add(ProviderTTL))
		if ip != first[i] {
			changed++
		}
		if again := p.IP(user(i), Epoch.Add(2*ProviderTTL-time.Second)); again != ip {
			t.Fatalf("session %d: recycled IP %d moved to %d before its own TTL", i, ip, again)
		}
	}
	if changed < 45 {
		t.Fatalf("%d of 50 sessions got another IP at the TTL, want nearly all (1 in %d keeps it by chance)", changed, ProviderIPs)
	}
}

func TestProviderRotatingPortDrawsPerRequest(t *testing.T) {
	p := NewProvider(ProviderIPs, ProviderTTL, 1)
	seen := map[int]bool{}
	for range 100 {
		seen[p.IP("cust", Epoch)] = true
	}
	if len(seen) < 60 {
		t.Fatalf("100 requests without a session got %d distinct IPs, want a fresh draw each", len(seen))
	}
}

// The world's IPs share subnets, and a ban an IP did not draw itself is one a subnet-mate drew
// for the same origin; some bans do spread.
func TestGatewayWorldBansSpreadToSubnets(t *testing.T) {
	sc := GatewayWorld(1)
	g := NewTruth(sc)
	if sc.Exits != ProviderIPs {
		t.Fatalf("exits = %d, want the provider's %d IPs", sc.Exits, ProviderIPs)
	}
	mates := map[int][]int{}
	for e := range sc.Exits {
		if k := g.Kind(e); k != Healthy && k != Flaky {
			t.Fatalf("IP %d is %v: a gateway world's IPs are healthy or flaky", e, k)
		}
		if s := g.Subnet(e); s >= 0 {
			mates[s] = append(mates[s], e)
		}
	}
	spread := 0
	for e := range sc.Exits {
		for o := range sc.Origins {
			for _, w := range g.Bans(e, o) {
				if within(g.OwnBans(e, o), w.From) {
					continue
				}
				found := false
				for _, m := range mates[g.Subnet(e)] {
					found = found || (m != e && within(g.OwnBans(m, o), w.From))
				}
				if !found {
					t.Fatalf("IP %d origin %d: ban from %v is neither its own nor a subnet-mate's", e, o, w.From)
				}
				spread++
			}
		}
	}
	if spread == 0 {
		t.Fatal("no ban spread to a subnet-mate")
	}
}

// Through the provider, 20 static lines reach at most 20 IPs before the provider's first TTL,
// while the gateway line reaches more (it replaces banned sessions); both meet bans and measure their
// recovery per line.
func TestGatewayStrategiesReachIPsThroughUsernames(t *testing.T) {
	sc := GatewayWorld(1)
	sc.Duration = ProviderTTL + RecoveryHorizon + 5*time.Minute
	for _, c := range []struct {
		st       Strategy
		most     int // distinct IPs at most; 0: no bound
		moreThan int
	}{
		{GatewayLines(GatewayLineCount), GatewayLineCount, 0},
		{GatewaySessions(GatewayLineCount), 0, GatewayLineCount},
	} {
		ips := map[int]bool{}
		st := c.st
		inner := st.New
		st.New = func(env *Env) (Router, func(), error) {
			env.Trace = func(e int, _ Request, r Result, now time.Time) {
				if now.Add(-r.Latency).Before(Epoch.Add(ProviderTTL)) { // sent within the first TTL
					ips[e] = true
				}
			}
			return inner(env)
		}
		m, err := Run(sc, st)
		if err != nil {
			t.Fatal(err)
		}
		if c.most > 0 && len(ips) > c.most {
			t.Errorf("%s: %d distinct IPs within the TTL, want at most %d", m.Strategy, len(ips), c.most)
		}
		if len(ips) <= c.moreThan {
			t.Errorf("%s: %d distinct IPs, want more than %d", m.Strategy, len(ips), c.moreThan)
		}
		if m.Successes == 0 || len(m.Recovery)+m.Unrecovered == 0 || m.Unmet != 0 {
			t.Errorf("%s: %d pages, %d recoveries, %d unrecovered, %d unmet: want pages and bans met, measured per line", m.Strategy, m.Successes, len(m.Recovery), m.Unrecovered, m.Unmet)
		}
	}
}
