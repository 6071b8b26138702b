// Package pool is proxybreaker's engine: a set of proxy exits, the circuit breakers that judge
// them, and the selection that picks one for each request. It knows nothing of net/http: a caller
// picks an exit for an origin, sends whatever it sends through it (an HTTP request, a headless
// browser's navigation, a WebSocket, a gRPC stream), and reports the outcome as a Verdict.
// Package transport is the http.RoundTripper built on it.
//
//	caller → Pool.Pick(ctx, Request{Origin}) → origin guard admits? → peek at breakers (no locks)
//	       → choose a ready exit (least loaded of two) → acquire its permits and tokens → Lease
//	       → caller sends through Lease.Exit() → Lease.Report(Verdict) → pair / exit / origin
//	         breakers → Observers (after every lock is released)
//
// # Breakers
//
// Each (exit, origin) pair has a breaker.Breaker, made when the pair first fails and dropped when
// idle and healthy: a residential IP rate-capped by one site stays usable on every other. Each exit
// has a breaker of its own for exit-scoped trouble (ScopeExit): rejected credentials, a refused
// gateway or a proxy host that does not resolve park the exit for every origin, and
// connection-level failures (Verdict.ConnLevel) count toward the exit's failure rate across all
// origins, so a flaky exit that spreads its failures thinly is still taken out. Each origin has a
// guard: when most of the exits that recently tried it fail it (at least three), the origin is the
// problem, picks for it fail fast with an *OriginUnhealthyError, and pair breakers do not count
// the episode against the exits. One level below, exits that share a fate form groups (a group=
// attribute, or IPv4 literals in one /24): when several members are banned by one origin within a
// short window (GroupSettings), the others are held there to one attempt at a time until one is
// served, so a ban spreading across a subnet costs one attempt at a time, not one per member.
//
// Settings layer, field by field: the pool's (WithPairSettings, WithExitSettings), an exit's own
// (Exit.WithPairSettings, Exit.WithExitSettings, or failures=, cooldown=, … in a proxy list), and
// for pairs and guards an origin pattern's (WithOriginSettings), which wins over the exit's. They
// are resolved when an origin is first seen and when a breaker is made, never on a pick.
//
// # Verdicts
//
// A verdict's Outcome says what the attempt showed (Success, Transient, Permanent, Neutral) and
// its Scope whom it concerns (the pair, the exit, the origin). Transient failures trip breakers
// and are reheated by probes; Permanent ones park the breaker for breaker.Settings.ParkFor;
// Neutral ones count nothing. A RetryAfter opens the pair for that long. Soft failures count half.
// 429s and challenge pages (ClassRateLimited, ClassBlocked) also slow the pair's pace when rate
// limits are on. A Suspect success — a plain 403 — is judged at Report time: by default a block of
// the pair when the origin is serving other exits meanwhile, else the site's answer (SuspectPolicy).
// A 2xx page judged with Lease.JudgePageAt (package transport judges every 2xx HTML page) is, the
// same way, a block of the pair when it deviates from the pages other exits get meanwhile: smaller,
// without the caller's marker, or titled otherwise (Page, softblock.go).
//
// # Leases and generations
//
// A Lease holds the permits its pick acquired and takes exactly one Report (or Release). A
// verdict counts only in the breaker generation the lease was admitted in: a slow attempt from
// before a trip can neither close nor re-trip a breaker that has since moved on, even one that
// tripped and closed again meanwhile. CLOSED breakers admit without their locks
// (breaker.Breaker.ClosedPermit) and pairs that have never failed have no breaker at all; both
// paths keep that rule (see the comments on acquire and pairPermit).
//
// # Selection
//
// The pool peeks at breakers without taking anything, chooses at random among ready exits (the
// less loaded of two random ready exits by default), and acquires permits only on the one it
// chose, so a HALF_OPEN breaker it passes over keeps its probe slot. Picking samples before it
// scans: its cost does not grow with the number of origins and stays flat with the number of exits
// while most are ready. Lower tiers are preferred per origin; higher tiers serve only while a lower
// one has nothing ready. Request.Session pins a session to an exit per origin; Request.Retries
// makes a retry of one logical request avoid the exits that failed it; Request.Exit pins a pick to
// one exit (a reheat loop's probes). When nothing is ready Pick returns a *NoHealthyExitError
// that says how long until the soonest probe.
//
// # Time and randomness
//
// The pool reads its clock.Clock once per pick and once per report (PickAt and ReportAt take the
// instant instead) and waits for tokens on the same clock. WithSeed makes every random draw come
// from one seeded source and WithInlineSweep runs the idle sweep on the picking goroutine, so a
// pool driven from one goroutine on a clock.Fake is deterministic.
//
// # Locks
//
// Lock order, outermost first: Pool.mu (exit-set changes) → originTable.mu (the origin table's
// writers; picks read it without a lock) → originState.mu (its pairs) → a breaker's own lock; the
// session table's and a Retries' locks are leaves. Breakers call their Mirror hook under their lock (it only stores atomics) and their
// state-change hook after releasing it; observers run with no lock held.
package pool
