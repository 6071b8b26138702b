// Package proxytest runs in-process HTTP forward proxies on 127.0.0.1 for tests, examples and the
// demo. Every proxy listens on 127.0.0.1 with a kernel-chosen port and dials loopback targets only,
// so no traffic leaves the machine.
//
// A proxy stands where a real exit would in the request path:
//
//	http.Client → transport.Transport → pick exit → base http.Transport
//	            → proxytest.Proxy (plain HTTP: forward; HTTPS: CONNECT tunnel) → httptest origin
//	                                                              origin: Registry.Lookup(r)
//
// Plain HTTP requests arrive in absolute form and are forwarded over a fresh upstream connection
// with the hop-by-hop headers (Proxy-Authorization among them) removed. CONNECT requests are
// answered 200 and then spliced byte for byte, so TLS, and HTTP/2 negotiated by ALPN, run end to
// end between the client and the origin.
//
// With Config.SOCKS5 the listener speaks SOCKS5 instead (RFC 1928, with RFC 1929
// username/password authentication): one CONNECT per connection, answered and then spliced like a
// CONNECT tunnel, for socks5:// and socks5h:// exits.
//
// Config turns a proxy into the failures a breaker has to see: proxy authentication (407; for
// SOCKS5, status 0x01), a proxy that accepts connections and never answers (Hang), a tunnel that
// opens and then never carries a byte (HangAfterConnect), and added Latency. ClosedAddr gives an
// address where nothing listens, for a proxy that refuses connections.
//
// Config.SourceAddr makes a proxy's upstream connections leave from a loopback address of its own
// (127.0.0.2, 127.0.0.3, …), so an origin sees each proxy as its own client IP in r.RemoteAddr —
// and can ban one, as a site bans an exit's IP — while a client with no proxy arrives from
// 127.0.0.1.
//
// A Registry shared by several proxies and an origin lets the origin tell which proxy carried each
// request: the proxy records both ends of every upstream connection it dials before it sends a byte
// on it, and the origin looks up the request's connection (Registry.Lookup(r)).
//
// A Gateway (StartGateway) is a proxy that behaves like a residential provider's gateway: the
// username picks a sticky session ("acct-session-ID"), each session's upstream connections leave
// from its own loopback source address (127.0.0.10 to 127.0.0.250 by default), sessions are
// recycled after a TTL, a username without a session gets a fresh address per request, the
// address may be reported in a response header, and it can be made to refuse connections. A
// BanOrigin judges clients by the address it sees and bans them.
//
// Close shuts a proxy down completely: the listener, every client and upstream connection, and
// every goroutine it started have gone when Close returns, so tests can check for leaks with
// go.uber.org/goleak.
package proxytest
