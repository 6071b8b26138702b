// Package retry holds go-retryablehttp hooks that understand proxybreaker's transport, as plain
// funcs (method values of a Policy), so neither this package nor the core imports retryablehttp.
//
//	retryablehttp.Client.Do → http.Client → transport.Transport → pool.Pick → exit → … → verdict
//	    ↑ CheckRetry: Decide(resp, err) — retry? record the failure and the wait in the *pool.Retries
//	    ↑ Backoff: exponential with jitter, capped by the client's RetryWaitMax
//	    ↑ PrepareRetry: wait out the rest of the noted wait (Retries.NotBefore), then retry
//	    → pool.Pick: the retry avoids the exits that failed the request (the same *pool.Retries)
//
// # Setting it up
//
//	pl, err := pool.New(pool.WithExits(exits...))
//	tr, err := transport.New(pl)
//	p, err := retry.New(retry.Settings{Clock: pl.Clock()})
//	client := retryablehttp.NewClient()
//	client.HTTPClient = &http.Client{Transport: tr, Timeout: 30 * time.Second}
//	client.CheckRetry, client.Backoff, client.PrepareRetry = p.CheckRetry, p.Backoff, p.PrepareRetry
//
//	req, err := retryablehttp.NewRequestWithContext(transport.ContextWithRetries(ctx), "GET", url, nil)
//	resp, err := client.Do(req)
//
// transport.ContextWithRetries gives the logical request one *pool.Retries, the only memory its
// attempts share: the pool remembers there which exits failed it, so each retry goes out through
// another; CheckRetry records there each failed attempt and the instant the next may go. Make one
// per logical request. A Policy keeps no per-request state of its own.
//
// # What is retried
//
// Retried: the exit's failures — timeouts, dropped connections, 429s, challenge pages, 502/503/504,
// and also permanent ones (a 407 from the proxy, a refused gateway: the exit is parked, another
// carries the request) — and refusals that will clear: no healthy exit, the origin guard, rate
// limits. Not retried: successes (a 404 is the origin's answer), neutral outcomes (a 500 from the
// origin's own bug, the caller's cancellation), origin-scoped permanent failures, an empty pool,
// and errors that are not the transport's. The table is DecideVerdict's.
//
// # Waiting
//
// The wait before a retry is the longest of the exponential backoff, the soonest probe (when no
// exit was ready) and, with Settings.WaitRetryAfter, the response's Retry-After — capped by the
// client's RetryWaitMax. go-retryablehttp hands its Backoff the response but never the error, and
// "no healthy exit" is an error: so CheckRetry, which sees it, notes in the request's *pool.Retries
// (Retries.WaitUntil; the client passes the request's context to CheckRetry and carries it on
// every retry's request) the instant the retry may go, and PrepareRetry, which runs after the
// backoff's sleep, waits whatever is left of it (Retries.NotBefore). When that instant lies beyond
// the cap — a pool whose every exit the provider refused (407) is parked for minutes — CheckRetry
// gives up at once with a *GiveUpError listing the request's failed attempts (Retries.Failures, in
// the words of pool.FormatGiveUp, which collyext's give-up shares), rather than retrying into
// the same refusal.
//
// A refusal costs no network traffic but counts toward RetryMax: allow a retry or two more than
// you would without proxies.
//
// # A retry budget
//
// RetryMax bounds the retries of one request; when a site or a whole pool fails everything, every
// request makes all of them, and the client multiplies its traffic by RetryMax+1. A Budget
// (Finagle's RetryBudget) bounds the retries of all requests together: each request's first
// attempt deposits, each retry withdraws, and a retry goes only while the last TTL's deposits —
// PercentCanRetry of a retry each — plus a floor of MinRetriesPerSec cover it. It is off by
// default (Settings.Budget nil): a retry here mostly moves to another exit, which is what a pool
// is for, and the per-request RetryMax already bounds it; turn it on to cap what a client adds to
// a site when everything fails:
//
//	b, err := retry.NewBudget(retry.BudgetSettings{Clock: pl.Clock()}) // 20 % + 10/s over 10 s
//	p, err := retry.New(retry.Settings{Clock: pl.Clock(), Budget: b})
//
// A retry the budget refuses ends the request at once with a *GiveUpError whose Budget is set
// (errors.Is(err, ErrBudgetSpent)); Budget.Stats counts the refusals. Share one Budget between
// the clients (and collyext.Settings.Budget) that hit the same sites. CheckRetry withdraws when it
// allows a retry, so a client that stops at RetryMax spends a retry it never sends: keep RetryMax
// above what the budget should bound.
//
// errors.As finds the typed errors (*pool.NoHealthyExitError, *transport.AttemptError,
// *transport.ProxyConnectError, *ResponseError) through go-retryablehttp's wrapping and through a
// *GiveUpError.
package retry
