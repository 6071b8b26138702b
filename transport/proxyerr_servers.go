package transport

import (
	"net/http"
	"strings"

	"github.com/proxybreaker/proxybreaker/pool"
)

// The proxy servers people run themselves. Each recognises only its own documented markers, never
// a Server header alone: squid adds none to the responses it forwards, and tinyproxy passes the
// origin's on.
var (
	// SquidErrors reads squid's error pages. Squid marks every response it makes itself with
	// X-Squid-Error: the error page's name and the errno, "ERR_CONNECT_FAIL 111" (squid's
	// src/errorpage.cc; the names are its error templates, errors/templates/ERR_*), or
	// "302 Access Denied" for a deny_info redirect.
	//
	//	ERR_ACCESS_DENIED, ERR_FORWARDING_DENIED, other ERR_*_DENIED   permanent  pair    proxy_denied
	//	  (http_access deny, custom deny_info pages; squid cannot say whether its ACL named the
	//	  target or this client, so each origin's pair parks on its first refusal)
	//	ERR_CACHE_ACCESS_DENIED (its authentication)                  permanent  exit    proxy_auth
	//	ERR_ACL_TIME_QUOTA_EXCEEDED                                    transient  exit    proxy_denied
	//	ERR_CONNECT_FAIL, ERR_READ_TIMEOUT, ERR_LIFETIME_EXP,          transient  pair    upstream (soft)
	//	  ERR_ZERO_SIZE_OBJECT, ERR_READ_ERROR, ERR_WRITE_ERROR,
	//	  ERR_CANNOT_FORWARD, ERR_GATEWAY_FAILURE, ERR_INVALID_RESP,
	//	  ERR_SECURE_CONNECT_FAIL
	//	ERR_DNS_FAIL                                                   neutral    origin  origin_dns
	//	ERR_INVALID_URL, ERR_INVALID_REQ, ERR_UNSUP_REQ,               neutral    origin  bad_request
	//	  ERR_UNSUP_HTTPVERSION, ERR_PROTOCOL_UNKNOWN, ERR_TOO_BIG,
	//	  ERR_CONFLICT_HOST, ERR_ONLY_IF_CACHED_MISS
	//	ERR_SHUTTING_DOWN, ERR_SOCKET_FAILURE, ERR_ICAP_FAILURE,       transient  exit    proxy_error
	//	  ERR_ESI
	//
	// Squid 4.x up to 6.2 report a name that does not resolve as ERR_CANNOT_FORWARD (CONNECT, 500)
	// or ERR_READ_ERROR (plain HTTP, 502) instead of ERR_DNS_FAIL (squid bug 5294, fixed by
	// squid-cache/squid pull request 1453): those read as upstream, and the origin guard, fed by
	// every exit alike, ends up blaming the origin. Squid forwards an origin's own X-Squid-Error
	// (an origin behind a squid of its own sends one): such a response reads the same, within the
	// pair scope every response is held to.
	SquidErrors = NewProxyErrorReader("squid", readSquid)

	// TinyproxyErrors reads tinyproxy's error pages: its own responses carry Server: tinyproxy/VERSION
	// and say what went wrong in the reason phrase (tinyproxy's src/reqs.c, indicate_http_error).
	//
	//	403 Filtered (Filter), 403 Access violation (ConnectPort)    permanent  pair    proxy_denied
	//	403 Access denied (Allow/Deny: this client)                   permanent  exit    proxy_denied
	//	401 Unauthorized (BasicAuth, wrong credentials, up to 1.11.1) permanent  exit    proxy_auth
	//	500 Unable to connect (connect or name lookup failed)         transient  pair    upstream (soft)
	//	502 Unable to connect to upstream proxy, 503 Internal error   transient  exit    proxy_error
	//	400 Bad Request, 501 Not Implemented                          neutral    origin  bad_request
	//
	// Tinyproxy does not tell a target that refuses connections from one whose name does not
	// resolve. It passes the origin's own Server header on: an origin that answers with tinyproxy's
	// Server header and one of these exact status lines is read as tinyproxy, within the pair
	// scope every response is held to.
	TinyproxyErrors = NewProxyErrorReader("tinyproxy", readTinyproxy)
)

