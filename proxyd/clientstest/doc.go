// Package clientstest drives proxybreakerd's proxy (package proxyd) with the real clients users
// point at it — curl, headless Chromium, Python requests and Scrapy — and counts, at the origin,
// which exit each request came through. It holds tests only.
//
//	curl / chromium / python3 (requests, scrapy) → proxyd.Server on 127.0.0.1 (in process)
//	  → exits: proxytest proxies and a real tinyproxy, each leaving from a loopback address of its
//	    own (127.0.0.2, 127.0.0.3, …) → sites on 127.0.0.1 (HTTP, and HTTPS with a test CA) that
//	    count requests by the source address they see and ban one exit as a site bans an IP
//
// What a test asserts comes from the sites' counts, never from the daemon's own word: a ban on one
// exit for one site is routed around when the site stops seeing that source while another site
// still does. A client or Python module that is not installed skips a test locally and fails it
// under CI=true (servertest.ClientBinary, servertest.PythonModules).
package clientstest
