package statuspage

import "github.com/proxybreaker/proxybreaker/pool"

// hints says, per failure class, what an operator can do about it: one short sentence for a table
// cell, cause first, then the thing to check. Every pool.Class has one (TestEveryClassHasAHint
// reads the pool package's source to make sure a new class gets one).
var hints = map[pool.Class]string{
	pool.ClassOK:           "no failure: nothing to do",
	pool.ClassOrigin4xx:    "the site answered 4xx (404 and the like) and the exit did its job: check the URLs requested",
	pool.ClassTimeout:      "the proxy or the site did not answer in time: a slow or overloaded exit; check the provider's status, or raise the timeouts",
	pool.ClassConnection:   "the connection dropped before a response: an unstable exit, or the provider cut the tunnel",
	pool.ClassBodyRead:     "the response broke off, stalled or trickled mid-body: an unstable or throttled exit; check the provider's bandwidth limits",
	pool.ClassTLS:          "the TLS handshake with the site failed: the proxy may intercept TLS, or the site rejects this client",
	pool.ClassRateLimited:  "the site rate-limits this IP: lower PerPair (ratelimit.Limits) or spread the load over more exits",
	pool.ClassBlocked:      "WAF challenge: this IP is flagged for this site; rotate it or use a cleaner (residential) exit",
	pool.ClassOrigin5xx:    "the site is overloaded (502/503/504): the site's trouble, not the exit's; wait it out",
	pool.ClassOriginError:  "the site failed with a 5xx of its own: the site's bug; check the request it fails on",
	pool.ClassProxyAuth:    "the provider rejected the credentials: check user/password or IP allowlist",
	pool.ClassProxyRefused: "gateway down or wrong port: check the proxy's host:port and the provider's status page",
	pool.ClassProxyDNS:     "the proxy's host name does not resolve: check the host name in the proxy list",
	pool.ClassProxyConnect: "the proxy refused the CONNECT: the plan may not allow this site or port; check the provider's allowed targets",
	pool.ClassUpstream:     "the proxy could not reach the site (its own error page, or CONNECT 502/503/504): the provider's network, or the site, is down for this exit",
	pool.ClassProxyDenied:  "the proxy's own rules refuse this site (ACL, filter, port): allow the site in the proxy's or the plan's settings, or send it through other exits",
	pool.ClassProxyError:   "the proxy failed on its own side (internal error, no exit nodes left): check the provider's status page; it is not the site's doing",
	pool.ClassBadRequest:   "the proxy refused the request itself (malformed, too large, unsupported): check the request the scraper builds",
	pool.ClassOriginDNS:    "the site's name does not resolve: check the URL, or use socks5h:// so the proxy resolves it",
	pool.ClassCanceled:     "the caller cancelled or its deadline passed: not the exit's fault; raise the request timeout if it recurs",
	pool.ClassError:        "an unclassified failure: look up the error in the transport's logs",
	pool.ClassNotAttempted: "the request never left: no exit was ready, or the origin's guard was open",
}

// HintFor returns what an operator can do about failures of class c — "the provider rejected the
// credentials: check user/password or IP allowlist" for pool.ClassProxyAuth — or "" for a class it
// does not know (a custom classifier's). The page shows it beside every breaker that is not CLOSED.
func HintFor(c pool.Class) string { return hints[c] }
