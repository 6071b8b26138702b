// Package breaker is the circuit breaker for one key: in proxybreaker, one (exit, origin) pair, one
// exit as a whole, or one origin.
//
// It is pure: no net/http, no goroutines, no timers. Every method takes the instant it runs at, and
// the OPEN → HALF_OPEN move is computed from that instant when the breaker is next looked at.
//
//	http.Client → transport.Transport → pick exit: Breaker.Ready(now) on candidates
//	            → Breaker.Acquire(now) on the chosen one → base RoundTripper → classify
//	            → Permit.Success / Failure / Neutral(now) → state change → observers
//
// # States
//
// CLOSED admits everything and counts failures. It trips to OPEN when Settings.FailureThreshold
// failures fall inside the rolling Settings.Window (and, when Settings.FailureRatio is set and the
// window has seen Settings.MinVolume verdicts, when that share of them failed), or at once when a
// failure carries a Retry-After: the origin has said when to come back.
//
// OPEN admits nothing until its cooldown ends. The cooldown is BaseCooldown doubled for each
// consecutive trip (the backoff level), capped at MaxCooldown, never shorter than a Retry-After,
// then lengthened by jitter: a random fraction of itself up to Settings.Jitter. A trip by a
// failure that carries a Retry-After is different: OPEN for the Retry-After (at least BaseCooldown,
// at most MaxRetryAfter, plus jitter) whatever the level, which it does not raise — the origin has
// said when to come back, and a pair that meets a per-minute cap every minute should rest a
// minute, not fifteen. A permanent failure
// parks the breaker: OPEN for ParkFor, without raising the backoff level. A failure's MaxWindow
// caps its window, and its Stretch reads it that many rungs up the ladder (a repeat offender's,
// in package pool) without raising the level.
//
// HALF_OPEN is OPEN whose cooldown has ended. It admits at most HalfOpenProbes permits at a time.
// SuccessesToClose successful probes close it; one failed probe re-opens it one level higher. Each
// probe holds its slot on a lease: a probe that never reports back within its lease counts as a
// failed probe, so a breaker never stays stuck in HALF_OPEN.
//
// # Anti-flapping
//
// Closing does not forget the backoff level. The level falls by one for each full StablePeriod
// (default 5 minutes) the breaker then stays CLOSED, so a pair that re-closes and re-trips within
// minutes climbs the ladder (20 s, 40 s, 80 s … 15 min) and is probed less and less often, while a
// pair that has been healthy for a while starts again from the bottom.
//
// # Permits
//
// Acquire (or AcquireLease) hands out a Permit under the breaker's lock: in CLOSED always, in
// HALF_OPEN while a probe slot is free (the permit is then a probe holding its slot on a lease),
// in OPEN never. A Permit takes exactly one verdict: Success, Failure, Neutral, or Release (no
// verdict). It remembers the generation it was issued in — a generation ends at every change of
// state — and a verdict that arrives in a later generation is dropped, so a slow request from
// before a trip can neither close nor re-trip the breaker, even one that has tripped and closed
// again meanwhile.
//
// Two cheaper ways to a CLOSED permit exist for tables that admit many requests: ClosedPermit
// reads the state and the generation from one atomic word, without the lock, and fails when the
// breaker is not CLOSED (then use Acquire); PermitFor(gen) makes a permit for a generation the
// caller already knows. Neither is ever a probe, and both keep the generation rule. Looking
// (Ready, State, Snapshot) never changes what a breaker admits.
//
// # Many breakers
//
// A table of many keys embeds a Breaker in its own per-key struct and readies it in place with
// Policy.Init, the struct being the breaker's Watcher: no callbacks per key. A breaker keeps what a
// state needs only while in it — the failure tally of a CLOSED period from its first failure, the
// probe slots of a HALF_OPEN one — so a parked or fresh breaker is 112 bytes.
package breaker
