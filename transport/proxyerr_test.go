package transport

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// proxyErrCase is one answer a proxy (or an origin posing as one) may give, as a response and as
// the answer to a CONNECT.
type proxyErrCase struct {
	name    string
	status  string   // the status line after the version: "403 Filtered"
	kv      []string // header name/value pairs
	plain   pool.Verdict
	connect pool.Verdict
}

// proxyErrAttempts returns the attempt carrying c as a response, and as a refused CONNECT.
func proxyErrAttempts(c proxyErrCase) (plain, connect *Attempt) {
	var code int
	fmt.Sscanf(c.status, "%d", &code)
	h := http.Header{}
	for i := 0; i+1 < len(c.kv); i += 2 {
		h.Add(c.kv[i], c.kv[i+1])
	}
	resp := classifyResp(code, "", false)
	resp.Status, resp.Header = c.status, h
	plain = classifyRespAttempt(resp)
	pce := &ProxyConnectError{Exit: "sq-1", StatusCode: code, Status: c.status, Header: h.Clone()}
	connect = &Attempt{Err: &url.Error{Op: "Get", URL: "https://shop.example/", Err: pce}, Origin: "shop.example", Now: classifyNow}
	return plain, connect
}

func TestProxyErrorReaders(t *testing.T) {
	denied := pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopePair, Class: pool.ClassProxyDenied}
	deniedExit := pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyDenied}
	auth := pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}
	upstream := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassUpstream, Soft: true}
	faultPair := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassProxyError}
	faultExit := pool.Verdict{Outcome: pool.Transient, Scope: pool.ScopeExit, Class: pool.ClassProxyError}
	brokenExit := pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyError}
	dns := pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginDNS}
	badReq := pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassBadRequest}
	tooLarge := pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginError}
	ok4xx := pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx}
	forbidden := pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx, Suspect: true} // a plain 403: the pool judges it
	origin5xx := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx, Soft: true}
	originErr := pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassOriginError}
	connect := pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyConnect}
	squid := func(xe string) []string {
		return []string{"Server", "squid/5.7", "Mime-Version", "1.0", "X-Squid-Error", xe}
	}
	tiny := []string{"Server", "tinyproxy/1.11.1", "Content-Type", "text/html", "Connection", "close"}

	tests := []proxyErrCase{
		// squid, as squid 5.7 answers (see internal/servertest TestSquidErrors).
		{"squid ACL denial", "403 Forbidden", squid("ERR_ACCESS_DENIED 0"), denied, denied},
		{"squid custom deny_info page", "403 Forbidden", squid("ERR_CUSTOM_ACCESS_DENIED 0"), denied, denied},
		{"squid deny_info redirect", "302 Found", squid("302 Access Denied"), denied, denied},
		{"squid connect failure", "503 Service Unavailable", squid("ERR_CONNECT_FAIL 111"), upstream, upstream},
		{"squid read timeout", "504 Gateway Timeout", squid("ERR_READ_TIMEOUT 0"), upstream, upstream},
		{"squid 5 name lookup (plain)", "502 Bad Gateway", squid("ERR_READ_ERROR 0"), upstream, upstream},
		{"squid 5 name lookup (CONNECT)", "500 Internal Server Error", squid("ERR_CANNOT_FORWARD 0"), upstream, upstream},
		{"squid name lookup", "503 Service Unavailable", squid("ERR_DNS_FAIL 0"), dns, dns},
		{"squid bad URL", "400 Bad Request", squid("ERR_INVALID_URL 0"), badReq, badReq},
		{"squid too big", "403 Forbidden", squid("ERR_TOO_BIG 0"), badReq, badReq},
		{"squid unsupported request", "501 Not Implemented", squid("ERR_UNSUP_REQ 0"), badReq, badReq},
		{"squid shutting down", "503 Service Unavailable", squid("ERR_SHUTTING_DOWN 0"), faultPair, faultExit},
		{"squid authentication", "403 Forbidden", squid("ERR_CACHE_ACCESS_DENIED 0"), auth, auth},
		{"squid unlisted error", "404 Not Found", squid("ERR_FTP_NOT_FOUND 0"), ok4xx, connect},
		{"squid page without X-Squid-Error", "403 Forbidden", []string{"Server", "squid/5.7", "Mime-Version", "1.0"}, forbidden, denied},
		{"squid marker with leading space", "403 Forbidden", squid(" ERR_ACCESS_DENIED 0"), denied, denied},

		// tinyproxy 1.11.1's own answers.
		{"tinyproxy filter", "403 Filtered", tiny, denied, denied},
		{"tinyproxy ConnectPort", "403 Access violation", tiny, denied, denied},
		{"tinyproxy client ACL", "403 Access denied", tiny, denied, deniedExit},
		{"tinyproxy wrong credentials", "401 Unauthorized", tiny, auth, auth},
		{"tinyproxy connect or lookup failure", "500 Unable to connect", tiny, upstream, upstream},
		{"tinyproxy upstream proxy down", "502 Unable to connect to upstream proxy", tiny, faultPair, faultExit},
		{"tinyproxy internal error", "503 Internal error", tiny, faultPair, faultExit},
		{"tinyproxy bad request", "400 Bad Request", tiny, badReq, badReq},
		{"tinyproxy unknown method", "501 Not Implemented", tiny, badReq, badReq},
		{"tinyproxy's header, standard phrase", "500 Internal Server Error", tiny, originErr, connect},
		{"another server, tinyproxy's phrase", "500 Unable to connect", []string{"Server", "nginx"}, originErr, connect},
		{"tinyproxy header in other case", "403 Filtered", []string{"Server", "TinyProxy/1.8.4"}, denied, denied},

		// RFC 9209 Proxy-Status.
		{"proxy-status refused", "502 Bad Gateway", []string{"Proxy-Status", "brd.superproxy.io; error=connection_refused"}, upstream, upstream},
		{"proxy-status denied, details with commas", "403 Forbidden",
			[]string{"Proxy-Status", `exit; error=http_request_denied; details="no, never; error=dns_error"`}, denied, denied},
		{"proxy-status details first", "504 Gateway Timeout",
			[]string{"Proxy-Status", `exit; details="a, b; error=http_request_denied"; error=connection_timeout`}, upstream, upstream},
		{"proxy-status nearer the origin, forwarded", "502 Bad Gateway",
			[]string{"Proxy-Status", "cdn; error=connection_refused, exit; received-status=502"}, origin5xx, upstream},
		{"proxy-status last member errs", "503 Service Unavailable",
			[]string{"Proxy-Status", `cdn; received-status=503, exit; error=dns_error; rcode="NXDOMAIN"`}, dns, dns},
		{"proxy-status two lines", "502 Bad Gateway",
			[]string{"Proxy-Status", "a; error=dns_error", "Proxy-Status", "b; error=connection_refused"}, upstream, upstream},
		{"proxy-status quoted name", "503 Service Unavailable", []string{"Proxy-Status", `"my, proxy"; error=proxy_internal_error`}, faultPair, faultExit},
		{"proxy-status loop", "502 Bad Gateway", []string{"Proxy-Status", "exit; error=proxy_loop_detected"}, pool.Verdict{Outcome: pool.Permanent, Class: pool.ClassProxyError}, brokenExit},
		{"proxy-status body too big", "502 Bad Gateway", []string{"Proxy-Status", "exit; error=http_response_body_size"}, tooLarge, tooLarge},
		{"proxy-status request error", "400 Bad Request", []string{"Proxy-Status", "exit; error=http_request_error"}, badReq, badReq},
		{"proxy-status internal response", "502 Bad Gateway", []string{"Proxy-Status", "exit; error=proxy_internal_response"}, origin5xx, upstream},
		{"proxy-status unknown error", "502 Bad Gateway", []string{"Proxy-Status", "exit; error=gremlins"}, origin5xx, upstream},
		{"proxy-status unterminated string", "502 Bad Gateway", []string{"Proxy-Status", `exit; error=connection_refused; details="oops`}, origin5xx, upstream},
		{"proxy-status unbalanced inner list", "502 Bad Gateway", []string{"Proxy-Status", "(a b; error=connection_refused"}, origin5xx, upstream},
		{"proxy-status boolean parameter", "502 Bad Gateway", []string{"Proxy-Status", "exit; flag; error=connection_refused"}, upstream, upstream},
		{"proxy-status empty", "502 Bad Gateway", []string{"Proxy-Status", ""}, origin5xx, upstream},

		// Zyte Smart Proxy Manager.
		{"zyte banned", "503 Service Unavailable", []string{"X-Crawlera-Error", "banned"},
			pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: "zyte"},
			pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: "zyte"}},
		{"zyte no proxies", "503 Service Unavailable", []string{"X-Crawlera-Error", "noslaves"}, faultPair, faultExit},
		{"zyte domain forbidden", "403 Forbidden", []string{"X-Crawlera-Error", "domain_forbidden"}, denied, denied},
		{"zyte nxdomain", "502 Bad Gateway", []string{"X-Crawlera-Error", "nxdomain"}, dns, dns},
		{"zyte refused", "502 Bad Gateway", []string{"X-Crawlera-Error", "econnrefused"}, upstream, upstream},
		{"zyte bad header", "540 Bad Header Value", []string{"X-Crawlera-Error", "bad_header"}, badReq, badReq},
		{"zyte client gone", "499 Client Closed", []string{"X-Crawlera-Error", "client_conn_closed"},
			pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}, pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}},
		{"zyte unknown value", "503 Service Unavailable", []string{"X-Crawlera-Error", "data_error"}, origin5xx, upstream},

		// Bright Data.
		{"brightdata restricted target", "403 Forbidden", []string{"X-Brd-Err-Code", "any-code", "X-Brd-Err-Msg", "restricted"}, denied, denied},
		{"brightdata auto-throttle", "429 Too Many Requests", []string{"X-Brd-Error-Code", "sr_rate_limit"},
			pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited}, pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited}},
		{"brightdata no peers (luminati)", "502 Bad Gateway", []string{"X-Luminati-Error-Code", "expect_element"}, upstream, upstream},
		{"brightdata internal", "500 Internal Server Error", []string{"X-Brd-Error", "oops"}, faultPair, faultExit},
		{"brightdata missing header", "411 Length Required", []string{"X-Brd-Err-Msg", "missing"}, badReq, badReq},

		// Oxylabs: a generic header name, trusted on a response only with its own statuses.
		{"oxylabs no exit", "525 No Exit Found", []string{"X-Error-Description", "No exit found"}, faultPair, faultExit},
		{"oxylabs timeout", "522 Timeout", []string{"X-Error-Description", "Timeout"}, upstream, upstream},
		{"oxylabs restricted target", "403 Access Denied", []string{"X-Error-Description", "Restricted target"}, forbidden, denied},
		{"oxylabs internal", "500 Internal Server Error", []string{"X-Error-Description", "internal"}, originErr, faultExit},
		{"oxylabs bad request", "400 Bad Request", []string{"X-Error-Description", "parse"}, ok4xx, badReq},

		// The status alone.
		{"plain 403", "403 Forbidden", nil, forbidden, denied},
		{"plain 502", "502 Bad Gateway", nil, origin5xx, upstream},
		{"plain 500", "500 Internal Server Error", nil, originErr, connect},
		{"407 whatever it says", "407 Proxy Authentication Required", squid("ERR_ACCESS_DENIED 0"), auth, auth},
	}
	for i, tt := range tests {
		plain, conn := proxyErrAttempts(tt)
		if got := DefaultClassifier.Classify(plain); got != tt.plain {
			t.Errorf("step %d (%s): Classify(response %s) = %+v, want %+v", i, tt.name, tt.status, got, tt.plain)
		}
		if got := DefaultClassifier.Classify(conn); got != tt.connect {
			t.Errorf("step %d (%s): Classify(CONNECT %s) = %+v, want %+v", i, tt.name, tt.status, got, tt.connect)
		}
	}
}

