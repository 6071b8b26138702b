package pool

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Rotating gateways. A provider's gateway whose username names no session gives every request a
// new IP. Such a proxy-list line says so with rotate=request:
//
//	http://acct-country-us:secret@gate.example:7777  rotate=request
//
// It is one exit to the engine, but its pair breakers would learn nothing from a single block:
// the next request through it leaves from another IP. So a block through it — a challenge or block
// page, a plain 403 judged a ban, a 429 — fails the attempt (a transport retries it elsewhere) and
// leaves its pair breaker alone; it is counted instead in a block rate per (gateway, origin), a
// window that decays with a half-life of BlockRateHalfLife. Once more than BlockRateShare of the
// gateway's recent answers from one origin are blocks, over at least BlockRateMinAnswers of them,
// the gateway is burned there: the block trips its pair breaker for that origin, which backs off
// (OPEN, the pair's cooldown growing on each relapse) and comes back through one probe at a time
// (HALF_OPEN), while the gateway keeps serving every other origin. The rate starts afresh on each
// trip. A block on a probe re-opens the pair at once, as on any pair. Other failures (timeouts,
// resets) count on the pair as they do for any exit.

// Block-rate settings of a rotating gateway.
const (
	// BlockRateHalfLife is how fast the block rate forgets: an answer counts half after this long.
	BlockRateHalfLife = time.Minute
	// BlockRateShare is the share of blocks among the recent answers that burns the gateway for
	// the origin: more than this.
	BlockRateShare = 0.5
	// BlockRateMinAnswers is how many recent answers (decayed) the rate needs before it judges.
	BlockRateMinAnswers = 10
	// maxBlockRateOrigins bounds the origins one gateway keeps a rate for; past it, rates that
	// have decayed to nearly nothing are dropped.
	maxBlockRateOrigins = 4096
)

// rotatingAttr is the rotate= value of a rotating gateway's line.
const rotatingAttr = "request"

// isRotating reports whether e is a rotating gateway: rotate=request on a line without {session}.
func isRotating(e *Exit) bool {
	v, ok := e.Attr("rotate")
	return ok && v == rotatingAttr && e.gw == nil && !isTemplate(e)
}

// Rotating reports whether e is a rotating gateway: rotate=request on a line without {session},
// a proxy that gives every new connection a new IP. Package transport keeps no connection of such
// an exit alive (no keep-alive, no HTTP/2), so that every request, and every retry, opens a new
// one — over HTTPS a new CONNECT — and leaves from a new IP.
func (e *Exit) Rotating() bool { return isRotating(e) }

// checkRotating checks the rotate= attribute of a line without {session}: request, or none.
func checkRotating(e *Exit) error {
	if v, ok := e.Attr("rotate"); ok && v != rotatingAttr {
		return fmt.Errorf("rotate %q: a line without {session} takes rotate=request (a new IP per request) or no rotate", v)
	}
	return checkEgressLine(e) // gateway_egress.go
}

// blockRates is a rotating gateway's block rate per origin; nil for every other exit.
type blockRates struct {
	mu sync.Mutex
	m  map[string]*blockRate
	// egress: the egress IPs its attempts were given and the bans per (IP, origin), when the line
	// names egress-header= (gateway_egress.go).
	egress   egressBans
	egressOn bool
}

// blockRate is one origin's decayed counts of answers and blocks, as of at.
type blockRate struct {
	answers, blocks float64
	at              time.Time
}

// newBlockRates returns the block rates of e when it is a rotating gateway, else nil.
func newBlockRates(e *Exit) *blockRates {
	if !isRotating(e) {
		return nil
	}
	_, egressOn := e.Attr("egress-header")
	return &blockRates{m: make(map[string]*blockRate), egressOn: egressOn}
}

// decay brings r's counts to now.
func (r *blockRate) decay(now time.Time) {
	if dt := now.Sub(r.at); dt > 0 {
		f := math.Exp2(-float64(dt) / float64(BlockRateHalfLife))
		r.answers *= f
		r.blocks *= f
	}
	r.at = now
}

// rate returns origin's rate, made if missing. b.mu is held.
func (b *blockRates) rate(now time.Time, origin string) *blockRate {
	r := b.m[origin]
	if r == nil {
		if len(b.m) >= maxBlockRateOrigins {
			b.prune(now)
		}
		r = &blockRate{at: now}
		b.m[origin] = r
	}
	return r
}

// prune drops the rates that have decayed below one answer. b.mu is held.
func (b *blockRates) prune(now time.Time) {
	for k, r := range b.m {
		if r.decay(now); r.answers < 1 {
			delete(b.m, k)
		}
	}
}

// served counts an answer from origin that was no block. A nil b does nothing.
func (b *blockRates) served(now time.Time, origin string) {
	if b == nil {
		return
	}
	b.mu.Lock()
	r := b.rate(now, origin)
	r.decay(now)
	r.answers++
	b.mu.Unlock()
}

// isBlock reports whether v is an answer that says "not this IP": a block (a challenge page, a
// plain 403 judged a ban) or a 429.
func isBlock(v Verdict) bool {
	return v.Outcome == Transient && (v.Class == ClassBlocked || v.Class == ClassRateLimited)
}

// absorbs is the report path's look at a pair-scoped failure v through t's exit: for a rotating
// gateway's block it counts the block and reports true while the gateway is not burned for the
// origin (the pair is left alone); once it is — or when the attempt was the pair's probe — it
// sets f decisive and reports false, so that the block trips the pair. Any other verdict, and
// every exit but a rotating gateway, reports false.
func (b *blockRates) absorbs(now time.Time, t *ticket, v Verdict, f *breaker.Failure) bool {
	if b == nil || !isBlock(v) {
		return false
	}
	b.mu.Lock()
	r := b.rate(now, t.origin.key)
	r.decay(now)
	r.answers++
	r.blocks++
	burned := t.pairPm.Probe() || (r.answers >= BlockRateMinAnswers && r.blocks > BlockRateShare*r.answers)
	if burned {
		r.answers, r.blocks = 0, 0 // the backoff takes over; the rate starts afresh after it
	}
	b.mu.Unlock()
	if burned {
		f.Decisive = true
	}
	return !burned
}
