// Package collyext attaches a proxybreaker transport to a Colly collector
// (github.com/gocolly/colly/v2), re-queues failures on another exit, and tells each response's
// exit.
//
//	colly.Collector → OnRequest (id) → LimitRule → http.Client (jar, timeout, redirects)
//	    → shell *http.Transport (never dials) → Extension: strip the id, add the request's *pool.Retries
//	    → transport.Transport → pool.Pick (avoids the exits that failed it) → … → verdict
//	    → ExitHeader on the response
//	    → OnResponseHeaders (ProxyURL; abort a failure colly would parse) → OnResponse / OnError
//	    → RetryOnError: re-queue through another exit after the right delay, or give up
//
// # Use
//
//	p, err := pool.New(pool.WithExits(exits...))
//	tr, err := transport.New(p, transport.WithHeaderTimeout(5*time.Second))
//	c := colly.NewCollector(colly.Async(true))
//	ext, err := collyext.Attach(c, tr, collyext.Settings{})
//	c.OnError(ext.RetryOnError(func(r *colly.Response, err error) {
//		log.Printf("lost %s: %v", r.Request.URL, err)
//	}))
//	c.OnResponse(func(r *colly.Response) {
//		log.Printf("%s via %s", r.Request.URL, collyext.Exit(r))
//	})
//
// Keep transport.WithHeaderTimeout below the collector's request timeout (colly's default is 10 s,
// SetRequestTimeout changes it): the header timeout is what blames a hanging exit; the request
// timeout is the caller's, neutral, and not re-queued.
//
// # The SetProxyFunc trap
//
// Colly's SetProxy and SetProxyFunc (and so proxy.RoundRobinProxySwitcher) keep the collector's
// transport only if it is an *http.Transport, and otherwise replace it with a fresh one: set after
// any custom RoundTripper, they silently take it out, and the round-robin switcher then keeps
// sending a share of the requests to dead proxies. Attach therefore hands the collector an
// *http.Transport "shell" whose http and https schemes are registered (RegisterProtocol) to the
// pool: SetProxyFunc only sets the shell's Proxy field, and the pool notices and fails every
// request with ErrProxyFuncSet instead of ignoring the call. A SetProxyFunc made before Attach is
// simply replaced. WithTransport, SetClient and Appengine after Attach replace the shell and undo
// it; nothing can guard against those.
//
// # Retries
//
// Colly retries nothing by itself. RetryOnError re-queues a failed request (colly's Request.Retry)
// when a retry can fix it, through an exit that has not failed that request while one is ready:
// Colly builds every fetch's http.Request afresh from the collector's context, so the extension
// keeps each logical request's *pool.Retries (made by transport.ContextWithRetries) under an id it
// puts in RequestHeader, which Request.Retry copies and the extension removes before the request
// leaves; each fetch's context carries it to the pool. That Retries is the request's one memory:
// the pool notes there the exits that failed it, the extension its failed attempts. A limit
// (Settings.Retries) bounds the re-queues per request, and a retry.Budget (Settings.Budget, off by
// default) those of all requests together: a request deposits when its first fetch reaches the
// transport and each re-queue withdraws, so when a site fails everything the crawl adds a share
// of its requests (20 % plus 10 a second by default) rather than Retries times them. The delay
// before a re-queue is the longer of an exponential backoff and the soonest probe (or the origin
// guard's, or the next token). A request that would have to wait longer than Settings.MaxDelay,
// or whose re-queue the budget refuses (errors.Is(err, retry.ErrBudgetSpent)), is given up with a
// *GiveUpError, which lists the failed attempts in the words of pool.FormatGiveUp, as the retry
// package's give-up does. Outcomes a retry cannot fix are never re-queued: a 404 or a 500 from the origin,
// an origin-scoped permanent failure, the collector's own timeout or cancellation.
//
// In a sync collector the re-queue runs inside the OnError callback, nested in the failed fetch,
// so Visit returns that first fetch's error even when the re-queue loaded the page: count pages in
// the callbacks, not by Visit's error.
//
// A challenge page served with 200 is a failure to the transport but content to Colly: Attach
// aborts such a response after its headers, so it reaches OnError (with colly.ErrAbortedAfterHeaders
// and the response's status) and RetryOnError, never OnResponse or OnHTML.
//
// # Colly's LimitRule and the transport's buckets
//
// Both apply, one after the other. A LimitRule matches the request's host and, per rule, bounds
// the requests in flight (Parallelism) and sleeps Delay+RandomDelay after each one while still
// holding its slot; only then does the request reach the transport, whose rate limits
// (pool.WithRateLimits, package ratelimit) take a token per exit, per (exit, origin) pair and
// per origin, waiting for one if need be — still inside Colly's slot. So a Delay in the LimitRule
// paces the whole site as one client, whatever the number of exits (N exits at one request per
// Delay each become one request per Delay in all), and stacks on top of the buckets' waits.
//
// Recommended: let the LimitRule bound concurrency only, and let the buckets pace.
//
//	c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: 2 * len(exits)}) // no Delay, no RandomDelay
//	p, err := pool.New(pool.WithExits(exits...), pool.WithRateLimits(ratelimit.Limits{
//		PerPair:   ratelimit.Every(2 * time.Second), // what one site tolerates from one IP
//		PerOrigin: ratelimit.PerSecond(5, 5),        // the politeness budget for the whole site
//	}))
//	tr, err := transport.New(p)
//
// Parallelism is what keeps an async collector from starting every queued request at once, and it
// should leave each exit a request or two in flight; the per-pair bucket is the pace a site
// tolerates from one IP, which a LimitRule cannot express; the per-origin bucket is the crawl-delay
// for the site across all exits. Leave ratelimit.Limits.FailFast off with Colly: a request waiting
// for a token is cheaper than a ThrottledError and a re-queue.
//
// # Exactly once
//
// Colly's own "already visited?" check is check-then-act (IsVisited, then Visited), so two pages
// of an async collector that link to the same URL can both pass it and fetch it twice. That is
// Colly's race, not the transport's; serialise Request.Visit calls in your OnHTML callback (a
// mutex, async collectors only: a sync Visit recurses) if a page must be fetched exactly once.
package collyext
