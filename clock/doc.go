// Package clock is the time source every proxybreaker state machine reads.
//
// Breakers and buckets never call time.Now themselves: the transport reads its Clock once per
// attempt and passes the instant down, and anything that waits does so on a Timer made by the same
// Clock. Production code uses System; tests drive a *Fake and never sleep to wait for a state change.
//
//	http.Client → transport.Transport → Clock.Now() → pick exit (breaker.Peek(now)) → … → verdict(now)
package clock
