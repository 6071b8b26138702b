package pool

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Gateways. A provider's gateway is one host:port whose IP is chosen by a session id in the
// username (gateway_template.go). An exit whose credentials hold {session} is such a gateway's
// template: when it joins a pool (New, Add, Sync) the pool makes a gateway of it, mints
// sessions=N session ids and adds one ordinary exit per session, which the engine picks, judges
// and reports like any other. The gateway owns them:
//
//   - every session's own exit breaker is the gateway's: a 407, a refused connection, a gateway
//     name that does not resolve — exit-scoped verdicts — park every session at once, and one
//     probe finds the gateway back;
//   - with rotate=on (the default) a session whose own connection failures trip its own breaker,
//     or whose bans tip it over (RotateBans origins ban it, more origins ban it than serve it, or
//     the origin bans most of the gateway's sessions; gateway_hold.go — else the ban is held on
//     its pair, as a static line's), is retired and replaced at once by a freshly minted session
//     — a new IP — instead of waiting out a cooldown (gateway_rotate.go); its breakers are
//     forgotten. With rotate=off its connection failures rest it alone (gateway_kept.go). Sessions lost to connection
//     failures before they ever served count as failures of the gateway's breaker, so a gateway
//     that fails every fresh session is parked instead of churning, while a session that served
//     and then lost its IP (a flaky or recycled address) costs only itself;
//   - a session older than session-ttl is retired and replaced on the pool's clock, before the
//     provider recycles its IP;
//   - caller sessions (Request.Session) pinned to a replaced session follow it to its replacement
//     (LeaseInfo.SessionMoved, SessionObserver), or fail with a *SessionLostError under
//     WithStrictSessions.
//
// Labels never hold a minted id: a session is labelled by its gateway's label and a number,
// "gw#7", the numbers never reused, so no store or status page can hand a retired session's state
// to its replacement. Minted ids are drawn from crypto/rand, unguessable; a pool made WithSeed
// draws them from its seeded source instead, so that a simulation replays the same ids — such
// ids are as guessable as the seed.

// Rotating gateways (rotate=request on a line without {session}: a new IP per request) are
// plain exits with a block rate per origin instead (gateway_blockrate.go); egress IPs a gateway
// reports (egress-header=) get health per (egress IP, origin) under it (gateway_egress.go).

// gatewayMark marks a session exit: its session, and the label WithLabel("") restores.
type gatewayMark struct {
	s     *gwSession
	label string
}

// gateway is one gateway in a pool.
type gateway struct {
	exit       *Exit // the template as given; its label is the gateway's
	spec       gatewaySpec
	user, pass string // the credential templates
	passSet    bool

	// wide is the gateway's breaker, the exit breaker of every session; mute silences it once
	// the gateway has left the pool; closedEpoch as for an exit's (exitPermit).
	wide        *breaker.Breaker
	mute        *atomic.Bool
	closedEpoch *atomic.Uint32
	tune        *exitTuning

	// mu guards slots, gen and open. The breaker's Mirror hook takes it (under the breaker's
	// lock): never call the breaker while holding it.
	mu    sync.Mutex
	slots []*gwSession
	gen   int  // sessions minted: the number of the last label
	open  bool // wide is out of CLOSED: every session's bit in Pool.exitOpen says so

	rotations [rotationReasons]atomic.Uint64
	egress    egressBans // egress IPs banned per origin (gateway_egress.go)
	rests     siteRests  // sites that ban every fresh session, resting (gateway_rest.go)
}

// gwSession is one live (or retired) session of a gateway.
type gwSession struct {
	g    *gateway
	slot int
	n    int // its label's number
	id   uint32
	exit *Exit
	born time.Time
	own  *breaker.Breaker // its own connection failures
	done atomic.Bool      // retired
	// ownOpen: own is out of CLOSED (rotate=off: the session rests, gateway_kept.go).
	ownOpen atomic.Bool
	// served: an attempt through it succeeded. Only a session lost to connection failures before
	// it ever served counts against the gateway (gateway_rotate.go).
	served atomic.Bool
	bans   sessionBans // what origins answered it (gateway_hold.go)
}

// gatewayTable is the pool's gateways.
type gatewayTable struct {
	// live: per exit id, a live session of a gateway that rotates (the report path reads it).
	live bitTable
	// byID maps the exit id of every live session to it; replaced whole under Pool.mu.
	byID atomic.Pointer[map[uint32]*gwSession]
	// byLabel holds the gateways by label, under Pool.mu.
	byLabel map[string]*gateway
	// due is the soonest instant (UnixNano) a live session reaches its TTL; MaxInt64: none.
	due      atomic.Int64
	expiring atomic.Bool
	// next draws the randomness minted ids are made of.
	next func() uint64
}