func TestProxyErrorReadersOff(t *testing.T) {
	c := &StandardClassifier{Detectors: DefaultDetectors}
	plain, conn := proxyErrAttempts(proxyErrCase{status: "403 Forbidden", kv: []string{"X-Squid-Error", "ERR_ACCESS_DENIED 0"}})
	if got, want := c.Classify(plain), (pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx, Suspect: true}); got != want {
		t.Errorf("Classify(squid 403) without readers = %+v, want %+v", got, want)
	}
	// A CONNECT refused 403 is the pair's by its status alone.
	if got, want := c.Classify(conn), (pool.Verdict{Outcome: pool.Permanent, Class: pool.ClassProxyDenied}); got != want {
		t.Errorf("Classify(CONNECT 403) without readers = %+v, want %+v", got, want)
	}
	plain, conn = proxyErrAttempts(proxyErrCase{status: "503 Service Unavailable", kv: []string{"X-Squid-Error", "ERR_DNS_FAIL 0"}})
	if got, want := c.Classify(conn), (pool.Verdict{Outcome: pool.Transient, Class: pool.ClassUpstream, Soft: true}); got != want {
		t.Errorf("Classify(CONNECT 503) without readers = %+v, want %+v", got, want)
	}
}

func TestProxyErrorReaderVerdictsMadeConsistent(t *testing.T) {
	tests := []struct {
		name    string
		give    pool.Verdict
		connect bool
		want    pool.Verdict
	}{
		{"soft permanent", pool.Verdict{Outcome: pool.Permanent, Class: "x", Soft: true, RetryAfter: time.Second},
			false, pool.Verdict{Outcome: pool.Permanent, Class: "x"}},
		{"detector without a block", pool.Verdict{Outcome: pool.Transient, Class: "x", Detector: "d"},
			false, pool.Verdict{Outcome: pool.Transient, Class: "x", RetryAfter: 30 * time.Second}},
		{"block without a detector", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked},
			false, pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, RetryAfter: 30 * time.Second, Detector: "custom"}},
		{"exit scope on a response", pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: "x"},
			false, pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopePair, Class: "x"}},
		{"exit scope on a CONNECT", pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: "x"},
			true, pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: "x"}},
		{"credentials on a response", pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth},
			false, pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}},
		{"reader's own Retry-After", pool.Verdict{Outcome: pool.Transient, Class: "x", RetryAfter: time.Minute},
			false, pool.Verdict{Outcome: pool.Transient, Class: "x", RetryAfter: time.Minute}},
	}
	for i, tt := range tests {
		c := &StandardClassifier{ProxyErrors: []ProxyErrorReader{
			NewProxyErrorReader("custom", func(r *ProxyReply) (pool.Verdict, bool) { return tt.give, true }),
		}}
		r := &ProxyReply{StatusCode: 503, Header: http.Header{"Retry-After": {"30"}}, Connect: tt.connect}
		got, ok := c.readProxyError(r, classifyNow)
		if !ok || got != tt.want {
			t.Errorf("step %d (%s): readProxyError = %+v, %t; want %+v, true", i, tt.name, got, ok, tt.want)
		}
	}
}

