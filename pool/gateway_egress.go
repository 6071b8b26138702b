package pool

import (
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// Egress IPs. Some providers report the IP a gateway assigned to a session, in a response header
// of their choosing; a template line names it with egress-header=NAME (e.g.
// egress-header=X-Egress-IP). The transport reads it — for HTTPS from the CONNECT reply, before
// any byte reaches the origin; for plain HTTP from the origin's response, after the request
// reached the origin — and hands it to the lease (Lease.SetEgress). The gateway then keeps, per
// (egress IP, origin), whether the IP is banned there: a block through a session marks its IP
// banned for the origin for EgressBanFor (or until a request through it is served), and a session
// assigned such an IP is retired and replaced at once (RotationEgress) instead of being used for
// that origin: over HTTPS the attempt is abandoned before its request is sent and re-dialled
// through the replacement, at most MaxEgressRedials times per request (then an
// *EgressBannedError). Egress IPs are no credentials: they may appear in errors and snapshots;
// session ids never do. Gateways with rotate=on (the default) keep egress health, and so do
// rotating gateways (rotate=request on a line without {session}): there the IP is the attempt's,
// not a session's — every connection gets a new one — so an attempt handed a banned IP is
// abandoned and re-dialled through the same gateway (a new CONNECT: a new IP), and a block bans
// the IP its attempt was given. A rotate=off template ignores egress-header=, and a line that is
// neither a template nor rotating refuses it (checkEgressLine).

// Egress settings.
const (
	// EgressBanFor is how long an egress IP stays banned for an origin after a block through it,
	// unless a request through it is served first.
	EgressBanFor = 30 * time.Minute
	// MaxEgressRedials is how many times one request is re-dialled through a fresh session when
	// the gateway assigned an IP banned by the target, before it fails with *EgressBannedError.
	MaxEgressRedials = 3
	// maxEgressBans bounds the (IP, origin) bans one gateway keeps; past it, ended ones are swept
	// and then the soonest to end dropped.
	maxEgressBans = 1 << 16
)

// ErrEgressBanned is matched (errors.Is) by the *EgressBannedError a request fails with when
// its gateway kept assigning IPs its target had banned.
var ErrEgressBanned = fmt.Errorf("pool: the gateway's egress IPs are banned for the origin")

// EgressBannedError says that a gateway assigned, MaxEgressRedials+1 times in a row, an egress IP
// the origin had banned. It names the gateway by label and the last IP, never a session.
type EgressBannedError struct {
	Gateway, Origin string
	IP              netip.Addr
	Tries           int
}

// Error says which gateway's IPs are banned for which origin.
func (e *EgressBannedError) Error() string {
	return fmt.Sprintf("pool: gateway %s: its egress IPs are banned for %s (%d assignments, the last %s)", e.Gateway, e.Origin, e.Tries, e.IP)
}

// Is makes errors.Is(err, ErrEgressBanned) true.
func (e *EgressBannedError) Is(target error) bool { return target == ErrEgressBanned }

// egressKey is one (egress IP, origin).
type egressKey struct {
	ip     netip.Addr
	origin string
}

// egressBans is a gateway's egress IPs: each live session's (or, for a rotating gateway, each
// attempt in flight's: the key is its *Lease), and the bans per origin.
type egressBans struct {
	mu   sync.Mutex
	of   map[any]netip.Addr      // the IP each session (attempt) was last seen with
	bans map[egressKey]time.Time // until when
	// ofCap: once of holds this many, retired sessions are dropped from it (amortised: the
	// next check is at twice the sessions kept).
	ofCap int
}

// set records that s (a *gwSession, or a rotating gateway's *Lease) leaves from ip, and reports
// whether ip is banned for origin at now.
func (b *egressBans) set(now time.Time, s any, ip netip.Addr, origin string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.of == nil {
		b.of, b.bans = make(map[any]netip.Addr), make(map[egressKey]time.Time)
	}
	if _, known := b.of[s]; !known && len(b.of) >= b.ofCap {
		b.dropRetired()
		b.ofCap = max(16, 2*len(b.of))
	}
	if b.of[s] != ip {
		b.of[s] = ip
	}
	k := egressKey{ip, origin}
	until, ok := b.bans[k]
	if ok && !now.Before(until) {
		delete(b.bans, k)
		return false
	}
	return ok
}

// heard applies verdict v on a request of s for origin to s's egress IP, if it is known. With
// forget (a rotating gateway's lease, whose IP was its attempt's alone) s's IP is forgotten.
func (b *egressBans) heard(now time.Time, s any, origin string, v Verdict, forget bool) {
	blocked := v.Outcome == Transient && v.Class == ClassBlocked
	if !blocked && v.Outcome != Success && !forget {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ip, ok := b.of[s]
	if !ok {
		return
	}
	if forget {
		delete(b.of, s)
		if !blocked && v.Outcome != Success {
			return
		}
	}
	k := egressKey{ip, origin}
	if !blocked {
		delete(b.bans, k)
		return
	}
	if _, had := b.bans[k]; !had && len(b.bans) >= maxEgressBans {
		b.sweep(now)
	}
	b.bans[k] = now.Add(EgressBanFor)
}

// dropRetired forgets the IPs of retired sessions, and those of a rotating gateway's leases (the
// leases in flight lose theirs: their verdicts then judge no IP). b.mu is held.
func (b *egressBans) dropRetired() {
	for k := range b.of {
		if s, ok := k.(*gwSession); !ok || s.done.Load() {
			delete(b.of, k)
		}
	}
}

// sweep drops the bans that ended by now and, when none had, the one ending soonest. b.mu is held.
func (b *egressBans) sweep(now time.Time) {
	var soonest egressKey
	var at time.Time
	n := len(b.bans)
	for k, until := range b.bans {
		if !now.Before(until) {
			delete(b.bans, k)
		} else if at.IsZero() || until.Before(at) {
			soonest, at = k, until
		}
	}
	if len(b.bans) == n && !at.IsZero() {
		delete(b.bans, soonest)
	}
}

// banned returns how many (IP, origin) bans g keeps in force at now.
func (b *egressBans) banned(now time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, until := range b.bans {
		if now.Before(until) {
			n++
		}
	}
	return n
}

// SetEgress tells the lease the egress IP its gateway reported for the attempt (its session's
// IP), before it is reported: the verdict then counts for (ip, origin) under the gateway too. It
// reports whether ip is banned for the lease's origin; if it is, the session was retired and
// replaced (RotationEgress), and the caller should abandon the attempt — Release the lease — and
// pick again. A rotating gateway's lease (rotate=request) reports whether ip is banned for the
// origin, and its verdict then judges ip. Leases of other exits ignore it and report false.
func (l *Lease) SetEgress(ip netip.Addr) bool {
	if l.p == nil || !ip.IsValid() {
		return false
	}
	if b := l.t.exit.blocks; b != nil { // a rotating gateway (gateway_blockrate.go): the IP is this attempt's
		return b.egress.set(l.p.clock.Now(), l, ip.Unmap(), l.t.origin.key)
	}
	if !l.p.gateways.live.get(l.t.id) { // reads only what the pick set: safe from a dialing goroutine
		return false
	}
	s := l.p.gateways.session(l.t.id)
	if s == nil || s.done.Load() {
		return false
	}
	now := l.p.clock.Now()
	if !s.g.egress.set(now, s, ip.Unmap(), l.t.origin.key) {
		return false
	}
	l.p.rotateSession(now, s, RotationEgress, l.t.origin.key)
	return true
}

// rotatingEgressDone applies the verdict of a rotating gateway's lease to the egress IP its
// attempt was given, if any, and forgets the lease's IP (released: no verdict). Other leases do
// nothing but a nil check.
func (l *Lease) rotatingEgressDone(now time.Time, v Verdict) {
	if b := l.t.exit.blocks; b != nil && b.egressOn {
		b.egress.heard(now, l, l.t.origin.key, v, true)
	}
}

// checkEgressLine refuses egress-header= on a line that can use no egress IP: one that is neither
// a session template nor a rotating gateway.
func checkEgressLine(e *Exit) error {
	if _, ok := e.Attr("egress-header"); ok && !isTemplate(e) && !isRotating(e) {
		return fmt.Errorf("egress-header: only a session template ({session}) or a rotating gateway (rotate=request) reports an egress IP")
	}
	return nil
}
