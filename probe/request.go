package probe

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// phase is how far a probe got. Phases only move forward.
type phase int32

const (
	phaseQueued  phase = iota // not started
	phaseConnect              // dialing the proxy
	phaseProxy                // connected to the proxy: CONNECT or SOCKS handshake, or the request
	phaseTLS                  // a TLS handshake (with the origin through the tunnel, or an https proxy)
	phaseHeaders              // connection ready: awaiting the response headers
	phaseBody                 // reading the body
)

var phaseNames = [...]string{"queued", "connect", "proxy", "tls", "headers", "body"}

func (ph phase) String() string {
	if ph >= 0 && int(ph) < len(phaseNames) {
		return phaseNames[ph]
	}
	return "unknown"
}

// advance moves s's phase forward to ph (never back: a reused connection reports GotConn without
// a dial, and happy eyeballs may report a second ConnectDone).
func (s *slot) advance(ph phase) {
	for {
		cur := s.phase.Load()
		if int32(ph) <= cur || s.phase.CompareAndSwap(cur, int32(ph)) {
			return
		}
	}
}

// probeTimeout is a timeout of the probe's own making: a net.Error whose Timeout() is true, so the
// classifier calls it a timeout, as it does the transport's header timeout.
type probeTimeout struct{ msg string }

func (e *probeTimeout) Error() string   { return e.msg }
func (e *probeTimeout) Timeout() bool   { return true }
func (e *probeTimeout) Temporary() bool { return true }

var (
	errHeaderTimeout error = &probeTimeout{"probe: timeout awaiting response headers through the exit"}
	errBodyTimeout   error = &probeTimeout{"probe: timeout reading the response body"}
)

// newResult is the Result of probe c (exit × target) before anything is known.
func (p *Prober) newResult(c cell) Result {
	t := &p.targets[c.target]
	return Result{Exit: p.exits[c.exit].Label(), Target: t.shown, Origin: t.origin}
}

// cutVerdict is the verdict of a probe cut short by the deadline or the caller: as for the
// transport, the caller's own deadline says nothing about the exit.
func cutVerdict() (pool.Outcome, pool.Class) {
	return pool.Neutral, pool.ClassCanceled
}

// cutKind says whether ctx ended by a deadline (the run's, or the caller's) or was cancelled.
func cutKind(ctx context.Context) string {
	cause := context.Cause(ctx)
	if errors.Is(cause, errDeadline) || errors.Is(cause, context.DeadlineExceeded) {
		return KindDeadline
	}
	return KindCanceled
}

