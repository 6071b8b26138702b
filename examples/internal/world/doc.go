// Package world starts what the runnable examples run on, all on 127.0.0.1: in-process forward
// proxies (internal/proxytest) failing in the ways an example shows, the labelled exits that dial
// them, and small web sites (httptest) that learn from the proxies' shared Registry which proxy
// carried each request. Each example keeps only its own cast: which exits, which sites, and how
// each site answers.
//
//	example → transport.Transport (BaseTemplate) → pool.Pool picks an Exit → proxytest proxy → Site
//	                                                                             └─ Registry: which proxy?
//
// Nothing here leaves the machine: proxies, sites and dead exits' addresses are all on loopback.
package world
