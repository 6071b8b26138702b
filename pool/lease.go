package pool

import (
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
)

// Request says what a pick is for. Only Origin is required.
type Request struct {
	// Origin is the key of the origin the request is for: a host, a registrable domain, any
	// string the caller groups requests by. Breakers judge each (exit, Origin) pair.
	Origin string
	// Session, when set, sticks the request to one exit per origin: the first pick of the session
	// for an origin picks as usual, later ones reuse that exit until its breaker for the origin (or
	// its own) leaves CLOSED, when the session moves to another exit. For logins and carts that
	// must keep one IP.
	Session string
	// Exit, when set, pins the pick to the exit with that label and no other: if its breakers or
	// buckets do not admit the request, Pick fails (or waits for the exit's token) rather than
	// picking another. It takes the exit's permits by the same path as any pick, so a reheat loop
	// that probes through it never holds a probe slot twice.
	Exit string
	// Retries, when set, is the memory of one logical request: the pick passes over the exits that
	// failed it while another is ready, and a failure reported on the lease is added to it.
	Retries *Retries
	// FailFast, when set, makes a pick that finds only exits waiting for a token (a configured
	// limit, or a pace the pair learned) fail at once with a *ThrottledError saying how long the
	// wait would be, instead of waiting: for a crawler whose queue holds other origins' URLs, which
	// would rather send one of those. ratelimit.Limits.FailFast does the same for every pick, and
	// a pool without WithRateLimits always fails fast (its only buckets are learned paces).
	FailFast bool
	// Want, when set, is what the exit must have (attributes, want.go): the pick chooses among the
	// exits that match, by every rule it applies among all. A pick whose Want no exit of the pool
	// matches fails with a *NoMatchingExitError; one whose matching exits are all cooling, with a
	// *NoHealthyExitError as without a Want. Build Wants once and reuse them: a pick with a Want
	// costs what one without does (0 allocations), the pool's index for it built once.
	Want *Want
}

// Lease is one admitted attempt: the exit to send it through and the permits it holds. Give it
// exactly one Report (or Release, if nothing was sent): until then it holds the exit's place in
// the pool — a probe slot, its count of leases out. A Lease is a value meant to be used by one
// goroutine: do not copy it after the first use. The zero Lease ignores every call.
type Lease struct {
	p      *Pool
	t      ticket
	done   bool
	judged bool              // JudgeAt judged the verdict: the report does not judge it again
	move   SessionMoveReason // why the request's Session moved to another exit (LeaseInfo.SessionMove)
	path   uint16            // PathOf the attempt's request path (SetPath); 0: unknown
	// groupProbe: the lease holds its exit's group's probe slot for the origin (grouphold.go).
	groupProbe bool
}

// SetPath tells the lease which path its attempt asks for (PathOf of it is kept, no allocation),
// before it is judged or reported: a plain 403 for a path the origin served this exit, or two
// other exits, moments before is no page the site forbids everyone but a ban, even while no exit
// is being served (a wave of bans; see SuspectEvidence). Package transport sets it for every
// attempt; without it, that evidence is not used.
func (l *Lease) SetPath(path string) {
	if l.p != nil && !l.done {
		l.path = PathOf(path)
	}
}

// LeaseInfo describes a lease when it was picked.
type LeaseInfo struct {
	Exit   *Exit
	Origin string
	At     time.Time // when the lease was admitted (after any wait for a token)
	// Probe reports that the lease holds a HALF_OPEN probe slot (of the pair, the exit or the origin).
	Probe bool
	// PairState and ExitState are the states of the pair's and the exit's breakers when the exit was
	// picked (CLOSED for a pair the pool holds no breaker for).
	PairState, ExitState breaker.State
	// DryRun reports that breakers did not steer this pick; WouldRefuse that they would have refused it.
	DryRun, WouldRefuse bool
	// SessionMoved reports that the request's Session was pinned to another exit for this origin
	// and now leaves through this one: its gateway rotated the session it was pinned to (a ban, a
	// TTL), or the pinned exit stopped admitting it. A login flow learns here that its IP changed
	// (Pool.WithStrictSessions refuses such a pick instead).
	SessionMoved bool
	// SessionMove says why the session moved: MovedExitLost, MovedRotated, or, under
	// WithSessionLimits, MovedMaxAge or MovedMaxUses (a planned change, not a failure).
	SessionMove SessionMoveReason
}

