package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// The gateway world (issue 27): a provider sells its pool of IPs through one gateway host:port,
// and the username chooses the IP (Provider). "cust-session-ab12cd" pins the IP the provider drew
// for session ab12cd until ProviderTTL after the session's first request, when the provider
// recycles it and the next request draws another; a username without a session ("cust") is a
// rotating port, a fresh IP for every request. The ground truth's exits are the provider's IPs:
// origins cap, ban and time out IPs — never sessions — with the round-3 world's models, subnet
// bans included, so a session that lands on a banned IP (or on a subnet-mate of one) is banned
// with it. A strategy reaches an IP only through a username.
//
// Three ways to use such a provider, each through the real pool on the simulation's clock:
// GatewayLines writes N lines with invented session ids, as users do today; GatewayRotating writes
// the rotating port as one line; GatewaySessions writes one gateway line with {session},
// sessions=N and session-ttl, and the pool mints, rotates and retires the sessions.

// Gateway world sizes.
const (
	// ProviderIPs is how many IPs the provider's pool holds, in subnets of 4.
	ProviderIPs = 200
	// GatewayLineCount is how many lines (static or minted sessions) a strategy keeps.
	GatewayLineCount = 20
	// ProviderTTL is the provider's sticky lifetime: 10 minutes, the default sticky session of
	// most residential providers.
	ProviderTTL = 10 * time.Minute
)

// gatewayUser and gatewayHost make the lines: a provider's username syntax, a gateway host that is
// a name (the pool groups IPv4 literals by /24, and a gateway's lines share one address).
const (
	gatewayUser    = "cust"
	gatewaySession = "-session-"
	gatewayHost    = "gate.provider.test:7777"
)

// GatewayWorld is the gateway world for seed: the round-3 world of the same seed (its origins'
// caps, windows, Retry-After, ban pages and hardening; its ban bands; slow pairs, outages, bursts,
// soft blocks; subnets of 4 whose bans spread with probability 0.3) with its exits the provider's
// 200 IPs, 20 of them flaky. No IP is dead or fails auth and no proxy denies an origin: those are
// the gateway's own answers, the same for every IP (a residential IP that goes away is simply not
// drawn), so the world has no churn either.
func GatewayWorld(seed uint64) Scenario {
	sc := Round3World(seed)
	sc.Name = "gateway world"
	sc.Exits, sc.Dead, sc.Auth, sc.Flaky, sc.Denials = ProviderIPs, 0, 0, ProviderIPs/10, 0
	sc.ChurnPerHour = 0
	return sc
}

// GatewaySeeds are the seeds RESULTS.md reports the gateway world for.
var GatewaySeeds = []uint64{1, 2, 3, 4, 5}

// Provider maps usernames to the IPs of its pool, as a provider's gateway does. It is not safe for
// concurrent use (the scheduler runs one worker at a time).
type Provider struct {
	ips    int
	ttl    time.Duration
	r      *rand.Rand
	sticky map[string]stickyIP
}

type stickyIP struct {
	ip    int
	until time.Time
}

// NewProvider returns a provider of ips IPs whose sessions stick ttl after their first request,
// its draws seeded.
func NewProvider(ips int, ttl time.Duration, seed uint64) *Provider {
	return &Provider{ips: ips, ttl: ttl, r: rand.New(rand.NewPCG(seed, 0x676174657761790a)), sticky: map[string]stickyIP{}}
}

// IP returns the IP (exit index of the ground truth) a request with username user gets at now: a
// session's sticky IP, drawn at its first request or after its TTL ran out; a fresh IP for a
// username without a session.
func (p *Provider) IP(user string, now time.Time) int {
	i := strings.Index(user, gatewaySession)
	if i < 0 {
		return p.r.IntN(p.ips)
	}
	id := user[i+len(gatewaySession):]
	s, ok := p.sticky[id]
	if !ok || !now.Before(s.until) {
		s = stickyIP{ip: p.r.IntN(p.ips), until: now.Add(p.ttl)}
		p.sticky[id] = s
	}
	return s.ip
}

// GatewayLines is what a user writes today: n lines through the gateway, each with an invented
// session id, to the pool n fixed exits.
func GatewayLines(n int, opts ...pool.Option) Strategy {
	return gatewayStrategy(fmt.Sprintf("%d static session lines", n), func() ([]*pool.Exit, error) {
		var list strings.Builder
		for i := range n {
			fmt.Fprintf(&list, "http://%s%sline%02d:pw@%s label=line%02d\n", gatewayUser, gatewaySession, i, gatewayHost, i)
		}
		return pool.ReadExits(strings.NewReader(list.String()))
	}, opts...)
}

// GatewayRotating is the rotating port written as one line: a fresh IP per request behind one
// exit, so one ban answer trips the pair of the whole port for its origin.
func GatewayRotating() Strategy {
	return gatewayStrategy("rotating port, one line", func() ([]*pool.Exit, error) {
		return pool.ReadExits(strings.NewReader("http://" + gatewayUser + ":pw@" + gatewayHost + " label=rot\n"))
	})
}

// GatewaySessions is the pool's gateway support: one line with {session}, sessions=n and the
// provider's TTL, rotating at once a failing session or one whose bans tip it over, holding
// other bans on their pairs (rotate=on, the default; pool/gateway_hold.go).
func GatewaySessions(n int, opts ...pool.Option) Strategy {
	return gatewaySessions(fmt.Sprintf("gateway line, sessions=%d", n), n, "on", opts...)
}

