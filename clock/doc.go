// Package clock is the time source every proxybreaker state machine reads.
//
// Breakers and buckets never call time.Now themselves: the pool reads its Clock once per pick and
// once per report and passes the instant down, and anything that waits — a pick waiting for a
// token, the transport's header timeout, a retry's backoff — does so on a Timer made by the same
// Clock (NewTimer, AfterFunc, Sleep; a watchdog that waits again and again re-arms its Timer with
// Reset). Production code uses System; tests drive a *Fake, whose timers fire in deadline order
// when the test moves it, and never sleep to wait for a state change.
//
//	http.Client → transport.Transport → pool.Pick: Clock.Now() → breaker.Ready(now) on candidates
//	            → breaker.Acquire(now) on the chosen exit → … → Lease.Report: Clock.Now() → verdict(now)
package clock
