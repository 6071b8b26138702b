package transport

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// attempt is one request in flight through one exit. Once the response headers are in, it is also
// the response body: a successful attempt gets its verdict when the body ends (EOF or Close), so a
// body that dies mid-read still counts against the exit, once.
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
	timer   clock.Timer
	rc      io.ReadCloser
	status  int
	verdict pool.Verdict // a successful attempt's verdict, applied when the body ends
	done    atomic.Bool
}

func (a *attempt) headersTimedOut() { a.cancel(errHeaderTimeout) }

// finish applies the verdict once and reports the attempt to observers.
func (a *attempt) finish(v pool.Verdict, status int, err error) {
	if !a.done.CompareAndSwap(false, true) {
		return
	}
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
// it as a body that died mid-read (or as the caller's cancellation).
func (a *attempt) Read(p []byte) (int, error) {
	n, err := a.rc.Read(p)
	if err != nil && !a.done.Load() {
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
