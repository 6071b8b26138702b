package transport

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// The body pace rule's defaults (BodyPace, WithBodyPace).

// BodyPace is the rule that blames an exit for a response body that stalls or trickles, before
// the caller's deadline ends it: a Read fails with a *SlowBodyError, and the attempt counts once
// against the exit, as a body that dies mid-read does (transient, class body_read, at the pair and
// toward the exit's own failure rate). The rule runs on the pool's clock and judges only what the
// exit delivers while the caller waits for it in Read: a caller that reads slowly, or stops
// reading for a while, is never the exit's failure. It judges the body of a successful attempt,
// until its end or Close; a response judged a failure at its headers has its verdict already.
//
// A zero field keeps the default (as for every option of the package); the zero BodyPace is the
// default rule, which is on. NoBodyPace turns it off; ContextWithBodyPace changes it per request
// (streams, long polls).
type BodyPace struct {
	// StallTimeout fails a body that delivers no byte for this long while the caller waits in Read.
	// Default DefaultBodyStallTimeout (15 s); negative disables the stall rule. The stall rule is
	// also what catches a body that delivers nothing at all: the rate is judged as bytes arrive.
	StallTimeout time.Duration
	// MinRate fails a body that delivers fewer bytes per second of waiting than this, averaged over
	// each Window after Grace. Bytes are counted as the caller's Read returns them (after net/http's
	// gzip decoding, if any). Default DefaultMinBodyRate (4 KiB/s); negative disables the rate rule.
	MinRate int64
	// Window is the span of waiting MinRate is averaged over: the rate is judged at the end of
	// each Window. Default DefaultBodyRateWindow (10 s); negative is an error from WithBodyPace.
	Window time.Duration
	// Grace is the waiting at the start of a body before its first Window begins. Default
	// DefaultBodyRateGrace (5 s); negative means none.
	Grace time.Duration
}

// NoBodyPace turns the body pace rule off: WithBodyPace(NoBodyPace) for a transport,
// ContextWithBodyPace(ctx, NoBodyPace) for one request (a server-sent event stream, a long poll).
var NoBodyPace = BodyPace{StallTimeout: -1, MinRate: -1}

// WithBodyPace sets the rule that blames an exit for a response body that stalls or trickles (see
// BodyPace). Default: the zero BodyPace, that is a stall after 15 s without a byte and a minimum
// of 4 KiB/s averaged over 10 s after a 5 s grace; NoBodyPace turns it off.
func WithBodyPace(p BodyPace) Option {
	return optionFunc(func(c *config) error {
		if p.Window < 0 {
			return fmt.Errorf("transport: WithBodyPace: Window %v: must not be negative", p.Window)
		}
		c.bodyPace = defaultBodyPace.with(p)
		return nil
	})
}

// ContextWithBodyPace returns a context whose requests' bodies are judged by p instead of the
// transport's rule: zero fields keep the transport's values, negative StallTimeout or MinRate turn
// that part off, a negative Window keeps the transport's. ContextWithBodyPace(ctx, NoBodyPace)
// exempts a stream or a long poll, whose silences are the origin's way of speaking.
func ContextWithBodyPace(ctx context.Context, p BodyPace) context.Context {
	return context.WithValue(ctx, bodyPaceKey, p)
}

// SlowBodyError is the error a response body's Read returns when the body pace rule (BodyPace)
// ended it: it stalled (Stalled: no byte for Waited) or trickled (Rate bytes per second over a
// window of Waited, below MinRate). It names the exit by its label, never its credentials, and
// matches ErrSlowBody. Its Timeout method reports true.
type SlowBodyError struct {
	Exit    string // the exit's label
	Origin  string
	Stalled bool          // no byte for Waited; else the rate fell below MinRate
	Waited  time.Duration // the stall, or the window the rate was averaged over
	Rate    float64       // bytes per second over the window; 0 for a stall
	MinRate int64         // the rule's minimum, bytes per second; 0 for a stall
	Read    int64         // body bytes delivered before the rule ended it
}

