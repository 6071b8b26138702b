package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Attempt is one try of a request through one exit, as a Classifier sees it.
type Attempt struct {
	Request  *http.Request  // the request as sent (its context carries the exit)
	Response *http.Response // nil when Err is set
	Err      error          // nil when a response arrived
	Exit     *pool.Exit
	Origin   string
	Now      time.Time // when the response or error arrived, for Retry-After dates
	// CallerDone reports that the caller's own context ended (cancelled or past its deadline) while
	// the attempt ran: such outcomes say nothing about the exit.
	CallerDone bool
	// TimedOut reports that the transport's own header timeout ended the attempt.
	TimedOut bool
}

// Classifier judges attempts. Classify may replace a.Response.Body (to peek at it) as long as the
// caller still reads the whole body; it must not close it. Implementations must be safe for
// concurrent use.
type Classifier interface {
	Classify(a *Attempt) pool.Verdict
}

// ClassifierFunc adapts a function to the Classifier interface.
type ClassifierFunc func(a *Attempt) pool.Verdict

// Classify calls f(a).
func (f ClassifierFunc) Classify(a *Attempt) pool.Verdict { return f(a) }

// DefaultClassifier is the classifier a Transport uses unless told otherwise. Wrap it to change a
// few cases and defer the rest:
//
//	transport.ClassifierFunc(func(a *transport.Attempt) pool.Verdict {
//		if a.Response != nil && a.Response.StatusCode == 418 {
//			return pool.Verdict{Outcome: pool.Transient, Class: "teapot"}
//		}
//		return transport.DefaultClassifier.Classify(a)
//	})
var DefaultClassifier Classifier = &StandardClassifier{
	Detectors: DefaultDetectors, PeekLimit: DefaultPeekLimit, ProxyErrors: DefaultProxyErrorReaders,
}

// StandardClassifier is the classification table of the package documentation, with its soft-block
// detectors, peek limit and proxy error readers as fields.
type StandardClassifier struct {
	// Detectors recognise WAF challenge and block pages. Nil disables soft-block detection.
	Detectors []Detector
	// ProxyErrors recognise the error answers proxies make themselves (squid, tinyproxy, RFC 9209
	// Proxy-Status, gateways), on responses and on answers to CONNECT; the first that recognises an
	// answer gives its verdict. On a response, which anything between the exit and the origin may
	// have made, a verdict that would blame the exit for every origin is narrowed to the pair,
	// credentials excepted. Nil disables them: a proxy's answer then reads by its status alone, as
	// an origin's would (a CONNECT answered 403 is still the pair's).
	ProxyErrors []ProxyErrorReader
	// PeekLimit bounds how much of a suspicious body is read; 0 means DefaultPeekLimit.
	PeekLimit int
}

// Classify implements Classifier.
func (c *StandardClassifier) Classify(a *Attempt) pool.Verdict {
	if a.Err != nil {
		return c.classifyError(a)
	}
	return c.classifyResponse(a)
}

func (c *StandardClassifier) classifyResponse(a *Attempt) pool.Verdict {
	resp := a.Response
	code := resp.StatusCode
	if code == http.StatusProxyAuthRequired {
		return pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	}
	if code >= http.StatusMultipleChoices && len(c.ProxyErrors) > 0 {
		if v, ok := c.readProxyError(&ProxyReply{StatusCode: code, Status: resp.Status, Header: resp.Header}, a.Now); ok {
			return v
		}
	}
	var ra time.Duration
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable || code == http.StatusForbidden {
		ra, _ = ParseRetryAfter(resp.Header.Get("Retry-After"), a.Now)
	}
	if len(c.Detectors) > 0 && suspicious(resp) {
		limit := c.PeekLimit
		if limit <= 0 {
			limit = DefaultPeekLimit
		}
		body, complete, err := peekBody(resp, limit)
		if err != nil {
			if a.CallerDone {
				return pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}
			}
			return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBodyRead, ConnLevel: true}
		}
		s := Sample{Response: resp, Body: body, Lower: lowerASCII(body), Complete: complete}
		for _, d := range c.Detectors {
			if d.Detect(&s) {
				return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, RetryAfter: ra, Detector: d.Name()}
			}
		}
	}
	switch {
	case code == http.StatusTooManyRequests:
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: ra}
	case code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx, Soft: true, RetryAfter: ra}
	case code >= 500:
		return pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassOriginError}
	case code >= 400:
		return pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx, Suspect: code == http.StatusForbidden}
	}
	return pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}
}

