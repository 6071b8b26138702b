package transport

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// attempt is one request in flight through one exit. Once the response headers are in, it is also
// the response body: a successful attempt gets its verdict when the body ends (EOF or Close), so a
// body that dies mid-read, or that the body pace rule ends (bodypace.go), still counts against the
// exit, once. It is also the request's context (attemptctx.go), and it holds the request copy that
// goes out, so that a request costs the transport one allocation of its own where it had six.
//
// Its one timer (a watchdog, kept across attempts: watchdog.go) is the header timeout until the
// headers are in, then the body's stall watchdog (tick): the same arming when it is due soon
// enough, so that a body read within the header timeout costs nothing more than the header
// timeout does.
type attempt struct {
	t      *Transport
	lease  pool.Lease
	info   AttemptInfo
	caller *http.Request   // the caller's request: its context and Cancel channel say whether the caller gave up
	ctx    context.Context // the attempt's context: the attempt itself, or what the observers made of it
	// out is the request that goes out (a shallow copy of the caller's, with ctx), at is what the
	// classifier is shown and octx what the observers' context becomes: they live inside the
	// attempt so that each request allocates them with it, not separately.
	out     http.Request
	at      Attempt
	octx    observedContext
	rc      io.ReadCloser
	status  int
	verdict pool.Verdict // a successful attempt's verdict, applied when the body ends
	trace   *connTrace   // notes the attempt's connection, whose bytes it claims (traffic.go); nil with WithBase
	done    atomic.Bool
	phase   atomic.Int32 // phaseHeaders, phaseTimedOut, phaseBody

	// The context (attemptctx.go). parent is the caller's and parentEnds (below, packed with the
	// timer's flags) says whether it can end: both are fixed before the attempt is shared. cmu
	// guards ctxErr, ctxCause, the Done channel's making and closing, and the registrations
	// (first, afters, afterSeq, stopParent); ended says the context has ended, and is stored after
	// ctxErr and ctxCause.
	parent     context.Context
	cmu        sync.Mutex
	ended      atomic.Bool
	afterSeq   uint32 // beside ended, in one word
	ctxErr     error
	ctxCause   error
	doneCh     atomic.Value // chan struct{}
	first      func()
	afters     []afterReg
	stopParent func() bool

	// The timer: mu guards wd, stopped and tainted; armed says a watchdog is pending (see watch).
	mu      sync.Mutex
	wd      *watchdog
	stopped bool
	tainted bool // a Stop found the watchdog firing: it does not go back for another attempt
	// judging (the rate's, below) and parentEnds (the context's, above) fill this word: so packed,
	// the attempt and its 8-byte allocation header fit in 1,024 bytes, a size class (a word more
	// would cost 128 bytes per request; TestAttemptFitsItsSizeClass).
	judging    bool
	parentEnds bool
	armed      atomic.Bool

	// The body pace rule's state, set by prepareBody. waitSince is when (since bodyAt) the caller's
	// current wait in Read began, noWait when it is not waiting; got counts the bytes delivered.
	// waited, winAt, winGot and judging (above) are the rate's accounts, touched by the reading
	// goroutine only.
	pace      bodyPace
	bodyAt    time.Time
	waitSince atomic.Int64
	got       atomic.Int64
	waited    time.Duration
	winAt     time.Duration
	winGot    int64
	slow      atomic.Pointer[SlowBodyError]
}

// finish applies the verdict once, stops the timer and reports the attempt to observers, with the
// verdict as the pool counted it.
func (a *attempt) finish(v pool.Verdict, status int, err error) {
	if !a.done.CompareAndSwap(false, true) {
		return
	}
	a.stopTimer()
	now := a.t.clock.Now()
	tr := a.traffic()
	after := a.lease.ReportTrafficAt(now, v, tr)
	if len(a.t.obs) > 0 {
		a.t.obs.finished(a.ctx, AttemptResult{
			AttemptInfo: a.info, Verdict: after.Verdict, StatusCode: status, Err: err,
			Latency: now.Sub(a.info.At), PairStateAfter: after.PairState, ExitStateAfter: after.ExitState,
			Bytes: tr, Spend: after.Spend,
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
