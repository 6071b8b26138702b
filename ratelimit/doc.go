// Package ratelimit keeps proxybreaker polite before anything fails: token buckets (from
// golang.org/x/time/rate) per exit, per (exit, origin) pair and per origin, which the transport's
// picker reads as one more "is this exit ready?" question.
//
//	http.Client → transport.Transport → pick exit: breakers ready? → buckets have a token? (peek)
//	            → choose among ready exits → acquire breaker permits → Take the chosen exit's tokens
//	            → base RoundTripper → verdict → breakers, and Adapt (AIMD on 429s and challenges)
//
// A breaker reacts after the damage; a bucket discourages it first. Three scopes combine:
//
//   - per exit (Limits.PerExit, overridden per exit label in Limits.Exits): the provider's terms,
//     "10 requests per second per port";
//   - per (exit, origin) (Limits.PerPair): the pace one site tolerates from one IP;
//   - per origin across all exits (Limits.PerOrigin, overridden in Limits.Origins): a polite
//     crawler's pace for a whole site, crawl-delay style.
//
// A request needs a token from every bucket that applies. Peeking (Bucket.Ready) takes nothing, so
// exits the picker looks at and passes over lose no tokens; only the chosen exit's buckets are
// taken from (Take), all or none. When no ready exit has a token, the transport waits for the
// soonest one, bounded by the request's context, or fails fast if told to.
//
// # Budgets kept elsewhere
//
// An exit's budget is often the provider's, per exit and not per process. Limits.ExitSource lets
// a fleet store (store/redis) back each exit's bucket with a Source — tokens leased from a shared
// bucket ahead of need — which the picker peeks at and takes from exactly like a local bucket,
// without a lock, an allocation or a round trip.
//
// # Budgets per period
//
// A Budget is an amount per period — bytes, or spend in billionths of a cost unit — drawn down by
// amounts known only after each request, renewing whole at the end of each period (aligned on
// the Unix epoch). A BudgetSource keeps one: LocalBudget in this process, or a fleet store's
// (store/redis Store.BudgetSource). Package pool keeps its tier budgets in them
// (pool.WithTierBudget, pool.WithBudgetSource) and passes over a tier whose budget is spent.
//
// # Adaptive pace
//
// A pair that meets 429s with Retry-After learns the origin's window from them (Pair.Limited; the
// rules are in learn.go): how long it is and how many requests it allows, and is then held to that
// allowance in any span of the window's length (a sliding log of its own requests), none before the
// reset the origin announced. A fixed window is read off two resets a window apart; a sliding one,
// whose resets are not, off one 429 whose Retry-After runs until the oldest of the pair's own
// successes in a window of a natural length leaves it (fit.go). Package pool keeps what an origin's
// pairs learned as the first window of its other pairs. A window that meets 429s more often than
// its raises cost is distrusted, and the pair reads the window off a later 429 anew (learn.go).
// Pair.Unannounced learns a window of up to a minute from 429s without
// Retry-After, from the spacing of a pair's runs of them (unannounced.go), cutting nothing. A
// limiter that blocks for longer than the period it counts over (Cloudflare's mitigation timeout)
// puts a block between two resets: a pair whose resets are not the clock's is held to the
// shortest natural period its served span allows, a guess lengthened at each 429 (period.go).
//
// Under Pair.Limited, a 429 without Retry-After cuts the pair's rate to half (never below the floor of one request a
// minute); each success then adds back a twentieth of the ceiling, until the pair is at its ceiling
// again (the configured per-pair rate, else the exit's, else 10 requests a second). Multiplicative
// decrease backs off fast while the site is annoyed; additive increase probes its tolerance slowly
// — the rule TCP uses for the same problem. A challenge page slows a pair so paced by a tenth.
// Retry-After itself is honoured by the pair's breaker, which stays OPEN at least that long.
package ratelimit
