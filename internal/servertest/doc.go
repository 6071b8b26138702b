// Package servertest runs real servers as child processes for integration tests, so the
// transport is exercised against the proxies it will meet in production and not only against
// the in-process fakes of package proxytest, and its metrics are read by the Prometheus operators
// run.
//
//	http.Client → transport.Transport → pick exit → base http.Transport
//	            → servertest.Tinyproxy (a real tinyproxy on 127.0.0.1) → httptest origin
//	            → servertest.StartSquid (a real squid on 127.0.0.1, its lookups answered NXDOMAIN
//	              by a resolver of the helper's own) → httptest origin
//
//	metrics endpoint on 127.0.0.1 ← servertest.StartPrometheus (a real prometheus scraping it)
//	                               ← PrometheusServer.Query / WaitForQuery (its HTTP API)
//
//	store/redis → servertest.StartRedis (a real redis-server on 127.0.0.1, empty, no disk)
//	            ← RedisServer.Kill / Restart (same port) / Freeze / Thaw: outages on demand
//	store/redis → servertest.StartRedisCluster (N redis-servers in cluster mode on 127.0.0.1:
//	              ADDSLOTS, MEET, wait for cluster_state:ok) ← RedisCluster.Owner / Do: where a key lives
//
// Every server is a child process run by package serverproc: it listens on 127.0.0.1 with a port
// chosen for it, keeps its files in t.TempDir(), and is stopped and waited for when the test ends. A server that is not installed skips the
// test locally and fails it when the CI environment variable is true: CI must never pass by
// skipping.
package servertest