// Reported is what a verdict left behind: the pair's and the exit's breaker states once it was
// applied, and the verdict as the pool counted it.
type Reported struct {
	PairState, ExitState breaker.State
	// Verdict is the verdict the breakers were given: the one reported, except that a Suspect
	// answer the pool judged a block comes back Transient, ClassBlocked (see Verdict.Suspect).
	Verdict Verdict
	// Spend is what the attempt cost, in the pool's cost unit: its exit's price of the bytes
	// reported with it (ReportTrafficAt) plus its price per request (cost.go, spend.go).
	Spend float64
}

// Exit returns the exit the lease goes through; nil for the zero Lease.
func (l *Lease) Exit() *Exit {
	if l.t.exit == nil {
		return nil
	}
	return l.t.exit.exit
}

// Info describes the lease.
func (l *Lease) Info() LeaseInfo {
	if l.p == nil {
		return LeaseInfo{}
	}
	return LeaseInfo{
		Exit: l.t.exit.exit, Origin: l.t.origin.key, At: l.t.now,
		Probe:     l.t.pairPm.Probe() || l.t.exitPm.Probe() || l.t.originPm.Probe(),
		PairState: l.t.pairState, ExitState: l.t.exitState,
		DryRun: l.p.dryRun, WouldRefuse: l.t.would, SessionMoved: l.move != MovedNone,
		SessionMove: l.move,
	}
}

// Report is shorthand for ReportAt(now, v) with now read from the pool's clock.
func (l *Lease) Report(v Verdict) Reported {
	if l.p == nil || l.done {
		return Reported{}
	}
	return l.ReportAt(l.p.clock.Now(), v)
}

// ReportAt gives the lease its verdict at now and returns the breakers' states afterwards. Only the
// first Report or Release of a lease counts; later ones do nothing. How a verdict moves the
// breakers is the Verdict's to say: see Outcome and Scope; a Suspect one is judged first (see
// Verdict.Suspect), unless JudgeAt judged the lease's verdict already, and Reported.Verdict says how.
func (l *Lease) ReportAt(now time.Time, v Verdict) Reported { return l.report(now, v, Traffic{}) }

// report is ReportAt for an attempt that moved tr (counted by ReportTrafficAt): it also counts
// what the attempt cost (spend.go).
func (l *Lease) report(now time.Time, v Verdict, tr Traffic) Reported {
	if l.p == nil || l.done {
		return Reported{}
	}
	l.done = true
	spend := l.p.spendOn(&l.t, tr)
	if v.Suspect && !l.judged {
		v = l.p.judgeSuspect(now, &l.t, v, l.path) // rare: kept off the common report's path
	}
	if v.Outcome == Transient || v.Outcome == Permanent {
		l.t.retries.avoidExit(l.t.exit.exit)
	}
	pair, exit := l.p.finish(now, &l.t, v, l.path)
	l.rotatingEgressDone(now, v) // a rotating gateway's egress IP (gateway_egress.go)
	if l.p.gateways.live.get(l.t.id) {
		l.p.sessionReported(now, &l.t, v, pair) // a gateway's session: rotate it? (gateway_rotate.go)
	}
	l.p.groupsHear(&l.t, v.Outcome == Success, l.groupProbe)
	return Reported{PairState: pair, ExitState: exit, Verdict: v, Spend: units(spend)}
}

// JudgeAt returns v as the lease's report would count it at now, without reporting it: a Suspect
// verdict judged by the origin's SuspectPolicy (see Verdict.Suspect), any other as it is. It is for
// a caller that must act on the verdict before it reports it, such as package transport, which
// returns a response when its headers arrive and reports a success when its body ends. The
// judgement stands: once JudgeAt has judged a Suspect verdict, the lease's report counts the
// verdict it is given as it is, so give it the one JudgeAt returned (or a failure found later, such
// as a body that died). The zero Lease and a lease already reported return v.
func (l *Lease) JudgeAt(now time.Time, v Verdict) Verdict {
	if l.p == nil || l.done || !v.Suspect {
		return v
	}
	l.judged = true
	return l.p.judgeSuspect(now, &l.t, v, l.path)
}

// Release is shorthand for ReleaseAt(now) with now read from the pool's clock.
func (l *Lease) Release() {
	if l.p == nil || l.done {
		return
	}
	l.ReleaseAt(l.p.clock.Now())
}

// ReleaseAt gives the lease back at now without a verdict, for an attempt that never went out:
// every permit is freed and nothing is counted. Like ReportAt, only the first call counts.
func (l *Lease) ReleaseAt(now time.Time) {
	if l.p == nil || l.done {
		return
	}
	l.done = true
	l.p.release(now, &l.t)
	l.rotatingEgressDone(now, Verdict{Outcome: Neutral})
	l.p.groupsHear(&l.t, false, l.groupProbe)
}