func lowerASCII(b []byte) []byte {
	if b == nil {
		return nil
	}
	l := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		l[i] = c
	}
	return l
}

// originDNSError marks a failure to resolve the origin's name locally (socks5://), as opposed to
// the proxy's own name.
type originDNSError struct{ err error }

func (e *originDNSError) Error() string { return "transport: origin name lookup: " + e.err.Error() }
func (e *originDNSError) Unwrap() error { return e.err }

// socksAuthError marks a SOCKS5 proxy that rejected the exit's credentials (RFC 1929 status other
// than success) or accepted none of the authentication methods offered: the SOCKS form of a 407.
// The base transport recognises it from the proxy's replies, since x/net/proxy reports it only as
// message text.
type socksAuthError struct {
	exit string // the exit's label
	err  error
}

func (e *socksAuthError) Error() string {
	return "transport: exit " + e.exit + ": socks5 proxy rejected the credentials: " + e.err.Error()
}
func (e *socksAuthError) Unwrap() error { return e.err }

func (c *StandardClassifier) classifyError(a *Attempt) pool.Verdict {
	err := a.Err
	if a.CallerDone {
		return pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}
	}
	if a.TimedOut {
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
	}
	if headerTooLarge(err) {
		// The origin sent more header than the base transport accepts (or broke HTTP/2 framing, which
		// net/http reports the same way): its doing, through every exit alike. Blame no exit, and let
		// no retry fetch it again through another.
		return pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginError}
	}
	if isEgressRejection(err) {
		// The gateway assigned an IP the origin has banned: the request never left, the session is
		// retired already (egress.go).
		return pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassNotAttempted}
	}
	if IsLocalExhaustion(err) {
		// This process ran out of descriptors or buffers before anything left: no exit or
		// origin is to blame, and judging it as theirs would open every pair it touched.
		return pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassNotAttempted}
	}
	var pce *ProxyConnectError
	if errors.As(err, &pce) {
		return c.classifyConnect(pce, a.Now)
	}
	var sae *socksAuthError
	if errors.As(err, &sae) {
		return pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	}
	var odns *originDNSError
	if errors.As(err, &odns) {
		return pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginDNS}
	}
	var odial *originDialError
	if errors.As(err, &odial) {
		// A direct exit's dial to the origin (direct.go): no proxy to blame.
		return upstreamUnreachable
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		// Every connection dials the proxy, so a failed lookup is the proxy's name.
		if dnsErr.IsTimeout {
			return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
		}
		return pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyDNS}
	}
	if dialRefused(err) {
		return pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyRefused}
	}
	if isTimeout(err) {
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		// Refused after the dial (a SOCKS proxy relaying the target's refusal).
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassConnection, ConnLevel: true}
	}
	var certErr *tls.CertificateVerificationError
	var unknownAuth x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var alert tls.AlertError
	var recErr tls.RecordHeaderError
	if errors.As(err, &certErr) || errors.As(err, &unknownAuth) || errors.As(err, &hostErr) ||
		errors.As(err, &alert) || errors.As(err, &recErr) {
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTLS, ConnLevel: true}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, net.ErrClosed) {
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassConnection, ConnLevel: true}
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		// A context we did not recognise as the caller's: treat as the caller's.
		return pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}
	}
	return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassError}
}

