package collyext

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gocolly/colly/v2"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

// GiveUpError is what RetryOnError hands its give-up callback when it stops re-queueing a request
// that another try might still have served: it was re-queued Settings.Retries times, the
// Settings.Budget shared by all requests is spent (then Budget is set, and errors.Is(err,
// retry.ErrBudgetSpent) holds), or nothing will be ready for longer than Settings.MaxDelay (every
// exit parked or cooling for the origin). Its message
// lists the request's failed attempts as pool.FormatGiveUp writes them, the same words the
// retry package's give-up uses. errors.As finds the last failure's types (*transport.AttemptError,
// *pool.NoHealthyExitError, *retry.ResponseError, …) and those of every listed failure through it.
type GiveUpError struct {
	Method, URL string
	Requeued    int           // re-queues made
	Wait        time.Duration // when over MaxDelay: how long until something may be tried; else 0
	MaxDelay    time.Duration
	// Budget is the Settings.Budget that refused the re-queue (its Stats count the refusal); nil
	// when the give-up is for another reason.
	Budget *retry.Budget
	// Failures are the request's failed attempts, oldest first (the last pool.MaxFailedAttempts),
	// as recorded in its *pool.Retries. Each Err is the transport's error (a
	// *transport.AttemptError), a *retry.ResponseError for a failed response, or the read error of a
	// body that died mid-read.
	Failures []pool.FailedAttempt
	Err      error // the last failure
}

// Error says what was given up and why, and which attempts failed, without credentials: exits
// appear by label.
func (e *GiveUpError) Error() string {
	head := fmt.Sprintf("collyext: giving up on %s %s, re-queued %d times: as many as Settings.Retries allows", e.Method, e.URL, e.Requeued)
	switch {
	case e.Wait > 0:
		head = fmt.Sprintf("collyext: giving up on %s %s, re-queued %d times: nothing ready for %v, longer than MaxDelay %v",
			e.Method, e.URL, e.Requeued, e.Wait.Round(time.Millisecond), e.MaxDelay)
	case e.Budget != nil:
		head = fmt.Sprintf("collyext: giving up on %s %s, re-queued %d times: retry budget spent (%v)", e.Method, e.URL, e.Requeued, e.Budget)
	}
	return pool.FormatGiveUp(head, e.Failures, e.Err)
}

// Is reports whether target is retry.ErrBudgetSpent and Settings.Budget refused the re-queue.
func (e *GiveUpError) Is(target error) bool { return target == retry.ErrBudgetSpent && e.Budget != nil }

// Unwrap returns the last failure, then the listed failures' errors.
func (e *GiveUpError) Unwrap() []error { return pool.GiveUpCauses(e.Err, e.Failures) }

// RetryOnError returns an OnError callback that re-queues the failures a retry can fix
// (retry.DecideVerdict's table: the exit's failures, transient or permanent, and refusals that
// will clear: no healthy exit, the origin guard, rate limits) through another exit, after the
// right delay, at most Settings.Retries times per request. Everything else — successes colly
// reports as errors (a 404), the origin's own errors (a 500), origin-scoped permanent failures,
// the caller's timeouts and cancellation, errors that are not the transport's — goes to giveUp at
// once, with colly's error; a request RetryOnError stops re-queueing goes to giveUp with a
// *GiveUpError. giveUp may be nil.
//
//	c.OnError(ext.RetryOnError(func(r *colly.Response, err error) {
//		log.Printf("lost %s: %v", r.Request.URL, err)
//	}))
//
// The delay before a re-queue is the longer of the exponential backoff (Settings.MinDelay) and
// what the failure calls for: the soonest probe after "no healthy exit", the origin guard's next
// probe, the next token; with Settings.WaitRetryAfter, a response's Retry-After. The callback
// waits it out itself (colly's own goroutine for the request in async mode, holding the collector's
// Wait open; the caller's in sync mode) and then calls r.Request.Retry, which drops the Cookie
// header (the jar adds the current cookies again) and counts toward MaxRequests. The wait ends
// early, without a re-queue, when the collector's Context is done.
//
// Register it once, on the collector given to Attach (or a clone given to Hook), after Attach.
func (e *Extension) RetryOnError(giveUp colly.ErrorCallback) colly.ErrorCallback {
	return func(resp *colly.Response, err error) {
		if final := e.requeue(resp, err); final != nil && giveUp != nil {
			giveUp(resp, final)
		}
	}
}