// GatewaySessionsKept is GatewaySessions with rotate=off: a session is replaced at its TTL only,
// in step with the provider's recycling, a banned one waits as a static line does, and one whose
// connections fail rests alone (pool/gateway_kept.go).
func GatewaySessionsKept(n int, opts ...pool.Option) Strategy {
	return gatewaySessions(fmt.Sprintf("gateway line, sessions=%d rotate=off", n), n, "off", opts...)
}

func gatewaySessions(name string, n int, rotate string, opts ...pool.Option) Strategy {
	return gatewayStrategy(name, func() ([]*pool.Exit, error) {
		return pool.ReadExits(strings.NewReader(fmt.Sprintf("http://%s%s{session}:pw@%s label=gw sessions=%d session-ttl=%s rotate=%s\n",
			gatewayUser, gatewaySession, gatewayHost, n, ProviderTTL, rotate)))
	}, opts...)
}

// gatewayStrategy plays the pool with defaults (and opts) over the exits lines makes, through a
// Provider.
func gatewayStrategy(name string, lines func() ([]*pool.Exit, error), opts ...pool.Option) Strategy {
	return Strategy{Name: name, New: func(env *Env) (Router, func(), error) {
		exits, err := lines()
		if err != nil {
			return nil, nil, err
		}
		r := &gatewayRouter{
			env: env, prov: NewProvider(env.Scenario.Exits, ProviderTTL, env.Scenario.Seed),
			line: map[string]int{}, origins: make([]string, len(env.Scenario.Origins)),
			rec: newLineRecovery(env),
		}
		p, err := pool.New(append([]pool.Option{pool.WithExits(exits...), pool.WithClock(env.Clock), pool.WithSeed(env.Uint64()),
			pool.WithInlineSweep(), pool.WithObserver(r)}, opts...)...)
		if err != nil {
			return nil, nil, err
		}
		r.p = p
		for i, l := range p.Exits() {
			r.line[l.Label()] = i
		}
		for o := range r.origins {
			r.origins[o] = OriginKey(o)
		}
		return r, func() { p.Close(); r.rec.finish() }, nil
	}}
}

// gatewayRouter routes each request through a lease of its pool, and the lease's exit through the
// provider: the exit's dialing username decides the IP.
type gatewayRouter struct {
	pool.NopObserver
	env     *Env
	p       *pool.Pool
	prov    *Provider
	line    map[string]int // line by exit label; a replacement session takes its old one's
	origins []string
	rec     *lineRecovery
}

// SessionRotated keeps a replaced session's line for its replacement (pool.SessionObserver).
func (r *gatewayRouter) SessionRotated(s pool.SessionRotation) {
	r.line[s.New.Label()] = r.line[s.Old.Label()]
	delete(r.line, s.Old.Label())
}

// Route is poolRouter.Route with the IP the provider gives the exit's username.
func (r *gatewayRouter) Route(w int, q Request) error {
	lease, err := r.p.PickAt(context.Background(), r.env.Clock.Now(), pool.Request{Origin: r.origins[q.Origin], FailFast: true})
	if err != nil {
		return err
	}
	line := r.line[lease.Exit().Label()]
	ip := r.prov.IP(lease.Exit().ProxyURL().User.Username(), r.env.Clock.Now())
	res, ok := r.env.Send(w, ip, q)
	if !ok {
		lease.Release()
		return nil
	}
	now := r.env.Clock.Now()
	lease.ReportAt(now, judgePage(&lease, res, now, Verdict(res, now)))
	r.rec.note(line, q.Origin, res, now.Add(-res.Latency), now)
	return nil
}

// lineRecovery is the recovery measure of the gateway world: the sticky IP behind a line changes
// (the provider recycles it, the pool rotates it), so a ban is an IP's for a while but the user
// meets it through a line. It is taken per (line, origin): from the first ban answer the line got
// from the origin (a challenge page, a ban's 403 or a 200 block page) to the line's next page
// from that origin. Bans met less than RecoveryHorizon before the end of the run are not
// measured; those met earlier and never followed by a page count as unrecovered (Metrics).
type lineRecovery struct {
	env     *Env
	m       *Metrics
	no      int
	met     map[int]time.Time // by line*no+origin: when its open episode began
	horizon time.Time
}

func newLineRecovery(env *Env) *lineRecovery {
	return &lineRecovery{env: env, m: env.ownRecovery(), no: len(env.Scenario.Origins), met: map[int]time.Time{},
		horizon: Epoch.Add(env.Scenario.Duration - RecoveryHorizon)}
}

// note takes line's attempt for origin o, sent at sent, answered res at now.
func (l *lineRecovery) note(line, o int, res Result, sent, now time.Time) {
	k := line*l.no + o
	switch res.Answer {
	case Challenge, Banned403, SoftBlock:
		if _, open := l.met[k]; !open && sent.Before(l.horizon) {
			l.met[k] = sent
		}
	case OK:
		if from, open := l.met[k]; open {
			l.m.Recovery = append(l.m.Recovery, now.Sub(from))
			delete(l.met, k)
		}
	}
}

// finish counts the episodes no page followed.
func (l *lineRecovery) finish() { l.m.Unrecovered += len(l.met) }
