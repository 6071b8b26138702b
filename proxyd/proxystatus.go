package proxyd

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// The daemon names the exit and the verdict of every answer in an RFC 9209 Proxy-Status member,
// added to the answer's Proxy-Status list (after the members of proxies nearer the origin):
//
//	Proxy-Status: proxybreakerd; next-hop="dc-1"; received-status=403; details="transient pair blocked cloudflare"
//	Proxy-Status: proxybreakerd; error=proxy_internal_response; details="pool: no healthy exit for shop.example: …"
//
// next-hop is the exit's label (a redacted URL unless the list names it: never a password);
// received-status is the status the exit answered (a plain-HTTP response, a CONNECT reply);
// details is the verdict — outcome, scope, class and detector — or why nothing was sent; error is
// the RFC 9209 error type when the daemon answers an error itself.

// ProxyStatusName is the daemon's member name in Proxy-Status.
const ProxyStatusName = "proxybreakerd"

// proxyStatus is one Proxy-Status member of the daemon's.
type proxyStatus struct {
	exit     string // the exit's label; "" when none was picked
	received int    // the status the exit answered; 0: none
	errType  string // RFC 9209 error type; "" for a success
	details  string
}

// String renders the member as a Structured Field item with parameters (RFC 8941).
func (ps proxyStatus) String() string {
	var b strings.Builder
	b.WriteString(ProxyStatusName)
	if ps.errType != "" {
		b.WriteString("; error=" + ps.errType)
	}
	if ps.exit != "" {
		b.WriteString("; next-hop=" + sfString(ps.exit))
	}
	if ps.received != 0 {
		b.WriteString("; received-status=" + strconv.Itoa(ps.received))
	}
	if ps.details != "" {
		b.WriteString("; details=" + sfString(ps.details))
	}
	return b.String()
}

// add appends the member to h's Proxy-Status list.
func (ps proxyStatus) add(h http.Header) { h.Add("Proxy-Status", ps.String()) }

// sfString quotes s as an RFC 8941 sf-string: printable ASCII, '"' and '\' escaped; any other
// byte becomes '?'.
func sfString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// verdictDetails describes a verdict in a few words: "success ok", "transient pair blocked
// cloudflare retry-after=30s".
func verdictDetails(v pool.Verdict) string {
	var b strings.Builder
	b.WriteString(v.Outcome.String())
	if v.Outcome == pool.Transient || v.Outcome == pool.Permanent {
		b.WriteString(" " + v.Scope.String())
	}
	if v.Class != "" {
		b.WriteString(" " + string(v.Class))
	}
	if v.Detector != "" {
		b.WriteString(" " + v.Detector)
	}
	if v.RetryAfter > 0 {
		fmt.Fprintf(&b, " retry-after=%v", v.RetryAfter)
	}
	return b.String()
}

// errorType returns the RFC 9209 error type for a failed attempt's class.
func errorType(c pool.Class) string {
	switch c {
	case pool.ClassTimeout:
		return "connection_timeout"
	case pool.ClassConnection, pool.ClassBodyRead:
		return "connection_terminated"
	case pool.ClassTLS:
		return "tls_protocol_error"
	case pool.ClassProxyRefused:
		return "connection_refused"
	case pool.ClassProxyDNS, pool.ClassOriginDNS:
		return "dns_error"
	case pool.ClassProxyAuth, pool.ClassProxyConnect, pool.ClassProxyDenied, pool.ClassProxyError:
		return "http_request_error"
	case pool.ClassUpstream:
		return "destination_unavailable"
	case pool.ClassBadRequest:
		return "http_request_denied"
	}
	return "proxy_internal_error"
}

// failureStatus returns the status the daemon answers a failed attempt of class c with: 504 for
// timeouts, else 502.
func failureStatus(c pool.Class) int {
	if c == pool.ClassTimeout {
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// refusal is an answer the daemon gives itself, with nothing relayed: a pick the pool refused, a
// bad option, a forbidden target, missing credentials.
type refusal struct {
	status     int
	errType    string // RFC 9209 error type
	reason     string // the body and the Proxy-Status details; no credential, no session id
	exit       string // the exit's label when one was tried
	received   int    // the status the exit answered, when it did
	retryAfter time.Duration
	// socks is the SOCKS5 reply code for the same refusal.
	socks byte
}

func (r *refusal) Error() string { return r.reason }

func (r *refusal) proxyStatus() proxyStatus {
	return proxyStatus{exit: r.exit, received: r.received, errType: r.errType, details: r.reason}
}

// pickRefusal turns a pick's error into the daemon's answer: 503 with Retry-After while every
// matching exit cools or the origin is held down, 400 for options no exit matches.
func pickRefusal(err error) *refusal {
	r := &refusal{status: http.StatusServiceUnavailable, errType: "proxy_internal_response", reason: err.Error(), socks: socksGeneralFailure}
	var nh *pool.NoHealthyExitError
	var ou *pool.OriginUnhealthyError
	var th *pool.ThrottledError
	var nm *pool.NoMatchingExitError
	switch {
	case errors.As(err, &nh):
		r.retryAfter = nh.RetryIn
	case errors.As(err, &ou):
		r.errType, r.retryAfter = "destination_unavailable", ou.RetryIn
		r.socks = socksHostUnreachable
	case errors.As(err, &th):
		r.retryAfter = th.RetryIn
	case errors.As(err, &nm):
		r.status, r.socks = http.StatusBadRequest, socksNotAllowed
	}
	return r
}

// writeRefusal answers an HTTP request with r: status, Proxy-Status, Retry-After, and the reason
// as a plain-text body.
func writeRefusal(w http.ResponseWriter, r *refusal) {
	h := w.Header()
	r.proxyStatus().add(h)
	if r.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((r.retryAfter+time.Second-1)/time.Second)))
	}
	if r.status == http.StatusProxyAuthRequired {
		h.Set("Proxy-Authenticate", `Basic realm="proxybreakerd"`)
	}
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(r.status)
	fmt.Fprintln(w, "proxybreakerd: "+r.reason)
}
