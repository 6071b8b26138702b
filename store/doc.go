// Package store keeps a pool's breaker state beyond one process: across a restart (store/sqlite,
// an embedded file) and across a fleet of processes (store/redis). It holds what the two share:
// the Store interface, the call that connects one to a pool, and the rule for turning a
// transition into the record a store keeps.
//
//	http.Client → transport.Transport → pool.Pick → base RoundTripper → classify → Lease.Report
//	                                                                                       │ transition
//	             pool.Observer.StateChanged (enqueue only: the request path never waits) ←─┘
//	                   → store goroutine → SQLite file / Redis (+ pub/sub to the fleet)
//	             Pool.Restore / Pool.Apply ← store goroutine (on Bind; news from the fleet)
//
// The pool knows nothing of stores. A store meets a pool through extension points the pool
// already has: it is a pool.Observer (transitions out) and a pool.Binder, so that adding it with
// Pool.Observe hands it the pool, whose Restore and Apply bring state in; and a fleet store is a
// pool.ProbeClaimer (one HALF_OPEN probe per fleet). NewPool wires all of it in one call.
package store
