package collyext

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/gocolly/colly/v2"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/retry"
	"github.com/proxybreaker/proxybreaker/transport"
)

// request is what the extension remembers about one logical request between its fetches: colly
// builds each fetch's http.Request afresh from the collector's context, so the request's
// *pool.Retries has to live here, found again through RequestHeader. The other fields are guarded
// by Extension.mu.
type request struct {
	// retries is the one memory the request's fetches share (safe for concurrent use on its own):
	// the pool notes there the exits that failed it, the extension its failed attempts.
	retries *pool.Retries
	// carrier holds retries and nothing else: transport.ContextWithRetries(context.Background()).
	// Each fetch's context asks it first (retriesContext), so the transport finds retries there.
	carrier    context.Context
	roundTrips int // fetches that reached the transport
	requeued   int // re-queues so far

	// The latest fetch's outcome.
	exit       string
	verdict    pool.Verdict
	failed     *retry.Decision // what the transport's error meant, when no response arrived
	status     int             // 0 when no response arrived
	bodyFailed bool            // the body died mid-read
	aborted    bool            // onResponseHeaders aborted the response: a failure colly would have parsed
}

// track returns id's request, making it if need be. When MaxTracked requests are remembered, an
// arbitrary one is forgotten.
func (e *Extension) track(id string) *request {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r, ok := e.reqs[id]; ok {
		return r
	}
	if len(e.reqs) >= e.s.MaxTracked {
		for victim := range e.reqs {
			delete(e.reqs, victim)
			break
		}
	}
	carrier := transport.ContextWithRetries(context.Background())
	r := &request{retries: transport.RetriesFromContext(carrier), carrier: carrier}
	e.reqs[id] = r
	return r
}

func (e *Extension) lookup(id string) *request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reqs[id]
}

func (e *Extension) forget(id string) {
	e.mu.Lock()
	delete(e.reqs, id)
	e.mu.Unlock()
}

// Tracked returns how many logical requests the extension remembers right now: those in flight
// and those between a failure and their re-queue. It falls back to 0 when a crawl is done, unless
// failures were not handed to RetryOnError (then Settings.MaxTracked bounds it).
func (e *Extension) Tracked() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.reqs)
}

var (
	_ http.RoundTripper = (*roundTripper)(nil)
	_ io.ReadCloser     = (*trackedBody)(nil)
)

// roundTripper is what the shell hands every request to: it strips RequestHeader, puts the
// logical request's *pool.Retries in the context, sends the request through the transport, and
// records the outcome for the callbacks.
type roundTripper struct{ e *Extension }

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	e := rt.e
	if e.shell.Proxy != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, ErrProxyFuncSet
	}
	id := req.Header.Get(RequestHeader)
	ctx := req.Context()
	var r *request
	if id != "" {
		r = e.track(id)
		e.mu.Lock()
		first := r.roundTrips == 0
		r.roundTrips++
		r.exit, r.verdict, r.failed, r.status, r.bodyFailed, r.aborted = "", pool.Verdict{}, nil, 0, false, false
		e.mu.Unlock()
		if b := e.s.Budget; b != nil && first {
			b.Deposit() // the logical request's first fetch; its re-queues withdraw (RetryOnError)
		}
		ctx = retriesContext{ctx, r.carrier}
	}
	out := req.WithContext(ctx) // a copy: the caller's request is untouched
	if r != nil {
		out.Header = req.Header.Clone()
		out.Header.Del(RequestHeader)
	}
	if _, ok := ctx.Deadline(); ok {
		// http.Client enforces its Timeout on a RoundTripper it does not know (this one) twice: by
		// the context's deadline and by closing Request.Cancel, on separate timers. Were the exit's
		// transport to see the channel close first, the transport could not tell the caller's
		// timeout from the exit's failure and would blame the exit. The deadline alone says it.
		out.Cancel = nil
	}
	resp, err := e.tr.RoundTrip(out)
	if err != nil {
		if r != nil {
			// Recorded here, where the error still has its type: http.Client flattens it into a
			// string when its Timeout has passed meanwhile.
			d := retry.Decide(nil, err)
			if d.Exit != "" && d.Retry {
				r.retries.Record(pool.FailedAttempt{Exit: d.Exit, Verdict: d.Verdict, Err: err})
			}
			e.mu.Lock()
			r.exit, r.verdict, r.failed = d.Exit, d.Verdict, &d
			e.mu.Unlock()
		}
		return nil, err
	}
	label := ""
	if x := transport.ExitFromResponse(resp); x != nil {
		label = x.Label()
	}
	resp.Header.Del(ExitHeader)
	if label != "" {
		resp.Header.Set(ExitHeader, label)
	}
	if r != nil {
		v, _ := transport.VerdictFromResponse(resp)
		if d := retry.DecideVerdict(v); d.Retry {
			r.retries.Record(pool.FailedAttempt{Exit: label, Verdict: v, Err: responseError(label, resp, v)})
		}
		e.mu.Lock()
		r.exit, r.verdict, r.status = label, v, resp.StatusCode
		e.mu.Unlock()
		resp.Body = &trackedBody{ReadCloser: resp.Body, e: e, id: id, r: r, label: label, ctx: req.Context()}
	}
	return resp, nil
}

