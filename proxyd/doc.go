// Package proxyd is proxybreakerd's proxy: the pool's judgement as a local proxy that any client
// can point at — curl, Scrapy, requests, a browser. One port serves absolute-URI HTTP proxying,
// CONNECT tunnels and SOCKS5, told apart by the first byte; clients steer the pick through the
// proxy username (Options); the admin handler serves metrics, health, the status page and the
// ban/release/report API.
//
//	client → listener (sniff: 0x05 SOCKS5, else HTTP) → credentials, allowlist, options
//	  absolute URI → httputil.ReverseProxy → transport.Transport → Pool.Pick → exit → classify
//	               → Lease.Report → response + Proxy-Status (exit, verdict)
//	  CONNECT / SOCKS5 CONNECT → Pool.Pick → dial through the exit (CONNECT, SOCKS5, direct)
//	               → reply + Proxy-Status → relay → judged by its first bytes → Lease.Report
//	  pool.Observer: a pair or exit that opens → its live tunnels closed
//
// It builds on pool and transport as any user would; nothing below imports it. Command
// cmd/proxybreakerd wires it to flags, a proxy list, a state store and the admin port;
// docs/daemon.md is the operator's guide and docs/judgement.md says what a tunnel can and cannot
// tell.
package proxyd
