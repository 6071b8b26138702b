// Package store keeps a pool's breaker state beyond one process: across a restart (store/sqlite,
// an embedded file) and across a fleet of processes (store/redis). It holds what the two share:
// the Store interface, the transport options that connect one to a pool, and the rule for turning
// a transition into the record a store keeps.
//
//	http.Client → transport.Transport → pick exit → base RoundTripper → classify → breaker
//	                                                                                  │ transition
//	             Observer.StateChanged (enqueue only: the request path never waits) ←─┘
//	                   → store goroutine → SQLite file / Redis (+ pub/sub to the fleet)
//	             Pool.RestoreState / Pool.Apply ← store goroutine (on start; news from the fleet)
//
// The transport knows nothing of stores. A store meets a pool through extension points the
// transport already has: it is a transport.Observer (transitions out), it calls Pool.RestoreState
// and Pool.Apply (state in), and a fleet store is a transport.ProbeClaimer (one HALF_OPEN probe
// per fleet). NewTransport wires all of it in one call.
package store