func responseError(label string, resp *http.Response, v pool.Verdict) *retry.ResponseError {
	re := &retry.ResponseError{Exit: label, StatusCode: resp.StatusCode, Verdict: v}
	if resp.Request != nil && resp.Request.URL != nil {
		re.Origin = transport.OriginHost(resp.Request.URL)
	}
	return re
}

// retriesContext is a fetch's own context with the logical request's *pool.Retries: Value asks
// the carrier first, which holds nothing but the Retries (it grew from context.Background), then
// the fetch's context. The Retries so wins over any the collector's context may hold, and
// cancellation and deadlines stay the fetch's.
type retriesContext struct {
	context.Context
	carrier context.Context
}

func (c retriesContext) Value(key any) any {
	if v := c.carrier.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

// trackedBody ends a logical request that succeeded when its body has been read or closed, and
// marks one whose body died mid-read as failed.
type trackedBody struct {
	io.ReadCloser
	e      *Extension
	id     string
	r      *request
	label  string
	ctx    context.Context // the caller's: a body cut short by its end is not the exit's failure
	failed bool
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && !b.failed && b.ctx.Err() == nil {
		b.failed = true
		v := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBodyRead, ConnLevel: true}
		b.r.retries.Record(pool.FailedAttempt{Exit: b.label, Verdict: v, Err: err})
		b.e.mu.Lock()
		b.r.verdict, b.r.bodyFailed = v, true
		b.e.mu.Unlock()
	}
	return n, err
}

func (b *trackedBody) Close() error {
	err := b.ReadCloser.Close()
	b.e.mu.Lock()
	done := !b.failed && b.r.verdict.Outcome != pool.Transient && b.r.verdict.Outcome != pool.Permanent
	b.e.mu.Unlock()
	if done {
		b.e.forget(b.id) // the logical request is over: nothing to retry
	}
	return err
}

// onRequest gives each logical request an id. colly's Request.Retry copies the headers, so
// re-queues keep it; links a page visits get their own.
func (e *Extension) onRequest(r *colly.Request) {
	if r.Headers.Get(RequestHeader) == "" {
		r.Headers.Set(RequestHeader, strconv.FormatUint(e.ids.Add(1), 36))
	}
}

// onResponseHeaders names the exit on the request, and aborts a failed response colly would
// otherwise parse as content.
func (e *Extension) onResponseHeaders(resp *colly.Response) {
	if l := resp.Headers.Get(ExitHeader); l != "" {
		resp.Request.ProxyURL = l
	}
	r := e.lookup(resp.Request.Headers.Get(RequestHeader))
	if r == nil {
		return
	}
	e.mu.Lock()
	failed := r.verdict.Outcome == pool.Transient || r.verdict.Outcome == pool.Permanent
	abort := failed && r.status == resp.StatusCode && (resp.StatusCode < 203 || e.c.ParseHTTPErrorResponse)
	r.aborted = abort
	e.mu.Unlock()
	if abort {
		resp.Request.Abort()
	}
}

// onError names the exit of a failure without a response, and gives a response Attach aborted its
// status back.
func (e *Extension) onError(resp *colly.Response, err error) {
	var ae *transport.AttemptError
	if resp.Request.ProxyURL == "" && errors.As(err, &ae) {
		resp.Request.ProxyURL = ae.Exit
	}
	r := e.lookup(resp.Request.Headers.Get(RequestHeader))
	if r == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if resp.Request.ProxyURL == "" {
		resp.Request.ProxyURL = r.exit
	}
	if r.aborted && resp.StatusCode == 0 && errors.Is(err, colly.ErrAbortedAfterHeaders) {
		resp.StatusCode = r.status
	}
}