// requeue re-queues resp's request if it should, and returns nil; otherwise it returns the error
// to give up with.
func (e *Extension) requeue(resp *colly.Response, err error) error {
	final := e.requeueOrGiveUp(resp, err)
	if l := e.s.Logger; l != nil && final != nil {
		l.LogAttrs(context.Background(), slog.LevelWarn, "collyext: request given up",
			slog.String("method", resp.Request.Method), slog.String("url", resp.Request.URL.String()),
			slog.String("error", final.Error()))
	}
	return final
}

func (e *Extension) requeueOrGiveUp(resp *colly.Response, err error) error {
	id := resp.Request.Headers.Get(RequestHeader)
	r := e.lookup(id)
	d, failure := e.decide(resp, err, r)
	if !d.Retry || r == nil {
		e.forget(id)
		return failure
	}
	wait := d.Wait
	if e.s.WaitRetryAfter {
		wait = max(wait, d.Verdict.RetryAfter)
	}
	e.mu.Lock()
	requeued := r.requeued
	e.mu.Unlock()
	gu := &GiveUpError{Method: resp.Request.Method, URL: resp.Request.URL.String(), Requeued: requeued,
		MaxDelay: e.s.MaxDelay, Failures: r.retries.Failures(), Err: failure}
	if wait > e.s.MaxDelay {
		gu.Wait = wait
		e.forget(id)
		return gu
	}
	if e.s.Retries < 0 || requeued >= e.s.Retries {
		e.forget(id)
		return gu
	}
	if b := e.s.Budget; b != nil && !b.TryWithdraw() {
		gu.Budget = b
		e.forget(id)
		return gu
	}
	delay := max(wait, retry.Delay(d, e.s.MinDelay, e.s.MaxDelay, requeued, e.s.Rand()))
	if l := e.s.Logger; l != nil {
		l.LogAttrs(context.Background(), slog.LevelDebug, "collyext: re-queue",
			slog.String("url", resp.Request.URL.String()), slog.String("exit", d.Exit),
			slog.String("class", string(d.Verdict.Class)), slog.Int("requeued", requeued+1),
			slog.Duration("delay", delay), slog.Bool("fresh_exit", d.MovesOn()))
	}
	e.mu.Lock()
	r.requeued++
	trips := r.roundTrips
	e.mu.Unlock()
	if err := e.sleep(delay); err != nil {
		e.forget(id)
		return err
	}
	if rerr := resp.Request.Retry(); rerr != nil {
		e.mu.Lock()
		started := r.roundTrips != trips
		e.mu.Unlock()
		if !started {
			// The re-queue never reached the transport (MaxRequests, an unseekable body, …). In sync
			// mode an error from a fetch that did start is that fetch's own, already handled by
			// its own callbacks.
			e.forget(id)
			return rerr
		}
	}
	return nil
}

// decide says what a failure means: from the transport's error when there is one, else from the
// outcome the extension recorded for the fetch (a failed response, a body that died mid-read).
// failure is the error to give up with.
func (e *Extension) decide(resp *colly.Response, err error, r *request) (d retry.Decision, failure error) {
	var (
		ae *transport.AttemptError
		nh *pool.NoHealthyExitError
		ou *pool.OriginUnhealthyError
		th *pool.ThrottledError
	)
	if errors.As(err, &ae) || errors.As(err, &nh) || errors.As(err, &ou) || errors.As(err, &th) {
		return retry.Decide(nil, err), err
	}
	if r == nil {
		return retry.Decision{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case r.failed != nil && r.status == 0:
		// The transport's error, its type lost on the way (http.Client's Timeout message).
		return *r.failed, err
	case r.bodyFailed:
		d = retry.DecideVerdict(r.verdict)
	case r.aborted && errors.Is(err, colly.ErrAbortedAfterHeaders),
		r.status != 0 && r.status == resp.StatusCode:
		d = retry.DecideVerdict(r.verdict)
		if d.Retry || r.aborted {
			req := resp.Request
			err = &retry.ResponseError{Exit: r.exit, Origin: transport.OriginHost(req.URL), StatusCode: r.status, Verdict: r.verdict}
		}
	default:
		return retry.Decision{}, err
	}
	d.Exit = r.exit
	return d, err
}

// sleep waits d on the settings' clock, or returns the collector context's error as soon as it
// is done.
func (e *Extension) sleep(d time.Duration) error {
	ctx := e.c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	return clock.Sleep(ctx, e.s.Clock, d)
}
