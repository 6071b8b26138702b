// Package probe checks a proxy pool before work is dispatched to it, and reheats OPEN breakers
// while work runs.
//
// # The pre-dispatch probe
//
// A Prober sends one GET to every target through every exit, concurrently and bounded, and
// returns a Report within a hard deadline (default 10 s) whatever hangs:
//
//	Prober.Run → plan exits × targets → N workers, each probe:
//	           → transport.NewExitTransport(exit) (the base transport live traffic uses)
//	           → connect / TLS / header timeouts → transport.Classifier (the same verdicts)
//	           → capped body read under a body timeout
//	           → Result → per exit, per target, overall Stats → Assess → HEALTHY / DEGRADED / CRITICAL
//	the deadline cuts whatever is still in flight: those probes are reported as "deadline"
//
// Probes go through each exit's own *http.Transport, built by transport.NewExitTransport from the
// same template as live traffic, and their outcomes are judged by the same transport.Classifier
// and soft-block detectors, so the probe and the transport never disagree about what a 407, a
// 429 with Retry-After or a challenge page means. A request never leaves except through its exit.
//
// The Report is JSON with a versioned schema (SchemaVersion; docs/probe.md describes every
// field). Its verdict, backoff and concurrency recommendation are derived by Assess from the
// measured distribution under a Policy; StateFrom turns a Report into a pool.SavedState a
// pool.Pool can warm start from (pool.Pool.Restore): exits that failed permanently start parked,
// throttled pairs start OPEN for their Retry-After. cmd/proxyprobe wraps all of it as a command.
//
// # The reheat loop
//
// A Reheater probes, on its own, the breakers whose cooldown has ended when no live request
// happens to take their probe slot:
//
//	every Interval (on the pool's clock) → pool.Pool.DueProbes(now)
//	  → per due (exit, origin): GET the origin's probe URL with transport.ContextWithExit(exit)
//	  → transport.Transport (the same permit path as live traffic: one probe slot, never two)
//	  → 200/204/404 close the breaker; anything else sends it back to OPEN
package probe
