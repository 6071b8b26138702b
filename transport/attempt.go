package transport

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// attempt is one request in flight through one exit. Once the response headers are in, it is also
// the response body: a successful attempt gets its verdict when the body ends (EOF or Close), so a
// body that dies mid-read, or that the body pace rule ends (bodypace.go), still counts against the
// exit, once.
//
// Its one timer is the header timeout until the headers are in, then the body's stall watchdog
// (tick): the same timer when it is due soon enough, so that a body read within the header timeout
// costs nothing more than today's header timeout did.
type attempt struct {
	t      *Transport
	lease  pool.Lease
	info   AttemptInfo
	caller *http.Request   // the caller's request: its context and Cancel channel say whether the caller gave up
	ctx    context.Context // the attempt's: the caller's + exit + cancel + observers'
	// actx and at live inside the attempt so that each request allocates them with it, not
	// separately: actx is the context that carries the exit (ctx points to it unless an observer
	// wrapped it), at is what the classifier is shown.
	actx    attemptContext
	at      Attempt
	cancel  context.CancelCauseFunc
	rc      io.ReadCloser
	status  int
	verdict pool.Verdict // a successful attempt's verdict, applied when the body ends
	done    atomic.Bool
	phase   atomic.Int32 // phaseHeaders, phaseTimedOut, phaseBody

	// The timer: mu guards timer and stopped; armed says a watchdog is pending (see watch).
	mu      sync.Mutex
	timer   clock.Timer
	tickFn  func() // a.tick, made once
	stopped bool
	armed   atomic.Bool

	// The body pace rule's state, set by prepareBody. waitSince is when (since bodyAt) the caller's
	// current wait in Read began, noWait when it is not waiting; got counts the bytes delivered.
	// waited, winAt, winGot and judging are the rate's accounts, touched by the reading goroutine
	// only.
	pace      bodyPace
	bodyAt    time.Time
	waitSince atomic.Int64
	got       atomic.Int64
	waited    time.Duration
	winAt     time.Duration
	winGot    int64
	judging   bool
	slow      atomic.Pointer[SlowBodyError]
}

// finish applies the verdict once, stops the timer and reports the attempt to observers.
func (a *attempt) finish(v pool.Verdict, status int, err error) {
	if !a.done.CompareAndSwap(false, true) {
		return
	}
	a.stopTimer()
	now := a.t.clock.Now()
	after := a.lease.ReportAt(now, v)
	if len(a.t.obs) > 0 {
		a.t.obs.finished(a.ctx, AttemptResult{
			AttemptInfo: a.info, Verdict: v, StatusCode: status, Err: err,
			Latency: now.Sub(a.info.At), PairStateAfter: after.PairState, ExitStateAfter: after.ExitState,
		})
	}
}

// Read reads the response body. EOF is the success of a successful attempt; any other error ends
// it as a body that died mid-read (or as the caller's cancellation). Under the body pace rule, a
// body that stalls or trickles fails with a *SlowBodyError.
func (a *attempt) Read(p []byte) (n int, err error) {
	if s := a.slow.Load(); s != nil {
		return 0, s
	}
	if a.pace.on() && len(p) > 0 && !a.done.Load() {
		n, err = a.pacedRead(p)
	} else {
		n, err = a.rc.Read(p)
	}
	if err == nil {
		return n, nil
	}
	if s := a.slow.Load(); s != nil {
		return n, s // the rule ended the body: its error, not the cancellation that unblocked the read
	}
	if !a.done.Load() {
		switch {
		case err == io.EOF:
			a.finish(a.verdict, a.status, nil)
		case callerDone(a.caller):
			a.finish(pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}, a.status, err)
		default:
			a.finish(pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBodyRead, ConnLevel: true}, a.status, err)
		}
	}
	return n, err
}

// Close closes the body. Closing before EOF is the caller's choice, not the exit's failure.
func (a *attempt) Close() error {
	err := a.rc.Close()
	a.finish(a.verdict, a.status, nil)
	a.cancel(nil)
	return err
}