func readSquid(r *ProxyReply) (pool.Verdict, bool) {
	xe := headerValue(r.Header, "X-Squid-Error")
	if xe == "" {
		return pool.Verdict{}, false
	}
	name, rest, _ := strings.Cut(strings.TrimSpace(xe), " ")
	switch name {
	case "ERR_CACHE_ACCESS_DENIED":
		return proxyRejectsCredentials, true
	case "ERR_ACL_TIME_QUOTA_EXCEEDED":
		return pool.Verdict{Outcome: pool.Transient, Scope: pool.ScopeExit, Class: pool.ClassProxyDenied}, true
	case "ERR_CONNECT_FAIL", "ERR_READ_TIMEOUT", "ERR_LIFETIME_EXP", "ERR_ZERO_SIZE_OBJECT", "ERR_READ_ERROR",
		"ERR_WRITE_ERROR", "ERR_CANNOT_FORWARD", "ERR_GATEWAY_FAILURE", "ERR_INVALID_RESP", "ERR_SECURE_CONNECT_FAIL":
		return upstreamUnreachable, true
	case "ERR_DNS_FAIL":
		return targetNameUnknown, true
	case "ERR_INVALID_URL", "ERR_INVALID_REQ", "ERR_UNSUP_REQ", "ERR_UNSUP_HTTPVERSION", "ERR_PROTOCOL_UNKNOWN",
		"ERR_TOO_BIG", "ERR_CONFLICT_HOST", "ERR_ONLY_IF_CACHED_MISS":
		return requestRefused, true
	case "ERR_SHUTTING_DOWN", "ERR_SOCKET_FAILURE", "ERR_ICAP_FAILURE", "ERR_ESI":
		return proxyFault, true
	}
	switch {
	case strings.HasPrefix(name, "ERR_") && strings.HasSuffix(name, "_DENIED"):
		return proxyDenied, true
	case isStatusCode(name) && strings.TrimSpace(rest) == "Access Denied":
		return proxyDenied, true // deny_info redirecting to a URL: "302 Access Denied"
	}
	return pool.Verdict{}, false
}

// isStatusCode reports whether s is three ASCII digits.
func isStatusCode(s string) bool {
	return len(s) == 3 && '1' <= s[0] && s[0] <= '5' && isDigit(s[1]) && isDigit(s[2])
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func readTinyproxy(r *ProxyReply) (pool.Verdict, bool) {
	if server := headerValue(r.Header, "Server"); len(server) < len("tinyproxy/") ||
		!strings.EqualFold(server[:len("tinyproxy/")], "tinyproxy/") {
		return pool.Verdict{}, false
	}
	reason := r.Reason()
	switch r.StatusCode {
	case http.StatusForbidden:
		switch reason {
		case "Filtered", "Access violation":
			return proxyDenied, true
		case "Access denied":
			return proxyDeniesClient, true
		}
	case http.StatusUnauthorized:
		if reason == "Unauthorized" {
			return proxyRejectsCredentials, true
		}
	case http.StatusInternalServerError:
		if reason == "Unable to connect" {
			return upstreamUnreachable, true
		}
	case http.StatusBadGateway:
		if strings.HasPrefix(reason, "Unable to connect to upstream proxy") {
			return proxyFault, true
		}
	case http.StatusServiceUnavailable:
		if reason == "Internal error" {
			return proxyFault, true
		}
	case http.StatusBadRequest:
		if reason == "Bad Request" {
			return requestRefused, true
		}
	case http.StatusNotImplemented:
		if reason == "Not Implemented" {
			return requestRefused, true
		}
	}
	return pool.Verdict{}, false
}
