package transport

import (
	"context"
	"time"
)

// The attempt is its own context: the caller's context, plus the exit and the attempt as values,
// plus a cancellation of its own (the header timeout, the body pace rule, the end of the attempt).
// It replaces a context.WithCancelCause per request (two allocations), and it is what makes
// net/http's own per-request context cheap to hang below it: net/http derives one from every
// request's context, and package context registers such a child with a parent that has an
// AfterFunc method (see AfterFunc) instead of giving the parent a map of children.
//
// What it costs, per request through a net/http base: the Done channel (made when first asked
// for: net/http asks), and the two allocations package context makes to register its child.
// A caller whose context can end also pays for a context.AfterFunc on it.

var _ context.Context = (*attempt)(nil)

// closedChan is the Done channel of an attempt cancelled before anyone asked for its channel.
var closedChan = make(chan struct{})

func init() { close(closedChan) }

// afterReg is a func registered with AfterFunc beyond the first, and the id its stop removes.
type afterReg struct {
	id uint32
	f  func()
}

// initContext makes parent the attempt's parent context: its values, its deadline, and its end,
// which ends the attempt (with parent's error and cause) unless the attempt ended first.
func (a *attempt) initContext(parent context.Context) {
	a.parent = parent
	if parent.Done() == nil {
		return // never ends: nothing to watch (context.Background, a request built without one)
	}
	a.parentEnds = true
	if parent.Err() != nil {
		a.cancelWith(parent.Err(), context.Cause(parent))
		return
	}
	stop := context.AfterFunc(parent, a.parentEnded)
	a.cmu.Lock()
	if a.ended.Load() {
		a.cmu.Unlock()
		stop()
		return
	}
	a.stopParent = stop
	a.cmu.Unlock()
}

// parentEnded ends the attempt as its parent ended.
func (a *attempt) parentEnded() { a.cancelWith(a.parent.Err(), context.Cause(a.parent)) }

// cancel ends the attempt's context with cause (context.Canceled if nil), unless it has ended: the
// first end wins, as with context.WithCancelCause. If the caller's context has ended, the end is
// the caller's (its error and cause), as it would have been had its end reached the attempt first.
func (a *attempt) cancel(cause error) {
	if a.parentEnds {
		if err := a.parent.Err(); err != nil {
			a.cancelWith(err, context.Cause(a.parent))
			return
		}
	}
	if cause == nil {
		cause = context.Canceled
	}
	a.cancelWith(context.Canceled, cause)
}

// cancelWith ends the attempt's context with err and cause: it closes the Done channel, stops
// watching the parent and runs the funcs registered with AfterFunc, in this goroutine, after the
// lock is released (they are package context's: they cancel a child context, and take its lock).
func (a *attempt) cancelWith(err, cause error) {
	a.cmu.Lock()
	if a.ended.Load() {
		a.cmu.Unlock()
		return
	}
	a.ctxErr, a.ctxCause = err, cause
	a.ended.Store(true) // before the channel closes: who wakes on it sees Err; Err waits for it
	if d, _ := a.doneCh.Load().(chan struct{}); d != nil {
		close(d)
	} else {
		a.doneCh.Store(closedChan)
	}
	first, rest, stop := a.first, a.afters, a.stopParent
	a.first, a.afters, a.stopParent = nil, nil, nil
	a.cmu.Unlock()
	if stop != nil {
		stop()
	}
	if first != nil {
		first()
	}
	for _, r := range rest {
		r.f()
	}
}

// cause is what ended the attempt's context (nil while it has not ended): the cause cancel was
// given, or the caller's. context.Cause of the attempt's context cannot see it (package context
// finds causes only in its own contexts), so the transport asks here.
func (a *attempt) cause() error {
	if !a.ended.Load() {
		return nil
	}
	return a.ctxCause
}

// Deadline is the caller's context's.
func (a *attempt) Deadline() (deadline time.Time, ok bool) { return a.parent.Deadline() }

// Done returns a channel closed when the attempt's context ends; it is made on first call.
func (a *attempt) Done() <-chan struct{} {
	if d, ok := a.doneCh.Load().(chan struct{}); ok {
		return d
	}
	a.cmu.Lock()
	defer a.cmu.Unlock()
	d, ok := a.doneCh.Load().(chan struct{})
	if !ok {
		d = make(chan struct{})
		a.doneCh.Store(d)
	}
	return d
}

