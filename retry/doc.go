// Package retry holds go-retryablehttp hooks that understand proxybreaker's transport, as plain
// funcs (method values of a Policy), so neither this package nor the core imports retryablehttp.
//
//	retryablehttp.Client.Do → http.Client → transport.Transport → pick exit → … → verdict
//	    ↑ CheckRetry: Decide(resp, err) — retry? how long must the retry wait? (noted in the memo)
//	    ↑ Backoff: exponential with jitter, capped by the client's RetryWaitMax
//	    ↑ PrepareRetry: wait out the rest of the noted wait (the soonest probe), then retry
//	    → transport.Transport: the retry avoids the exits that failed the request (WithRetries)
//
// # Setting it up
//
//	tr, err := transport.New(transport.WithExits(exits...))
//	p, err := retry.New(retry.Settings{})
//	client := retryablehttp.NewClient()
//	client.HTTPClient = &http.Client{Transport: tr, Timeout: 30 * time.Second}
//	client.CheckRetry, client.Backoff, client.PrepareRetry = p.CheckRetry, p.Backoff, p.PrepareRetry
//
//	req, err := retryablehttp.NewRequestWithContext(retry.WithRetries(ctx), "GET", url, nil)
//	resp, err := client.Do(req)
//
// WithRetries is what makes each retry of the request go out through another exit: the
// transport remembers, in that context, which exits failed it. Make one per logical request.
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
// "no healthy exit" is an error: so CheckRetry, which sees it, notes in the request's memo (the
// context WithRetries made, which the client passes to CheckRetry and carries on every retry's
// request) the instant the retry may go, and PrepareRetry, which runs after the backoff's sleep,
// waits whatever is left of it. When that instant lies beyond the cap — a pool whose every exit
// the provider refused (407) is parked for minutes — CheckRetry gives up at once with a
// *GiveUpError listing the request's failed attempts, rather than retrying into the same refusal.
//
// A refusal costs no network traffic but counts toward RetryMax: allow a retry or two more than
// you would without proxies.
//
// errors.As finds the transport's typed errors (*transport.NoHealthyExitError, *transport.AttemptError,
// *transport.ProxyConnectError) through go-retryablehttp's wrapping and through a *GiveUpError.
package retry
