package pool

import (
	"cmp"
	"slices"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Rotation: a gateway replaces a session instead of waiting for it (gateway.go). A replacement is
// an exit-set change like Add's — a new exit with a new id takes the old one's place, the old one
// is forgotten (its pair breakers dropped at the next sweep, never restored) and observers hear
// ExitRemoved for it, so a transport closes its connections — made on the report that judged the
// session, or on the pick that finds a session past its TTL, with no lock held on either path.

// RotationReason says why a gateway replaced a session.
type RotationReason uint8

// The reasons.
const (
	// RotationBlocked: an origin banned the session's IP (a block, or a plain 403 judged a ban).
	RotationBlocked RotationReason = iota
	// RotationConnection: the session's own connection failures tripped its breaker.
	RotationConnection
	// RotationTTL: the session reached the gateway's session-ttl.
	RotationTTL
	// RotationEgress: the gateway assigned the session an egress IP known banned by the origin
	// (gateway_egress.go).
	RotationEgress
	rotationReasons
)

var rotationNames = [rotationReasons]string{"blocked", "connection", "ttl", "egress"}

// String returns "blocked", "connection", "ttl" or "egress".
func (r RotationReason) String() string {
	if r < rotationReasons {
		return rotationNames[r]
	}
	return "unknown"
}

// SessionRotation is one session a gateway replaced. It names sessions by label, never by their
// minted ids.
type SessionRotation struct {
	Gateway  string // the gateway's label
	Old, New *Exit  // the retired session and its replacement
	Reason   RotationReason
	Origin   string // the origin that banned it (RotationBlocked); else empty
	At       time.Time
	// Followers is how many caller sessions (Request.Session, per origin) were pinned to Old and
	// now follow New: their next leases say SessionMoved.
	Followers int
}

// SessionObserver is implemented by observers that want to hear of session rotations. An
// Observer given to the pool that also implements it is called after each rotation, with no lock
// held, possibly concurrently; it must be quick.
type SessionObserver interface {
	SessionRotated(r SessionRotation)
}

// sessionReported is the report path's look at a verdict on a live session of a rotating
// gateway (Lease.ReportAt): a ban rotates it, and so does a trip of its own breaker on connection
// failures.
func (p *Pool) sessionReported(now time.Time, t *ticket, v Verdict, pairAfter breaker.State) {
	s := p.gateways.session(t.id)
	if s == nil || s.done.Load() {
		return
	}
	s.g.egress.heard(now, s, t.origin.key, v, false) // its egress IP's health for the origin (gateway_egress.go)
	switch {
	case v.Outcome == Success:
		if !s.served.Load() {
			s.served.Store(true)
		}
		s.bans.servedBy(t.origin.key)
		p.restServed(now, s.g, t.origin) // a site's run of banned fresh sessions ends (gateway_rest.go)
	case v.Class == ClassBlocked && pairAfter != breaker.Closed:
		// A site that bans every fresh session rests (gateway_rest.go).
		p.restBanned(now, s, t.origin, !s.bans.knows(t.origin.key))
		if s.rotateOnBan(t.origin) { // else the ban is held: the pair stays OPEN (gateway_hold.go)
			p.rotateSession(now, s, RotationBlocked, t.origin.key)
		}
	case v.Outcome == Transient && v.ConnLevel && v.Scope == ScopePair:
		if pm, ok := s.own.ClosedPermit(); ok {
			pm.Failure(now, breaker.Failure{Reason: string(v.Class)})
		}
		if s.own.State(now) != breaker.Closed {
			p.rotateSession(now, s, RotationConnection, "")
		}
	}
}

// rotateSession retires s and puts a freshly minted session in its place, at now. A session
// already retired is left alone: a second ban on it counts nothing.
func (p *Pool) rotateSession(now time.Time, s *gwSession, why RotationReason, origin string) {
	g := s.g
	p.mu.Lock()
	old := p.set.Load()
	es := old.byID[s.id]
	if s.done.Load() || p.gateways.byLabel[g.exit.label] != g || es == nil {
		p.mu.Unlock()
		return
	}
	ns := g.mint(&p.gateways, p, s.slot, now)
	all := slices.Clone(old.all)
	all[slices.Index(all, es)] = p.newSessionState(ns.exit, es.tune)
	p.restMoved(g, s.id, ns.id) // held where its gateway rests, before a pick can see it (gateway_rest.go)
	p.set.Store(p.buildSet(all))
	s.done.Store(true)
	p.retire([]*exitState{es}, false)
	p.indexSessions()
	followers := p.sessions.follow(s.id, ns.id)
	p.mu.Unlock()

	g.rotations[why].Add(1)
	if why == RotationConnection && !s.served.Load() {
		// A gateway whose fresh sessions fail at the connection before serving anything is itself
		// failing: its breaker counts each such loss, and parks every session once they add up. A
		// session that served and then failed lost its own IP (a flaky or recycled address, 10 %
		// of a provider's pool in the gateway world): counting those parked all 20 sessions for
		// 31–82 min of each simulated 3 h (docs/decisions.md, the gateway world).
		if pm, ok := g.wide.ClosedPermit(); ok {
			pm.Failure(now, breaker.Failure{Reason: "session_" + why.String()})
		}
	}
	p.tellRemoved([]*exitState{es})
	r := SessionRotation{Gateway: g.exit.label, Old: s.exit, New: ns.exit, Reason: why, Origin: origin, At: now, Followers: followers}
	for _, e := range p.obs.load() {
		if so, ok := e.o.(SessionObserver); ok {
			so.SessionRotated(r)
		}
	}
}

// maybeExpireSessions retires the sessions past their gateway's TTL at now, and replaces them. A
// pool without sessions due reads one atomic.
// expiryDue reports whether a session may be past its TTL at (Unix ns): the pick asks, inlined,
// before it calls maybeExpireSessions.
func (t *gatewayTable) expiryDue(at int64) bool { return at >= t.due.Load() }

func (p *Pool) maybeExpireSessions(now time.Time) {
	t := &p.gateways
	if !t.expiryDue(now.UnixNano()) || !t.expiring.CompareAndSwap(false, true) {
		return
	}
	defer t.expiring.Store(false)
	var due []*gwSession
	for _, s := range *t.byID.Load() {
		if ttl := s.g.spec.ttl; ttl > 0 && !now.Before(s.born.Add(ttl)) {
			due = append(due, s)
		}
	}
	// In a fixed order, so a seeded pool mints the same ids on every run.
	slices.SortFunc(due, func(a, b *gwSession) int {
		return cmp.Or(cmp.Compare(a.g.exit.label, b.g.exit.label), cmp.Compare(a.n, b.n))
	})
	for _, s := range due {
		p.rotateSession(now, s, RotationTTL, "")
	}
}
