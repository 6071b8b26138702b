package pool

import (
	"fmt"
	"time"
)

// Outcome is what an attempt says about the exit that carried it.
type Outcome uint8

// The outcomes. The zero value is Success.
const (
	Success   Outcome = iota // the exit carried the request (whatever the origin answered)
	Transient                // the exit is out of favour for now: count it, reheat it later
	Permanent                // the exit is broken: park it
	Neutral                  // says nothing about the exit; free the permit, count nothing
)

var outcomeNames = [...]string{"success", "transient", "permanent", "neutral"}

// String returns "success", "transient", "permanent" or "neutral".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(?)"
}

// MarshalText encodes an Outcome as its String form.
func (o Outcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// Scope is which breaker a verdict is for.
type Scope uint8

// The scopes. The zero value is ScopePair.
const (
	ScopePair   Scope = iota // this exit for this origin
	ScopeExit                // this exit for every origin: auth rejected, gateway refused, proxy DNS
	ScopeOrigin              // this origin through every exit
)

// scopeNone stands for no scope where a function returns one only sometimes.
const scopeNone Scope = 255

var scopeNames = [...]string{"pair", "exit", "origin"}

// String returns "pair", "exit" or "origin".
func (s Scope) String() string {
	if int(s) < len(scopeNames) {
		return scopeNames[s]
	}
	return "scope(?)"
}

// MarshalText encodes a Scope as its String form.
func (s Scope) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText decodes the String form of a Scope.
func (s *Scope) UnmarshalText(b []byte) error {
	for i, name := range scopeNames {
		if string(b) == name {
			*s = Scope(i)
			return nil
		}
	}
	return fmt.Errorf("pool: unknown scope %q", b)
}

// Class is a short, low-cardinality name for what happened, fit for a metric label.
type Class string

// The classes DefaultClassifier produces.
const (
	ClassOK           Class = "ok"            // 2xx or 3xx
	ClassOrigin4xx    Class = "origin_4xx"    // a 4xx the origin sent (404 included): the exit did its job
	ClassTimeout      Class = "timeout"       // dial, TLS, CONNECT or response-header timeout
	ClassConnection   Class = "connection"    // reset, EOF, tunnel dropped before a response
	ClassBodyRead     Class = "body_read"     // the body died mid-read
	ClassTLS          Class = "tls"           // the TLS handshake with the origin failed
	ClassRateLimited  Class = "rate_limited"  // 429
	ClassBlocked      Class = "blocked"       // a WAF challenge or block page
	ClassOrigin5xx    Class = "origin_5xx"    // 502, 503, 504: softened (counts half)
	ClassOriginError  Class = "origin_error"  // 500 and other 5xx: the origin's own bug
	ClassProxyAuth    Class = "proxy_auth"    // 407 from the proxy
	ClassProxyRefused Class = "proxy_refused" // the proxy gateway refused the connection
	ClassProxyDNS     Class = "proxy_dns"     // the proxy's host name does not resolve
	ClassProxyConnect Class = "proxy_connect" // the proxy refused the CONNECT before reaching the target
	ClassUpstream     Class = "upstream"      // the proxy could not reach the target (CONNECT 502/503/504, its own error page)
	ClassProxyDenied  Class = "proxy_denied"  // the proxy refused the request by its own rules (ACL, filter, port, restricted target)
	ClassProxyError   Class = "proxy_error"   // the proxy failed on its own side (internal error, overloaded, no exit nodes)
	ClassBadRequest   Class = "bad_request"   // the proxy refused the request itself as malformed, unsupported or too large
	ClassOriginDNS    Class = "origin_dns"    // the origin's name does not resolve (socks5 local DNS)
	ClassCanceled     Class = "canceled"      // the caller cancelled or its deadline passed
	ClassError        Class = "error"         // any other failure
	ClassNotAttempted Class = "not_attempted" // the request never left (no exit, origin unhealthy)
)

// Verdict is a Classifier's judgement of one attempt. Its flags sit beside Outcome and Scope, so
// that it packs into 48 bytes (it lives in each transport attempt).
type Verdict struct {
	Outcome Outcome
	Scope   Scope
	// Soft makes a Transient verdict count half toward the pair's breaker.
	Soft bool
	// ConnLevel marks connection-level trouble (timeouts, resets, dropped tunnels), which also counts
	// toward the exit's own failure rate across all origins.
	ConnLevel bool
	// Suspect marks a Success that may be the origin refusing this exit rather than answering the
	// request: a plain 403, with no challenge or proxy marker, which a site sends both to an IP it
	// has banned and to every client for a page nobody may see. The pool judges it at Report time
	// by the origin's SuspectPolicy (OriginSettings.Suspect): by default, by whether the origin is
	// serving other exits meanwhile (see SuspectEvidence). A Suspect verdict judged a block counts
	// as Transient, ClassBlocked, for the pair, and keeps the flag; one judged the site's answer
	// stays the Success it was. Only a Success at pair scope is judged; on other verdicts the flag
	// does nothing.
	Suspect bool
	Class   Class
	// RetryAfter is the origin's Retry-After, when it sent one (429, 503, challenge pages).
	RetryAfter time.Duration
	// Detector names the soft-block detector that matched, for ClassBlocked ("forbidden" when the
	// pool judged a Suspect answer a block).
	Detector string
}
