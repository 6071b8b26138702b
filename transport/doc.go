// Package transport routes HTTP requests through a pool of proxy exits, with a circuit breaker per
// (exit, origin) pair deciding which exits may take traffic.
//
//	http.Client → Transport.RoundTrip → origin key → origin guard admits?
//	            → Pool: peek at breakers, choose a ready exit, acquire its permits
//	            → the exit's own *http.Transport (proxy = that exit) → response or error
//	            → Classifier → Verdict → pair / exit / origin breakers → Observers
//	            → (success) verdict confirmed when the body ends
//
// # Breakers
//
// Each (exit, origin) pair has a breaker.Breaker, created on first use and dropped when idle and
// healthy: a residential IP rate-capped by one site stays usable on every other. Each exit also
// has a breaker of its own for exit-scoped trouble: a 407 from the proxy, a refused gateway or a
// proxy host that does not resolve parks the exit for every origin; connection-level failures
// (timeouts, resets, dropped tunnels) count toward the exit's failure rate across all origins, so a
// flaky exit that spreads its failures thinly over many sites is still taken out. Each origin has a
// guard: when most of the exits that recently tried it fail it (at least three), the origin is the
// problem, requests for it fail fast with an *OriginUnhealthyError, and pair breakers do not count
// the episode against the exits.
//
// # Classification
//
// DefaultClassifier maps outcomes to verdicts:
//
//	outcome                                              verdict     scope
//	2xx, 3xx, 404 and other 4xx the origin sent          success     pair
//	dial/TLS/header timeout, reset, EOF, tunnel dropped  transient   pair (+ exit roll-up)
//	body dies mid-read                                   transient   pair (+ exit roll-up)
//	429 (Retry-After: seconds or HTTP-date)              transient   pair, OPEN for Retry-After
//	403 / 503 / 200 that is a WAF challenge page         transient   pair ("blocked")
//	502/503/504 from the origin                          soft        pair (half) + origin guard
//	CONNECT answered 502/503/504 (target unreachable)    soft        pair (half) + origin guard
//	500 and other 5xx from the origin                    neutral     -
//	407 from the proxy (plain HTTP or CONNECT)           permanent   exit
//	401 in answer to a CONNECT (only the proxy answers)  permanent   exit
//	SOCKS5 credentials rejected, or no method accepted   permanent   exit
//	gateway refused, proxy DNS failure, CONNECT refused  permanent   exit
//	the caller's context cancelled or past its deadline  neutral     -
//
// "Soft" failures count half toward the pair: two make one. A plain 502/503 may be the origin's
// trouble as much as the exit's; the origin guard sees them at full weight. The origin guard counts
// every transient failure except 429s and challenge pages, which judge one IP, not the origin.
//
// Hanging exits are caught by the header timeout (WithHeaderTimeout, default 15 s): a timeout of
// the transport's own making blames the exit, while the caller's own deadline is neutral. Keep the
// header timeout below http.Client.Timeout.
//
// # Selection
//
// The pool peeks at breakers without taking anything, chooses at random among ready exits (the
// less loaded of two random ready exits by default), and acquires permits only on the one it chose,
// so a HALF_OPEN breaker it passes over keeps its probe slot. Picking samples before it scans: its
// cost does not grow with the number of origins and stays flat with the number of exits while most
// are ready. Lower tiers are preferred per origin; higher tiers serve only while a lower one has
// nothing ready. WithSession pins a session to an exit per origin; WithRetries makes a retry of the
// same logical request avoid the exits that failed it.
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
// and VerdictFromResponse or AttemptError.Verdict says proxy_auth. When no exit is ready, RoundTrip
// returns a *NoHealthyExitError (errors.Is ErrNoHealthyExit) that says how long until the soonest
// probe: never a direct connection.
package transport