// classifyConnect judges a CONNECT the proxy answered with something other than 200. Only the
// proxy answers a CONNECT, so its markers are read at every scope.
func (c *StandardClassifier) classifyConnect(pce *ProxyConnectError, now time.Time) pool.Verdict {
	switch pce.StatusCode {
	case http.StatusProxyAuthRequired, http.StatusUnauthorized:
		// A 401 is the proxy's credential check too: tinyproxy up to 1.11.1 answers wrong
		// credentials 401 (tinyproxy issue #532).
		return proxyRejectsCredentials
	}
	if len(c.ProxyErrors) > 0 {
		r := ProxyReply{StatusCode: pce.StatusCode, Status: pce.Status, Header: pce.Header, Connect: true}
		if v, ok := c.readProxyError(&r, now); ok {
			return v
		}
	}
	switch pce.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		// The proxy tried the target and failed: the target's trouble, or this exit's route to it.
		return upstreamUnreachable
	case http.StatusForbidden:
		// The proxy refuses this target (its ACL, a filter, a port it does not allow): the exit
		// serves other origins.
		return proxyDenied
	}
	return pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyConnect}
}

// dialRefused reports whether err holds a refused dial. Every connection dials the proxy, so the
// refusal is the proxy's. The dial's *net.OpError is rarely the outermost one: net/http wraps it in
// a "proxyconnect" *net.OpError and x/net/proxy in a "socks connect" one, so the whole chain is
// searched, not only the first *net.OpError.
func dialRefused(err error) bool {
	for err != nil {
		if op, ok := err.(*net.OpError); ok && op.Op == "dial" && errors.Is(op.Err, syscall.ECONNREFUSED) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if dialRefused(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// net/http's errors for a response whose headers exceed http.Transport.MaxResponseHeaderBytes.
// net/http gives them no type or sentinel, so they are the one place classification reads error
// text. TestResponseHeaderLimit pins the HTTP/1 one and the two HTTP/2 connection errors through a
// real base transport and proxy, so a Go release that rewords them fails the test instead of
// silently blaming exits again; the rarer HTTP/2 stream error (a block that overflows within its
// last frame is hard to produce on purpose) is pinned by text in
// TestResponseHeaderLimitClassification, copied from net/http's h2_bundle.go.
const (
	// HTTP/1: "net/http: server response headers exceeded 262144 bytes; aborted".
	headerTooLargeH1 = "net/http: server response headers exceeded "
	// HTTP/2, a header block that ends within one frame past the limit: a stream error that says so.
	headerTooLargeH2Stream, headerTooLargeH2List = "stream error: ", "; http2: response header list larger than advertised limit"
	// HTTP/2, a header block that runs on into CONTINUATION frames past the limit (the usual case:
	// frames carry 16 KiB), or a header field longer than the limit, which the HPACK decoder
	// refuses: net/http ends the whole connection with PROTOCOL_ERROR or COMPRESSION_ERROR. TLS
	// runs end to end with the origin through the tunnel and net/http never speaks HTTP/2 to a
	// proxy, so whatever else makes net/http end a connection with these codes was the origin's
	// doing too; the other streams on the connection end with the same error and the same verdict.
	headerTooLargeH2Conn, headerTooLargeH2Field = "connection error: PROTOCOL_ERROR", "connection error: COMPRESSION_ERROR"
)

// headerTooLarge reports whether err, or an error it wraps, is net/http refusing a response's
// headers as too large. Each error's whole message is matched from its start, so text an origin or
// a proxy put inside another error (net/http quotes a malformed status line) cannot pass for it.
func headerTooLarge(err error) bool {
	for err != nil {
		msg := err.Error()
		if strings.HasPrefix(msg, headerTooLargeH1) || msg == headerTooLargeH2Conn || msg == headerTooLargeH2Field ||
			strings.HasPrefix(msg, headerTooLargeH2Stream) && strings.HasSuffix(msg, headerTooLargeH2List) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if headerTooLarge(e) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

func isTimeout(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, errHeaderTimeout)
}

// IsLocalExhaustion reports whether err is this host running out of a local resource (open
// files, socket buffers, memory) rather than anything a proxy or an origin did. The default
// classifier judges such a failure neutral (ClassNotAttempted), and so should any code that judges
// its own dials (proxybreakerd's tunnels do).
func IsLocalExhaustion(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
		errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM)
}