// probe sends one GET of c's target through c's exit and judges it as the transport would. It
// publishes its progress in s as it goes, for Run to read if the deadline cuts it short. It
// builds the exit's transport for itself and closes its connections before it returns.
func (p *Prober) probe(ctx context.Context, s *slot, c cell) (res Result) {
	res = p.newResult(c)
	if ctx.Err() != nil {
		res.ErrorKind, res.Phase = cutKind(ctx), phaseQueued.String()
		res.Outcome, res.Class = cutVerdict()
		return res
	}
	exit, tg := p.exits[c.exit], &p.targets[c.target]
	rt, err := transport.NewExitTransport(exit, p.tmpl, p.cfg.Resolver)
	if err != nil { // New checked the exit: this does not happen
		res.Outcome, res.Class, res.ErrorKind, res.Error = pool.Neutral, pool.ClassError, string(pool.ClassError), err.Error()
		return res
	}
	var conns connLog
	conns.wrap(rt)
	defer account(&res, &conns, exit) // spend.go; once the connections are closed (TLS's close counts)
	defer rt.CloseIdleConnections()
	start := time.Now()
	s.start.Store(start.UnixNano())
	s.advance(phaseConnect)
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	trace := &httptrace.ClientTrace{
		ConnectDone: func(_, _ string, err error) {
			if err == nil {
				s.advance(phaseProxy)
			}
		},
		TLSHandshakeStart: func() { s.advance(phaseTLS) },
		GotConn:           func(httptrace.GotConnInfo) { s.advance(phaseHeaders) },
	}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(rctx, trace), http.MethodGet, tg.raw, nil)
	if err != nil { // the URL parsed in New: this does not happen
		res.Outcome, res.Class, res.ErrorKind, res.Error = pool.Neutral, pool.ClassError, string(pool.ClassError), err.Error()
		return res
	}
	req.Header.Set("User-Agent", p.cfg.UserAgent)

	// The header timeout runs from the start until the headers are in and the classifier has
	// peeked at a suspicious body, as the transport's WithHeaderTimeout does.
	var timer *time.Timer
	if p.cfg.HeaderTimeout > 0 {
		timer = time.AfterFunc(p.cfg.HeaderTimeout, func() { cancel(errHeaderTimeout) })
	}
	resp, err := rt.RoundTrip(req)
	res.LatencyMS = msSince(start)
	if resp != nil && err != nil {
		resp.Body.Close()
		resp = nil
	}
	at := &transport.Attempt{Request: req, Response: resp, Err: err, Exit: exit, Origin: tg.origin, Now: time.Now()}
	at.CallerDone = ctx.Err() != nil
	at.TimedOut = context.Cause(rctx) == errHeaderTimeout
	if at.TimedOut && err != nil {
		err = errHeaderTimeout // not the context.Canceled net/http reports: the caller cancelled nothing
		at.Err = err
	}
	v := p.cfg.Classifier.Classify(at)
	resp = at.Response
	if timer != nil && !timer.Stop() && resp != nil && ctx.Err() == nil {
		// The header timeout fired while the classifier peeked at the body: the body is dead.
		resp.Body.Close()
		resp, err = nil, errHeaderTimeout
		at.TimedOut = true
		v = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
	}
	res.Outcome, res.Scope, res.Class = v.Outcome, v.Scope, v.Class
	res.Blocked, res.Detector = v.Class == pool.ClassBlocked, v.Detector
	res.RetryAfterMS = v.RetryAfter.Milliseconds()
	if err != nil {
		res.Error = scrub(err, exit)
		res.Phase = phase(s.phase.Load()).String()
		switch {
		case ctx.Err() != nil:
			res.ErrorKind = cutKind(ctx)
		case at.TimedOut || v.Class == pool.ClassTimeout:
			res.ErrorKind = KindTimeout
		default:
			res.ErrorKind = string(v.Class)
		}
		return res
	}
	res.Status = resp.StatusCode
	s.latency.Store(int64(time.Since(start)))
	s.status.Store(int32(resp.StatusCode))
	if v.Outcome != pool.Success {
		// The verdict is final at the headers, as for live traffic: nothing to read.
		resp.Body.Close()
		return res
	}

	// A success is confirmed when its body (up to BodyLimit) has arrived: a slow-loris body ends
	// at the body timeout or the deadline, whichever comes first.
	s.advance(phaseBody)
	var btimer *time.Timer
	if p.cfg.BodyTimeout > 0 {
		btimer = time.AfterFunc(p.cfg.BodyTimeout, func() { cancel(errBodyTimeout) })
	}
	_, rerr := io.Copy(io.Discard, io.LimitReader(resp.Body, p.cfg.BodyLimit))
	if btimer != nil {
		btimer.Stop()
	}
	resp.Body.Close() // closing early, past BodyLimit, is a success, as for live traffic
	if rerr != nil {
		res.Phase = phaseBody.String()
		switch {
		case ctx.Err() != nil:
			res.ErrorKind, res.Error = cutKind(ctx), scrub(rerr, exit)
			res.Outcome, res.Class = cutVerdict()
		case context.Cause(rctx) == errBodyTimeout:
			res.ErrorKind, res.Error = KindTimeout, errBodyTimeout.Error()
			res.Outcome, res.Class = pool.Transient, pool.ClassBodyRead
		default:
			res.ErrorKind, res.Error = KindBodyRead, scrub(rerr, exit)
			res.Outcome, res.Class = pool.Transient, pool.ClassBodyRead
		}
	}
	return res
}

// scrub returns err's text with the exit's password, plain or escaped, replaced by "xxxxx".
func scrub(err error, e *pool.Exit) string {
	msg := err.Error()
	u := e.ProxyURL()
	if u == nil || u.User == nil { // a direct exit has no URL, hence no password
		return msg
	}
	if pass, ok := u.User.Password(); ok && pass != "" {
		user := u.User.Username()
		msg = strings.ReplaceAll(msg, u.User.String(), user+":xxxxx") // the escaped form
		msg = strings.ReplaceAll(msg, pass, "xxxxx")
	}
	return msg
}
