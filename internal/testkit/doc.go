// Package testkit holds the test support that several packages' tests, benchmarks and the bench
// module share, so that each piece exists once: base RoundTrippers that answer without a network
// (Canned for benchmarks, Scripted for tests), exits that are never dialled (Exits), a base
// template that trusts httptest TLS origins (TLSTemplate), sets of real local proxies failing in
// the ways a breaker has to see (StartWorld), and a driver for a fake clock (DriveClock).
//
// Where each piece stands in the request path:
//
//	test → transport.Transport → pick exit → base RoundTripper: Canned | Scripted (no network)
//	                                       → base http.Transport (TLSTemplate) → World's proxytest proxies → httptest origin
//
// It is a normal package under internal/ so that the tests of any package in the module, and the
// bench module beside it, can import it; no production code imports it. It imports transport, so
// transport's own white-box tests (package transport) cannot use it: its kit-using tests are in
// package transport_test.
package testkit