// Error says which exit's body to which origin the rule ended, and why, in whole milliseconds.
func (e *SlowBodyError) Error() string {
	waited := e.Waited.Round(time.Millisecond)
	if e.Stalled {
		return fmt.Sprintf("transport: via %s to %s: response body stalled: no byte for %v, after %d bytes",
			e.Exit, e.Origin, waited, e.Read)
	}
	return fmt.Sprintf("transport: via %s to %s: response body too slow: %.0f B/s over %v, below %d B/s, after %d bytes",
		e.Exit, e.Origin, e.Rate, waited, e.MinRate, e.Read)
}

// Is reports whether target is ErrSlowBody.
func (e *SlowBodyError) Is(target error) bool { return target == ErrSlowBody }

// Timeout reports true: the body did not arrive in time.
func (e *SlowBodyError) Timeout() bool { return true }

// bodyPace is a BodyPace resolved: zero means off.
type bodyPace struct {
	stall  time.Duration
	rate   int64
	window time.Duration
	grace  time.Duration
}

var defaultBodyPace = bodyPace{
	stall: DefaultBodyStallTimeout, rate: DefaultMinBodyRate,
	window: DefaultBodyRateWindow, grace: DefaultBodyRateGrace,
}

func (p bodyPace) on() bool { return p.stall > 0 || p.rate > 0 }

// with is p changed by o's non-zero fields.
func (p bodyPace) with(o BodyPace) bodyPace {
	switch {
	case o.StallTimeout < 0:
		p.stall = 0
	case o.StallTimeout > 0:
		p.stall = o.StallTimeout
	}
	switch {
	case o.MinRate < 0:
		p.rate = 0
	case o.MinRate > 0:
		p.rate = o.MinRate
	}
	if o.Window > 0 {
		p.window = o.Window
	}
	switch {
	case o.Grace < 0:
		p.grace = 0
	case o.Grace > 0:
		p.grace = o.Grace
	}
	if p.window <= 0 { // a transport without a window (cannot happen through New) judges no rate
		p.rate = 0
	}
	return p
}

// bodyPaceFor is the rule for the body of req: the transport's, or its context's.
func (t *Transport) bodyPaceFor(req *http.Request) bodyPace {
	if o, ok := req.Context().Value(bodyPaceKey).(BodyPace); ok {
		return t.pace.with(o)
	}
	return t.pace
}

// noWait is attempt.waitSince when the caller is not waiting in Read.
const noWait = math.MinInt64

// The attempt's phases: its one timer is the header timeout until the headers are in, then the
// body's stall watchdog.
const (
	phaseHeaders  int32 = iota // awaiting the response headers (and the classifier's peek)
	phaseTimedOut              // the header timeout fired first
	phaseBody                  // the headers are in: the timer, if any, watches the body
)

// tick is the attempt's timer func.
func (a *attempt) tick() {
	if a.phase.CompareAndSwap(phaseHeaders, phaseTimedOut) {
		a.cancel(errHeaderTimeout)
		return
	}
	if a.phase.Load() == phaseBody {
		a.watch()
	}
}

// prepareBody readies the attempt for judging the body of a successful response, before the phase
// turns to phaseBody (which publishes these fields to the timer's goroutine). The header timer,
// still pending, will watch the body when it is due no later than a stall could be, so that a body
// read within the header timeout needs no arming of its own.
func (a *attempt) prepareBody(pace bodyPace, at time.Time) {
	a.pace, a.bodyAt = pace, at
	a.waitSince.Store(noWait)
	if pace.stall > 0 && a.t.headerTimeout > 0 && a.t.headerTimeout <= pace.stall {
		a.armed.Store(true)
	}
}

// startBody hands the attempt's timer over to the body once the response is on its way to the
// caller: the header timer stays on as the watchdog (prepareBody), or is stopped, and the first
// Read arms the watchdog again, so that a body nobody reads holds no pending timer.
func (a *attempt) startBody() {
	if a.pace.stall <= 0 {
		a.stopTimer()
		return
	}
	if a.armed.Load() {
		return // the header timer is pending; should it fire before a Read, it disarms and that Read arms
	}
	a.mu.Lock()
	if !a.armed.Load() {
		a.pauseTimerLocked() // a header timer due later than a stall could be
	}
	a.mu.Unlock()
}

