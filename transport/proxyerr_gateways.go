package transport

import (
	"net/http"

	"github.com/proxybreaker/proxybreaker/pool"
)

// Commercial gateways: one proxy address in front of a provider's network, answering errors of its
// own with headers it documents.
var (
	// ZyteErrors reads Zyte Smart Proxy Manager's (formerly Crawlera) X-Crawlera-Error header, set on
	// every error the gateway makes itself (https://docs.zyte.com/smart-proxy-manager/errors.html).
	// The values are those of Zyte's error reference and of Zyte's own client,
	// github.com/scrapy-plugins/scrapy-zyte-smartproxy ("banned" and "noslaves" with 503,
	// "bad_proxy_auth" with 407).
	//
	//	banned (its retries through several IPs were all banned)    transient  pair    blocked ("zyte")
	//	domain_forbidden                                            permanent  pair    proxy_denied
	//	bad_proxy_auth                                              permanent  exit    proxy_auth
	//	noslaves, serverbusy, too_many_conns                        transient  exit    proxy_error
	//	nxdomain                                                    neutral    origin  origin_dns
	//	econnrefused, econnreset, ehostunreach, timeout,            transient  pair    upstream (soft)
	//	  msgtimeout, socket_closed_remotely
	//	bad_session_id, user_session_limit, bad_header              neutral    origin  bad_request
	//	client_conn_closed                                          neutral    -       canceled
	ZyteErrors = NewProxyErrorReader("zyte", readZyte)

	// BrightDataErrors reads Bright Data's error headers: x-brd-err-code and x-brd-err-msg (its
	// proxy error catalog, docs.brightdata.com/proxy-networks/errorCatalog), x-brd-error-code and
	// x-brd-error (SERP API, docs.brightdata.com/scraping-automation/serp-api/debugging), and the
	// older x-luminati-error-code and x-luminati-error (help.brightdata.com, "Error code 502"). The
	// codes change with the catalog, so the verdict comes from the status of an answer that carries
	// one of them; the RFC 9209 Proxy-Status that Bright Data sends beside them, read first by
	// ProxyStatusErrors, is more precise.
	//
	//	403 (a target the provider restricts)                       permanent  pair    proxy_denied
	//	429 (auto-throttled for this domain)                        transient  pair    rate_limited
	//	502, 503, 504 (no peer, the target closed or timed out)     transient  pair    upstream (soft)
	//	500                                                         transient  exit    proxy_error
	//	other 4xx (a header or cookie the zone does not allow)      neutral    origin  bad_request
	BrightDataErrors = NewProxyErrorReader("brightdata", readBrightData)

	// OxylabsErrors reads Oxylabs' X-Error-Description header, which "errors originating from our
	// infrastructure" carry and errors of the target never do
	// (https://developers.oxylabs.io/proxies/residential-proxies/additional-information). Its name is
	// generic, so on a response it is only read with Oxylabs' own statuses and with those that
	// count as an origin's 502 or 504 anyway; on the answer to a CONNECT, which only the proxy makes,
	// with every documented status.
	//
	//	525 No Exit Found                                           transient  exit    proxy_error
	//	502 Bad Gateway, 504 Timeout, 522 Timeout                   transient  pair    upstream (soft)
	//	500 Internal Server Error (CONNECT only)                    transient  exit    proxy_error
	//	403 Access Denied, restricted target (CONNECT only)         permanent  pair    proxy_denied
	//	400 Bad Request (CONNECT only)                              neutral    origin  bad_request
	OxylabsErrors = NewProxyErrorReader("oxylabs", readOxylabs)
)

var zyteErrors = map[string]pool.Verdict{
	"banned":           {Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: "zyte"},
	"domain_forbidden": proxyDenied,
	"bad_proxy_auth":   proxyRejectsCredentials,

	"noslaves":       proxyFault,
	"serverbusy":     proxyFault,
	"too_many_conns": proxyFault,

	"nxdomain": targetNameUnknown,

	"econnrefused":           upstreamUnreachable,
	"econnreset":             upstreamUnreachable,
	"ehostunreach":           upstreamUnreachable,
	"timeout":                upstreamUnreachable,
	"msgtimeout":             upstreamUnreachable,
	"socket_closed_remotely": upstreamUnreachable,

	"bad_session_id":     requestRefused,
	"user_session_limit": requestRefused,
	"bad_header":         requestRefused,

	"client_conn_closed": {Outcome: pool.Neutral, Class: pool.ClassCanceled},
}

func readZyte(r *ProxyReply) (pool.Verdict, bool) {
	code := headerValue(r.Header, "X-Crawlera-Error")
	if code == "" {
		return pool.Verdict{}, false
	}
	v, ok := zyteErrors[code]
	return v, ok
}

// brightDataHeaders are the headers whose presence says Bright Data made the answer.
var brightDataHeaders = [...]string{
	"X-Brd-Err-Code", "X-Brd-Err-Msg", "X-Brd-Error-Code", "X-Brd-Error", "X-Luminati-Error-Code", "X-Luminati-Error",
}

func readBrightData(r *ProxyReply) (pool.Verdict, bool) {
	found := false
	for _, h := range brightDataHeaders {
		if headerValue(r.Header, h) != "" {
			found = true
			break
		}
	}
	if !found {
		return pool.Verdict{}, false
	}
	switch code := r.StatusCode; {
	case code == http.StatusForbidden:
		return proxyDenied, true
	case code == http.StatusTooManyRequests:
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited}, true
	case code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout:
		return upstreamUnreachable, true
	case code == http.StatusInternalServerError:
		return proxyFault, true
	case code >= 400 && code < 500:
		return requestRefused, true
	}
	return pool.Verdict{}, false
}

// Oxylabs' own statuses beyond the standard ones.
const (
	oxylabsTimeout     = 522
	oxylabsNoExitFound = 525
)

func readOxylabs(r *ProxyReply) (pool.Verdict, bool) {
	if headerValue(r.Header, "X-Error-Description") == "" {
		return pool.Verdict{}, false
	}
	switch r.StatusCode {
	case oxylabsNoExitFound:
		return proxyFault, true
	case http.StatusBadGateway, http.StatusGatewayTimeout, oxylabsTimeout:
		return upstreamUnreachable, true
	case http.StatusInternalServerError:
		return proxyFault, r.Connect
	case http.StatusForbidden:
		return proxyDenied, r.Connect
	case http.StatusBadRequest:
		return requestRefused, r.Connect
	}
	return pool.Verdict{}, false
}