func (t *gatewayTable) init(seeded bool, r func() uint64) {
	t.byLabel = make(map[string]*gateway)
	t.due.Store(math.MaxInt64)
	t.next = cryptoUint64
	if seeded {
		t.next = r
	}
	t.byID.Store(&map[uint32]*gwSession{})
}

func cryptoUint64() uint64 {
	var b [8]byte
	rand.Read(b[:]) // never fails (crypto/rand, Go 1.24)
	return binary.LittleEndian.Uint64(b[:])
}

// session returns the live session with exit id, or nil.
func (t *gatewayTable) session(id uint32) *gwSession { return (*t.byID.Load())[id] }

// mintID returns a fresh session id of spec's length and alphabet, each character drawn without
// bias (rejection sampling).
func (t *gatewayTable) mintID(spec *gatewaySpec) string {
	n := uint64(len(spec.alphabet))
	limit := math.MaxUint64 - math.MaxUint64%n
	b := make([]byte, spec.idLen)
	for i := range b {
		r := t.next()
		for r >= limit {
			r = t.next()
		}
		b[i] = spec.alphabet[r%n]
	}
	return string(b)
}

// newGateway makes the gateway of template e, not yet in the pool. The caller holds p.mu.
func (p *Pool) newGateway(e *Exit) (*gateway, error) {
	spec, err := parseGatewaySpec(e)
	if err != nil {
		return nil, fmt.Errorf("pool: gateway %s: %w", e.label, err)
	}
	tunes, err := p.tuneExits([]*Exit{e})
	if err != nil {
		return nil, err
	}
	g := &gateway{exit: e, spec: spec, user: e.u.User.Username(), tune: tunes[0]}
	g.pass, g.passSet = e.u.User.Password()
	g.wide, g.mute, g.closedEpoch = p.newGatewayBreaker(g)
	return g, nil
}

// newGatewayBreaker returns the gateway's breaker: its transitions are reported as the gateway's
// (ScopeExit, the template exit), and its Mirror hook keeps the exitOpen bit of every session.
func (p *Pool) newGatewayBreaker(g *gateway) (*breaker.Breaker, *atomic.Bool, *atomic.Uint32) {
	mute, closedEpoch := new(atomic.Bool), new(atomic.Uint32)
	b := p.exitPolicy(g.tune).NewBreakerWith(breaker.Hooks{
		OnStateChange: func(t breaker.Transition) {
			if !mute.Load() {
				p.obs.stateChanged(StateChange{Scope: ScopeExit, Exit: g.exit, Transition: t})
			}
		},
		Mirror: func(notClosed bool) {
			if !notClosed {
				closedEpoch.Store(p.nextExitEpoch())
			}
			g.mu.Lock()
			g.open = notClosed
			for _, s := range g.slots {
				if s != nil {
					p.exitOpen.set(s.id, notClosed || s.ownOpen.Load())
				}
			}
			g.mu.Unlock()
		},
	})
	return b, mute, closedEpoch
}

// mint returns a new session of g for slot, born now: a fresh id in its dialing URL, the next
// label. The caller holds p.mu.
func (g *gateway) mint(t *gatewayTable, p *Pool, slot int, now time.Time) *gwSession {
	id := t.mintID(&g.spec)
	user, _ := fillTemplate(g.user, g.exit, id) // checked by parseGatewaySpec
	u := *g.exit.u
	if g.passSet {
		pass, _ := fillTemplate(g.pass, g.exit, id)
		u.User = url.UserPassword(user, pass)
	} else {
		u.User = url.User(user)
	}
	g.mu.Lock()
	g.gen++
	n := g.gen
	g.mu.Unlock()
	s := &gwSession{g: g, slot: slot, n: n, born: now}
	label := g.exit.label + "#" + strconv.Itoa(n)
	c := *g.exit
	c.u, c.label, c.gw = &u, label, &gatewayMark{s: s, label: label}
	s.exit = &c
	s.own = p.newOwnBreaker(g, s)
	return s
}

// newSessionState is newExitState for a session exit: its exit breaker is its gateway's. The
// caller holds p.mu.
func (p *Pool) newSessionState(e *Exit, t *exitTuning) *exitState {
	s := e.gw.s
	g := s.g
	es := p.mintState(e, t)
	es.wide, es.wideMute, es.closedEpoch = g.wide, g.mute, g.closedEpoch
	es.quiet, es.priced, es.kept = quietBreaker(g.wide), p.CostOf(e) != Cost{}, !g.spec.rotate
	s.id = es.id
	g.mu.Lock()
	g.slots[s.slot] = s
	p.exitOpen.set(es.id, g.open)
	g.mu.Unlock()
	return es
}

