package transport

import (
	"net/http"
	"strings"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Who failed: an error response may be the origin's, or the proxy's own — squid's 403 for a target
// its ACL refuses, tinyproxy's 500 when it cannot connect, a gateway's 503 when it has no exit node
// left. ProxyErrorReaders recognise the proxy's own answers by the markers each kind of proxy
// documents, so that its refusal is not taken for the origin's answer (a success) nor its failure
// for the origin's 5xx. docs/judgement.md lists every marker, its verdict and its source.

// ProxyReply is what a ProxyErrorReader is shown: the status line and headers of an answer that may
// be the proxy's own. Readers must not modify it.
type ProxyReply struct {
	StatusCode int
	// Status is the status line after the protocol version, reason phrase included: "403 Filtered".
	// tinyproxy says what went wrong there.
	Status string
	Header http.Header
	// Connect reports that this is the proxy's answer to a CONNECT: only the proxy could have made
	// it. Otherwise it is a response to a request, which the exit proxy may have made, or anything
	// between it and the origin, the origin included.
	Connect bool
}

// Reason returns the status line's reason phrase: "Filtered" for "403 Filtered", "" when there is
// none.
func (r *ProxyReply) Reason() string {
	_, reason, _ := strings.Cut(r.Status, " ")
	return strings.TrimSpace(reason)
}

// ProxyErrorReader recognises the error responses one kind of proxy makes itself, by markers that
// kind of proxy documents, and says what they mean: ReadProxyError returns the verdict and true, or
// false when r is not such a response (then the rest of the classification table applies).
//
// A reader only sees answers with a status of 300 or more, and never a 407 (nor a 401 answering a
// CONNECT), which is always the proxy's credential check (permanent, exit scope). On a response,
// an exit-scoped verdict other than proxy_auth is narrowed to the pair (see
// StandardClassifier.ProxyErrors). Implementations must be safe for concurrent
// use, must not keep r, and should only look at headers: they run on every error response.
type ProxyErrorReader interface {
	Name() string
	ReadProxyError(r *ProxyReply) (pool.Verdict, bool)
}

type proxyErrorFunc struct {
	name string
	fn   func(*ProxyReply) (pool.Verdict, bool)
}

func (p proxyErrorFunc) Name() string                                      { return p.name }
func (p proxyErrorFunc) ReadProxyError(r *ProxyReply) (pool.Verdict, bool) { return p.fn(r) }

// NewProxyErrorReader returns a ProxyErrorReader named name that reads responses with fn.
func NewProxyErrorReader(name string, fn func(r *ProxyReply) (pool.Verdict, bool)) ProxyErrorReader {
	return proxyErrorFunc{name, fn}
}

// DefaultProxyErrorReaders are the proxy error readers of DefaultClassifier, tried in this order;
// the first that recognises a response wins.
var DefaultProxyErrorReaders = []ProxyErrorReader{
	SquidErrors, TinyproxyErrors, ProxyStatusErrors, ZyteErrors, BrightDataErrors, OxylabsErrors,
}

// The verdicts proxy error readers give.
var (
	// proxyDenied: the proxy refuses this target (its ACL, a filter, a port it does not allow, a
	// target its provider restricts). The exit serves other origins.
	proxyDenied = pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopePair, Class: pool.ClassProxyDenied}
	// proxyDeniesClient: the proxy refuses this client, whatever the target.
	proxyDeniesClient = pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyDenied}
	// proxyRejectsCredentials: the proxy's credential check, like a 407.
	proxyRejectsCredentials = pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	// upstreamUnreachable: the proxy could not reach the target, or lost it: the target's trouble
	// or this exit's route to it. Counts half, like an origin's 502, and feeds the origin guard.
	upstreamUnreachable = pool.Verdict{Outcome: pool.Transient, Class: pool.ClassUpstream, Soft: true}
	// proxyFault: the proxy failed on its own side, for every target: overloaded, out of exit
	// nodes, its own next proxy unreachable, an internal error.
	proxyFault = pool.Verdict{Outcome: pool.Transient, Scope: pool.ScopeExit, Class: pool.ClassProxyError}
	// targetNameUnknown: the target's name does not resolve: says nothing about the exit, and
	// another exit would get the same.
	targetNameUnknown = pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginDNS}
	// requestRefused: the proxy refused the request itself (malformed, unsupported, too large): the
	// caller's, not the exit's, and another exit would refuse it too.
	requestRefused = pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassBadRequest}
	// targetTooLarge: the proxy refused what the target sent (too large, badly encoded): the
	// origin's doing, through every exit alike.
	targetTooLarge = pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginError}
)

// readProxyError asks c's readers about r and returns the first verdict. The verdict is made
// consistent (Soft only for transient failures, Detector set exactly for blocks), a transient one
// takes the answer's Retry-After, and — unless r is an answer to a CONNECT — one that blames the
// exit for every origin is narrowed to the pair, credentials excepted (like a 407): anything
// between the exit and the origin, the origin included, could have written the markers of a plain
// response, and what a forged marker can then cost is bounded to that origin's own pairs.
func (c *StandardClassifier) readProxyError(r *ProxyReply, now time.Time) (pool.Verdict, bool) {
	for _, rd := range c.ProxyErrors {
		v, ok := rd.ReadProxyError(r)
		if !ok {
			continue
		}
		if !r.Connect && v.Scope == pool.ScopeExit && v.Class != pool.ClassProxyAuth {
			v.Scope = pool.ScopePair
		}
		if v.Outcome != pool.Transient {
			v.Soft, v.RetryAfter = false, 0
		} else if v.RetryAfter <= 0 {
			v.RetryAfter, _ = ParseRetryAfter(headerValue(r.Header, "Retry-After"), now)
		}
		switch {
		case v.Class != pool.ClassBlocked:
			v.Detector = ""
		case v.Detector == "":
			v.Detector = rd.Name()
		}
		return v, true
	}
	return pool.Verdict{}, false
}
