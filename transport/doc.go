// Package transport is the http.RoundTripper on top of package pool: it picks an exit for each
// request, sends the request through that exit, classifies the outcome and reports the verdict.
//
//	http.Client → Transport.RoundTrip → per-request middleware (WithMiddleware)
//	            → origin key → pool.Pool.Pick → lease on an exit
//	            → the exit's chain: per-exit middleware (WithExitMiddleware) → the exit's own
//	              *http.Transport (proxy = that exit; its connections count their bytes)
//	              → response or error
//	            → Classifier → pool.Verdict → Lease.ReportTrafficAt → breakers, byte totals
//	            → observers (AttemptResult.Bytes)
//	            → (success) verdict confirmed when the body ends
//
// Build the pool, then the transport over it:
//
//	p, err := pool.New(pool.WithExits(exits...))
//	tr, err := transport.New(p, transport.WithObserver(obs))
//	client := &http.Client{Transport: tr}
//
// What the breakers do, how exits are chosen and when a request is refused is the pool's (see
// package pool); this package decides what an HTTP outcome means.
//
// # Classification
//
// DefaultClassifier maps outcomes to verdicts:
//
//	outcome                                              verdict     scope
//	2xx, 3xx, 404 and other 4xx the origin sent          success     pair
//	dial/TLS/header timeout, reset, EOF, tunnel dropped  transient   pair (+ exit roll-up)
//	body dies mid-read                                   transient   pair (+ exit roll-up)
//	body stalls (no byte for 15 s) or trickles (under    transient   pair (+ exit roll-up)
//	  4 KiB/s over 10 s after 5 s), the caller waiting               (class body_read; WithBodyPace)
//	429 (Retry-After: seconds or HTTP-date)              transient   pair, OPEN for Retry-After
//	403/428/429/503, 200, 202/405 that is a WAF page     transient   pair ("blocked": Cloudflare, Imperva, Akamai, AWS WAF, Kasada, DataDome, PerimeterX, captcha gates)
//	502/503/504 from the origin                          soft        pair (half) + origin guard
//	CONNECT answered 502/503/504 (target unreachable)    soft        pair (half) + origin guard
//	the proxy's page: target unreachable (squid          soft        pair (half) + origin guard
//	  ERR_CONNECT_FAIL, tinyproxy 500 Unable to connect)             (class upstream)
//	the proxy refuses the target (squid                  permanent   pair (class proxy_denied)
//	  ERR_ACCESS_DENIED, tinyproxy 403 Filtered, CONNECT
//	  answered 403)
//	the proxy: the target's name does not resolve        neutral     - (class origin_dns)
//	the proxy refuses the request (malformed, too large) neutral     - (class bad_request)
//	the proxy fails on its own side (overloaded, no      transient   exit on a CONNECT, else pair
//	  exit node, Proxy-Status proxy_internal_error)                  (class proxy_error)
//	500 and other 5xx from the origin                    neutral     -
//	response headers over the limit (256 KiB default)    neutral     - (class origin_error)
//	407 from the proxy (plain HTTP or CONNECT)           permanent   exit
//	401 in answer to a CONNECT (only the proxy answers)  permanent   exit
//	SOCKS5 credentials rejected, or no method accepted   permanent   exit
//	gateway refused, proxy DNS failure                   permanent   exit
//	CONNECT refused otherwise (400, 500… with no marker) permanent   exit (class proxy_connect)
//	the caller's context cancelled or past its deadline  neutral     -
//	a direct exit's dial: origin refused or unreachable  soft        pair (half) + origin guard (class upstream)
//	a direct exit's dial: origin name does not resolve   neutral     - (class origin_dns)
//
// "Soft" failures count half toward the pair: two make one. A plain 502/503 may be the origin's
// trouble as much as the exit's; the origin guard sees them at full weight. The origin guard counts
// every transient failure except 429s and challenge pages, which judge one IP, not the origin.
//
// Who made an error answer, the proxy or the origin, is read from the markers proxies document:
// squid's X-Squid-Error, tinyproxy's Server header with its own reason phrases, RFC 9209's
// Proxy-Status, and the error headers of Zyte, Bright Data and Oxylabs (ProxyErrorReader,
// DefaultProxyErrorReaders, StandardClassifier.ProxyErrors; docs/judgement.md lists each marker and
// its source). Only the proxy answers a CONNECT, so its markers there are read at every scope. On a
// response, anything between the exit and the origin could have written them: a reading that would
// blame the exit for every origin is narrowed to the pair, credentials excepted, so that a forged
// marker costs no more than that origin's own pairs.
//
// Hanging exits are caught by the header timeout (WithHeaderTimeout, default 15 s, on the pool's
// clock): a timeout of the transport's own making blames the exit, while the caller's own deadline
// is neutral. Keep the header timeout below http.Client.Timeout. Past the headers, the body pace
// rule (WithBodyPace, on by default, on the same clock) blames an exit whose body stalls or
// trickles while the caller waits for it, with a *SlowBodyError from Read, before the caller's own
// deadline would end it blaming nobody; ContextWithBodyPace exempts a stream or a long poll.
//
// # The chain
//
// Per-request middleware (WithMiddleware) wraps everything and sees each request once. Per-exit
// middleware (WithExitMiddleware) is built once per exit around that exit's base transport and sees
// every attempt through it: per-exit headers, signing, accounting. Observers (WithObserver) see
// each attempt start and finish; one that is also a pool.Observer hears the pool's events too.
//
// # Routing
//
// Each exit gets its own *http.Transport, cloned lazily from a template: net/http pools HTTP/2
// connections by origin alone, so one shared transport with a per-request Proxy func would send
// requests through whichever exit first opened an h2 connection. The picked exit rides in the
// request context (ExitFromContext) and comes back on the response (ExitFromResponse). A failed
// CONNECT becomes a *ProxyConnectError with the status code. So a proxy that rejects credentials
// answers a plain-HTTP request with a 407 response (err == nil, as net/http returns it) and an
// HTTPS request with an *AttemptError wrapping a *ProxyConnectError; either way the exit is parked,
// and VerdictFromResponse or AttemptError.Verdict says proxy_auth. ErrorFromResponse makes an
// *AttemptError of every response the transport counted against its exit (a 407, a 429, a
// challenge page), so that one error path handles both. When no exit is ready, RoundTrip
// returns the pool's *pool.NoHealthyExitError (errors.Is pool.ErrNoHealthyExit) that says how long
// until the soonest probe: never a direct connection. Only an exit the user made direct
// (pool.DirectExit, "direct" in a proxy list) connects to origins itself: its transport has no
// proxy and counts the bytes of its connections to the origins (direct.go).
//
// # Per-request intent
//
// ContextWithSession sticks a session to one exit per origin, ContextWithRetries makes the attempts
// of one logical request avoid the exits that failed it, and ContextWithExit pins a request to one
// exit; each becomes a field of the pool.Request the transport picks with.
package transport