// expandGateways returns exits with every gateway template replaced by its sessions' exits: the
// live ones of the same gateway already in the pool when reuse is set (Sync) and the template is
// unchanged, else those of a new gateway, minted now (made). The caller holds p.mu, and adopts
// made once the exits are in the set.
func (p *Pool) expandGateways(exits []*Exit, taken map[string]*exitState, reuse bool) (out []*Exit, made, kept []*gateway, err error) {
	if !slices.ContainsFunc(exits, func(e *Exit) bool { return e != nil && isTemplate(e) }) {
		return exits, nil, nil, nil
	}
	now := p.clock.Now()
	seen := make(map[string]bool)
	var errs []error
	for _, e := range exits {
		if e == nil || !isTemplate(e) {
			out = append(out, e)
			continue
		}
		cur := p.gateways.byLabel[e.label]
		switch {
		case seen[e.label] || taken[e.label] != nil || (cur != nil && !reuse):
			errs = append(errs, fmt.Errorf("pool: duplicate exit label %q", e.label))
			continue
		case cur != nil && sameGateway(cur.exit, e):
			seen[e.label] = true
			kept = append(kept, cur)
			for _, s := range cur.slots {
				out = append(out, s.exit)
			}
			continue
		}
		seen[e.label] = true
		g, err := p.newGateway(e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		g.slots = make([]*gwSession, g.spec.sessions)
		for i := range g.spec.sessions {
			out = append(out, g.mint(&p.gateways, p, i, now).exit)
		}
		made = append(made, g)
	}
	return out, made, kept, errors.Join(errs...)
}

// sameGateway reports whether two templates make the same gateway: the same proxy and the same
// tier, weight, settings and attributes.
func sameGateway(a, b *Exit) bool {
	return sameProxy(a, b) && a.tier == b.tier && a.weight == b.weight && sameOverride(a.over, b.over) && sameAttrs(a, b)
}

// settleGateways makes the pool's gateways made and kept, after the exit set holds their
// sessions: the others leave, their sessions forgotten for good (a gateway's session never comes
// back). The caller holds p.mu.
func (p *Pool) settleGateways(made, kept []*gateway, sync bool) {
	if len(made) == 0 && !sync {
		return
	}
	stay := make(map[*gateway]bool, len(made)+len(kept))
	for _, g := range kept {
		stay[g] = true
	}
	if sync {
		for label, g := range p.gateways.byLabel {
			if !stay[g] {
				p.dropGateway(label, g)
			}
		}
	}
	for _, g := range made {
		p.gateways.byLabel[g.exit.label] = g
	}
	p.indexSessions()
}

// dropGateway takes gateway g out of the table and forgets its sessions, which have left the exit
// set. The caller holds p.mu.
func (p *Pool) dropGateway(label string, g *gateway) {
	delete(p.gateways.byLabel, label)
	g.mute.Store(true)
	for _, s := range g.slots {
		s.done.Store(true)
		if r, ok := p.retired[s.exit.label]; ok {
			r.es.life.Store(lifeForgotten)
			p.forgotten.set(r.es.id, true)
			delete(p.retired, s.exit.label)
		}
	}
}

// gatewayLabels replaces each gateway label in labels by its sessions' labels, for Remove, and
// returns the gateways named. A session's own label is an error: a gateway keeps its sessions,
// and leaves whole. The caller holds p.mu.
func (p *Pool) gatewayLabels(labels []string, set *exitSet) (out []string, named []*gateway, err error) {
	if len(p.gateways.byLabel) == 0 {
		return labels, nil, nil
	}
	for _, l := range labels {
		if es := set.byLabel[l]; es != nil && es.exit.gw != nil {
			return nil, nil, fmt.Errorf("pool: exit %q is a session of gateway %q: remove the gateway", l, es.exit.gw.s.g.exit.label)
		}
		g := p.gateways.byLabel[l]
		if g == nil {
			out = append(out, l)
			continue
		}
		named = append(named, g)
		for _, s := range g.slots {
			out = append(out, s.exit.label)
		}
	}
	return out, named, nil
}

// dropGateways drops the gateways Remove named, once their sessions are out. The caller holds p.mu.
func (p *Pool) dropGateways(named []*gateway) {
	if len(named) == 0 {
		return
	}
	for _, g := range named {
		p.dropGateway(g.exit.label, g)
	}
	p.indexSessions()
}

// indexSessions rebuilds the table's index of live sessions and its soonest TTL. The caller
// holds p.mu.
func (p *Pool) indexSessions() {
	t := &p.gateways
	old := *t.byID.Load()
	m := make(map[uint32]*gwSession, len(old))
	due := int64(math.MaxInt64)
	for _, g := range t.byLabel {
		for _, s := range g.slots {
			m[s.id] = s
			if g.spec.ttl > 0 {
				due = min(due, s.born.Add(g.spec.ttl).UnixNano())
			}
		}
	}
	for id := range old {
		if m[id] == nil {
			t.live.set(id, false)
		}
	}
	for id, s := range m {
		t.live.set(id, s.g.spec.rotate)
	}
	t.byID.Store(&m)
	t.due.Store(due)
}