func TestProxyReplyReason(t *testing.T) {
	for _, tt := range []struct{ status, want string }{
		{"403 Filtered", "Filtered"},
		{"502 Unable to connect to upstream proxy", "Unable to connect to upstream proxy"},
		{"403", ""},
		{"403 ", ""},
		{"", ""},
	} {
		if got := (&ProxyReply{Status: tt.status}).Reason(); got != tt.want {
			t.Errorf("ProxyReply{Status: %q}.Reason() = %q, want %q", tt.status, got, tt.want)
		}
	}
}

// TestProxyErrorReadersHostileInput feeds the readers header values no proxy sends: huge, full of
// quotes, escapes, separators and control bytes. Nothing may panic, and each verdict stays one the
// classifier can give.
func TestProxyErrorReadersHostileInput(t *testing.T) {
	big := strings.Repeat("a", 256<<10) // as much as DefaultMaxResponseHeaderBytes lets through
	values := []string{
		big, strings.Repeat(`"`, 1<<16), strings.Repeat(`\`, 1<<16), strings.Repeat(",", 1<<16),
		strings.Repeat("(", 1<<16), strings.Repeat(";error=", 1<<14), strings.Repeat(`"\`, 1<<15),
		"x; error=" + big, `x; error="connection_refused"`, "x;error", "x;=;=;=", ";", "\x00\xff\r\n", "ERR_",
		"ERR_\x00_DENIED", "999 Access Denied", "\u202eERR_ACCESS_DENIED", "tinyproxy/",
	}
	headers := []string{"X-Squid-Error", "Proxy-Status", "X-Crawlera-Error", "X-Brd-Err-Code", "X-Error-Description", "Server"}
	for _, code := range []int{300, 302, 400, 403, 429, 500, 502, 503, 525, 999, 1 << 30} {
		for _, name := range headers {
			for _, val := range values {
				for _, status := range []string{fmt.Sprintf("%d %.300s", code, val), fmt.Sprint(code)} {
					plain, conn := proxyErrAttempts(proxyErrCase{status: status})
					h := http.Header{name: {val, val}}
					plain.Response.StatusCode, plain.Response.Header = code, h
					pce := conn.Err.(*url.Error).Err.(*ProxyConnectError)
					pce.StatusCode, pce.Header = code, h
					for _, a := range []*Attempt{plain, conn} {
						v := DefaultClassifier.Classify(a)
						if v.Outcome > pool.Neutral || v.Scope > pool.ScopeOrigin || !fuzzClassifyClasses[v.Class] ||
							(v.Soft && v.Outcome != pool.Transient) || (v.Detector != "") != (v.Class == pool.ClassBlocked) {
							t.Fatalf("Classify(%d, %s: %.40q, connect %t) = %+v: out of range", code, name, val, a == conn, v)
						}
					}
				}
			}
		}
	}
}

func TestProxyStatusError(t *testing.T) {
	for _, tt := range []struct{ field, want string }{
		{"p; error=dns_error", "dns_error"},
		{"p;error=dns_error;rcode=NXDOMAIN", "dns_error"},
		{`"a,b"; error=x`, "x"},
		{`p; details="\"; error=no\""; error=yes`, "yes"},
		{"a; error=one, b", ""},
		{"a, b; error=two", "two"},
		{"a, (x y); error=z", "z"},
		{`p; error="quoted"`, `"quoted"`},
		{"p; error", ""},
		{"p error=x", ""},
		{`p; details="open`, ""},
		{"", ""},
	} {
		if got := proxyStatusError(tt.field); got != tt.want {
			t.Errorf("proxyStatusError(%q) = %q, want %q", tt.field, got, tt.want)
		}
	}
}

func FuzzProxyErrors(f *testing.F) {
	for _, s := range []struct {
		code                               int
		reason, squid, server, ps, crawler string
		connect                            bool
	}{
		{403, "Forbidden", "ERR_ACCESS_DENIED 0", "squid/5.7", "", "", false},
		{503, "Service Unavailable", "ERR_CONNECT_FAIL 111", "squid/5.7", "", "", true},
		{403, "Filtered", "", "tinyproxy/1.11.1", "", "", false},
		{500, "Unable to connect", "", "tinyproxy/1.11.1", "", "", true},
		{502, "Bad Gateway", "", "", `a; error=connection_refused, b; details="x, y"; error=dns_error`, "", false},
		{503, "Service Unavailable", "", "", "", "banned", false},
		{401, "Unauthorized", "", "tinyproxy/", "", "", false},
	} {
		f.Add(s.code, s.reason, s.squid, s.server, s.ps, s.crawler, s.connect)
	}
	f.Fuzz(func(t *testing.T, code int, reason, squid, server, ps, crawler string, connect bool) {
		h := http.Header{}
		for _, kv := range [][2]string{{"X-Squid-Error", squid}, {"Server", server}, {"Proxy-Status", ps}, {"X-Crawlera-Error", crawler}} {
			if kv[1] != "" {
				h.Set(kv[0], kv[1])
			}
		}
		c := proxyErrCase{status: fmt.Sprintf("%d %s", code, reason)}
		plain, conn := proxyErrAttempts(c)
		plain.Response.StatusCode, plain.Response.Header = code, h
		conn.Err.(*url.Error).Err.(*ProxyConnectError).StatusCode = code
		conn.Err.(*url.Error).Err.(*ProxyConnectError).Header = h
		a := plain
		if connect {
			a = conn
		}
		v := DefaultClassifier.Classify(a)
		if v.Outcome > pool.Neutral || v.Scope > pool.ScopeOrigin || !fuzzClassifyClasses[v.Class] || v.RetryAfter < 0 {
			t.Fatalf("Classify = %+v: a field out of range", v)
		}
		if (v.Soft && v.Outcome != pool.Transient) || (v.Detector != "") != (v.Class == pool.ClassBlocked) {
			t.Fatalf("Classify = %+v: inconsistent", v)
		}
		if !connect && v.Scope == pool.ScopeExit && v.Class != pool.ClassProxyAuth {
			t.Fatalf("Classify(response %d) = %+v: a response blamed the exit for every origin", code, v)
		}
		if code == http.StatusProxyAuthRequired && v != proxyRejectsCredentials {
			t.Fatalf("Classify(407) = %+v, want %+v", v, proxyRejectsCredentials)
		}
	})
}