// Err is nil until the attempt's context ends, then context.Canceled, or the caller's context's
// error if that is what ended it. The caller's end reaches the attempt through a context.AfterFunc,
// in a goroutine of its own, a moment after it happens; Err does not wait for it: it ends the
// attempt's context itself when it finds the caller's ended, so that what a cancelled caller's
// base or body reads next is the cancellation, as it was with a context package child.
func (a *attempt) Err() error {
	if !a.ended.Load() {
		if !a.parentEnds || a.parent.Err() == nil {
			return nil
		}
		a.parentEnded()
	}
	<-a.Done() // closed, or about to be: Err is non-nil only once Done is closed
	return a.ctxErr
}

// Value carries the exit (ExitFromContext), the attempt (VerdictFromResponse) and, for net/http,
// the attempt's httptrace hooks, composed with the caller's (traffic.go); any other key is the
// caller's context's.
func (a *attempt) Value(key any) any {
	switch key {
	case exitKey:
		return a.info.Exit
	case attemptKey:
		return a
	case traceKey:
		if a.trace != nil {
			return &a.trace.trace
		}
	}
	return a.parent.Value(key)
}

// String names the context as package context's own do.
func (a *attempt) String() string { return "transport.attempt" }

// AfterFunc arranges for f to run when the attempt's context ends (at once, in a new goroutine, if
// it has ended). It is the method package context looks for on a parent: a context derived from
// the attempt's (net/http's own per-request one, a context.AfterFunc on it) registers here instead
// of starting a goroutine or keeping a map of children. Only package context is meant to call it.
//
// The first registration — net/http's, through a net/http base — costs nothing, and its stop does
// not take f off: it returns false, and f runs when the attempt ends. That is harmless for package
// context, the only caller: it ignores stop's result, and the f it registers cancels a child that
// is cancelled already, or calls a func whose once has been spent. A func value that removed it
// would be an allocation per request. Later registrations get a stop that removes them (and
// reports true if it did), so that a body read for hours under contexts derived again and again
// from its request's holds one of them at most.
func (a *attempt) AfterFunc(f func()) (stop func() bool) {
	a.cmu.Lock()
	if a.ended.Load() {
		a.cmu.Unlock()
		go f() // not here: package context calls AfterFunc holding its child's lock, which f takes
		return stoppedNothing
	}
	if a.first == nil && a.afterSeq == 0 {
		a.first = f
		a.afterSeq = 1
		a.cmu.Unlock()
		return stoppedNothing
	}
	a.afterSeq++
	id := a.afterSeq
	a.afters = append(a.afters, afterReg{id: id, f: f})
	a.cmu.Unlock()
	return func() bool { return a.stopAfter(id) }
}

// stoppedNothing is the stop of the first AfterFunc registration, and of one made after the end.
func stoppedNothing() bool { return false }

// stopAfter takes the registration id off, and reports whether it was still on.
func (a *attempt) stopAfter(id uint32) bool {
	a.cmu.Lock()
	defer a.cmu.Unlock()
	for i, r := range a.afters {
		if r.id == id {
			a.afters = append(a.afters[:i], a.afters[i+1:]...)
			return true
		}
	}
	return false
}

// observedContext is the attempt's context as the observers returned it (AttemptStarted), with an
// AfterFunc: an observer that only adds values (a span) keeps net/http's child registering with
// the attempt, without a goroutine.
type observedContext struct {
	context.Context
	a *attempt
}

// AfterFunc is the attempt's (see attempt.AfterFunc) when the observers' context ends exactly when
// the attempt's does (its Done channel is the attempt's); otherwise that of package context, which
// runs f in a goroutine of its own once the observers' context ends. It is asked when a child is
// made, so that an attempt whose base never asks for a Done channel makes none.
func (c *observedContext) AfterFunc(f func()) func() bool {
	if c.Context.Done() == c.a.Done() {
		return c.a.AfterFunc(f)
	}
	return context.AfterFunc(c.Context, f)
}

// observed returns the context the observers made of the attempt's, given an AfterFunc unless it is
// the attempt itself.
func (a *attempt) observed(ctx context.Context) context.Context {
	if ctx == context.Context(a) {
		return ctx
	}
	a.octx = observedContext{Context: ctx, a: a}
	return &a.octx
}