// armLocked arms the watchdog, due in d. a.mu is held.
func (a *attempt) armLocked(d time.Duration) {
	a.armed.Store(true)
	a.startTimerLocked(d)
}

// arm arms the watchdog, due in d, unless it is armed or the body has ended.
func (a *attempt) arm(d time.Duration) {
	a.mu.Lock()
	if !a.stopped && !a.armed.Load() {
		a.armLocked(d)
	}
	a.mu.Unlock()
}

// watch is the stall watchdog firing: it fails a body the caller has waited on for the stall
// timeout, re-arms for the rest of a shorter wait, and disarms when the caller is not waiting (its
// next Read arms it again), so that a body nobody reads holds no pending timer.
//
// watch stores armed before it loads waitSince, and Read stores waitSince before it loads armed:
// of a watch disarming and a Read starting to wait at once, at least one sees the other, so a wait
// is never left unwatched.
func (a *attempt) watch() {
	a.armed.Store(false)
	ws := a.waitSince.Load()
	if ws == noWait || a.done.Load() || callerDone(a.caller) {
		return // not waiting; or ended; or the caller gave up, which blames nobody
	}
	waited := time.Duration(a.since() - ws)
	if waited >= a.pace.stall {
		a.failSlow(&SlowBodyError{Stalled: true, Waited: waited, Read: a.got.Load()})
		return
	}
	a.arm(a.pace.stall - max(waited, 0))
}

// since is the time on the pool's clock since the headers arrived, in nanoseconds (monotonic for
// the system clock).
func (a *attempt) since() int64 { return int64(a.t.clock.Now().Sub(a.bodyAt)) }

// pacedRead is Read under the body pace rule.
func (a *attempt) pacedRead(p []byte) (int, error) {
	start := a.since()
	if a.pace.stall > 0 {
		a.waitSince.CompareAndSwap(noWait, start) // kept across Reads that return nothing
		if !a.armed.Load() {
			ws := a.waitSince.Load()
			a.arm(a.pace.stall - max(time.Duration(start-ws), 0))
		}
	}
	n, err := a.rc.Read(p)
	if n > 0 {
		a.waitSince.Store(noWait)
		a.got.Add(int64(n))
	}
	if err == nil && a.pace.rate > 0 {
		if se := a.judgeRate(time.Duration(a.since() - start)); se != nil {
			a.failSlow(se)
			if s := a.slow.Load(); s != nil {
				err = s
			}
		}
	}
	return n, err
}

// judgeRate adds a Read that waited d to the rate's accounts, and returns a *SlowBodyError when
// a window has closed below the minimum rate. Only the reading goroutine touches these accounts.
func (a *attempt) judgeRate(d time.Duration) *SlowBodyError {
	a.waited += max(d, 0)
	if !a.judging {
		if a.waited >= a.pace.grace {
			a.judging, a.winAt, a.winGot = true, a.waited, a.got.Load()
		}
		return nil
	}
	w := a.waited - a.winAt
	if w < a.pace.window {
		return nil
	}
	got := a.got.Load()
	rate := float64(got-a.winGot) / w.Seconds()
	if rate >= float64(a.pace.rate) {
		a.winAt, a.winGot = a.waited, got
		return nil
	}
	return &SlowBodyError{Waited: w, Rate: rate, MinRate: a.pace.rate, Read: got}
}

// failSlow ends the body with e: the attempt's verdict is a body_read failure, applied at once
// (whether or not the base then unblocks the read: cancelling the attempt's context makes
// net/http's do), and the Reads from here on return e. The caller's own cancellation wins: it
// blames nobody.
func (a *attempt) failSlow(e *SlowBodyError) {
	if a.done.Load() || callerDone(a.caller) {
		return
	}
	e.Exit, e.Origin = a.info.Exit.Label(), a.info.Origin
	if !a.slow.CompareAndSwap(nil, e) {
		return
	}
	a.finish(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBodyRead, ConnLevel: true}, a.status, e)
	a.cancel(e)
}
