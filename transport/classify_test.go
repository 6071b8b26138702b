package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"

	"golang.org/x/net/proxy"
)

// classifyNow is the instant every attempt in this file arrives at.
var classifyNow = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// classifyResp builds a synthetic response. kv are header name/value pairs. The Content-Length
// is the body's unless unknownLen.
func classifyResp(code int, body string, unknownLen bool, kv ...string) *http.Response {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	cl := int64(len(body))
	if unknownLen {
		cl = -1
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", code, http.StatusText(code)),
		StatusCode:    code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: cl,
	}
}

// classifyRespAttempt wraps resp in an Attempt at classifyNow.
func classifyRespAttempt(resp *http.Response) *Attempt {
	return &Attempt{Response: resp, Origin: "shop.example", Now: classifyNow}
}

// classifyClosedAddr returns a 127.0.0.1 address nothing listens on.
func classifyClosedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// classifyDialRefused returns the error net.Dial gives for a closed port: a real *net.OpError
// wrapping ECONNREFUSED.
func classifyDialRefused(t *testing.T) error {
	t.Helper()
	c, err := net.Dial("tcp", classifyClosedAddr(t))
	if err == nil {
		c.Close()
		t.Fatal("net.Dial to a closed port succeeded")
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("net.Dial to a closed port = %v, want ECONNREFUSED", err)
	}
	return err
}

// classifyProxyRefused returns the error a real http.Client gives when its HTTP proxy refuses
// the connection: net/http wraps the dial's *net.OpError in a "proxyconnect" one.
func classifyProxyRefused(t *testing.T, target string) error {
	t.Helper()
	pu := &url.URL{Scheme: "http", Host: classifyClosedAddr(t)}
	tr := &http.Transport{Proxy: http.ProxyURL(pu)}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := c.Get(target)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("GET %s through a closed proxy succeeded", target)
	}
	return err
}

// classifySOCKSRefused returns the error x/net/proxy's SOCKS5 dialer gives when the proxy refuses
// the connection: a "socks connect" *net.OpError wrapping the dial's.
func classifySOCKSRefused(t *testing.T) error {
	t.Helper()
	d, err := proxy.SOCKS5("tcp", classifyClosedAddr(t), nil, proxy.Direct)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.(proxy.ContextDialer).DialContext(context.Background(), "tcp", "shop.example:443")
	if err == nil {
		c.Close()
		t.Fatal("SOCKS5 dial through a closed proxy succeeded")
	}
	return err
}

// classifyTLSUnknownAuthority returns the error a real client gives for a server certificate
// signed by an unknown authority.
func classifyTLSUnknownAuthority(t *testing.T) error {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the rejected handshake is the point
	srv.StartTLS()
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(srv.URL)
	if err == nil {
		resp.Body.Close()
		t.Fatal("GET with an untrusted certificate succeeded")
	}
	var ua x509.UnknownAuthorityError
	if !errors.As(err, &ua) {
		t.Fatalf("GET with an untrusted certificate = %v, want an x509.UnknownAuthorityError", err)
	}
	return err
}

// classifyTimeoutErr is a net.Error that timed out.
type classifyTimeoutErr struct{}

func (classifyTimeoutErr) Error() string   { return "i/o timeout" }
func (classifyTimeoutErr) Timeout() bool   { return true }
func (classifyTimeoutErr) Temporary() bool { return true }

func TestDefaultClassifierResponses(t *testing.T) {
	ra := func(s string) string { return s } // readability: a Retry-After value
	cfChallenge := "<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>Checking your browser</body></html>"
	bigWithLateCaptcha := "<html><body>" + strings.Repeat("<p>catalogue</p>", 400) + `<div class="g-recaptcha"></div></body></html>`
	bigWithEarlyCaptcha := `<html><body><div class="g-recaptcha"></div>` + strings.Repeat("<p>catalogue</p>", 400) + "</body></html>"
	huge := `<html><body><div class="g-recaptcha"></div>` + strings.Repeat("x", 40<<10) + "</body></html>"
	blocked := func(det string, retry time.Duration) pool.Verdict {
		return pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: det, RetryAfter: retry}
	}
	ok := pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}
	origin4xx := pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx}
	forbidden := pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx, Suspect: true} // the pool judges it
	tests := []struct {
		name       string
		code       int
		body       string
		unknownLen bool
		kv         []string
		want       pool.Verdict
	}{
		{name: "200", code: 200, body: "hello", want: ok},
		{name: "204", code: 204, want: ok},
		{name: "301", code: 301, kv: []string{"Location", "/elsewhere"}, want: ok},
		{name: "304", code: 304, want: ok},
		{name: "404", code: 404, body: "not found", want: origin4xx},
		{name: "400", code: 400, want: origin4xx},
		{name: "401", code: 401, want: origin4xx},
		{name: "418", code: 418, body: "I'm a teapot", want: origin4xx},
		{name: "451", code: 451, want: origin4xx},
		{name: "403 plain", code: 403, body: "<html><body>Forbidden</body></html>", kv: []string{"Content-Type", "text/html"}, want: forbidden},
		{name: "403 plain with Retry-After", code: 403, body: "Forbidden", kv: []string{"Retry-After", "30"}, want: forbidden},
		{name: "403 cloudflare server, ordinary page", code: 403, body: "<html>nope</html>", kv: []string{"Server", "cloudflare"}, want: forbidden},

		{name: "429 seconds", code: 429, kv: []string{"Retry-After", ra("120")},
			want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: 120 * time.Second}},
		{name: "429 HTTP-date", code: 429, kv: []string{"Retry-After", classifyNow.Add(90 * time.Second).Format(http.TimeFormat)},
			want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: 90 * time.Second}},
		{name: "429 past HTTP-date", code: 429, kv: []string{"Retry-After", classifyNow.Add(-time.Hour).Format(http.TimeFormat)},
			want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited}},
		{name: "429 no Retry-After", code: 429, body: "slow down",
			want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited}},
		{name: "429 bad Retry-After", code: 429, kv: []string{"Retry-After", "-5"},
			want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited}},
		{name: "429 captcha page", code: 429, body: `<div class="h-captcha"></div>`, kv: []string{"Retry-After", "60"},
			want: blocked("captcha", 60*time.Second)},

		{name: "403 cf-mitigated", code: 403, body: cfChallenge, kv: []string{"Cf-Mitigated", "challenge", "Server", "cloudflare"},
			want: blocked("cloudflare", 0)},
		{name: "403 cf-mitigated, empty body", code: 403, kv: []string{"Cf-Mitigated", "challenge"},
			want: blocked("cloudflare", 0)},
		{name: "403 cloudflare title", code: 403, body: cfChallenge, kv: []string{"Server", "cloudflare", "Content-Type", "text/html"},
			want: blocked("cloudflare", 0)},
		{name: "403 cloudflare title, unknown length", code: 403, body: cfChallenge, unknownLen: true, kv: []string{"Server", "cloudflare"},
			want: blocked("cloudflare", 0)},
		{name: "503 cloudflare title with Retry-After", code: 503, body: cfChallenge, kv: []string{"Cf-Ray", "8a1b2c3d4e5f-LHR", "Retry-After", "30"},
			want: blocked("cloudflare", 30*time.Second)},
		{name: "200 cf-mitigated, unknown length", code: 200, body: cfChallenge, unknownLen: true,
			kv: []string{"Cf-Mitigated", "challenge", "Content-Type", "text/html; charset=UTF-8"}, want: blocked("cloudflare", 0)},
		{name: "200 cloudflare title without cf-mitigated (issue 12)", code: 200, body: cfChallenge,
			kv: []string{"Server", "cloudflare", "Content-Type", "text/html"}, want: blocked("cloudflare", 0)},
		{name: "403 datadome", code: 403, body: `<script src="https://ct.captcha-delivery.com/c.js"></script>`,
			want: blocked("datadome", 0)},
		{name: "403 datadome header", code: 403, kv: []string{"X-Datadome", "protected"}, want: blocked("datadome", 0)},
		{name: "403 perimeterx", code: 403, body: `<div id="px-captcha"></div>`, want: blocked("perimeterx", 0)},
		{name: "403 akamai", code: 403,
			body: "<HTML><HEAD><TITLE>Access Denied</TITLE></HEAD><BODY>You don't have permission. Reference #18.abc.1712345678.deadbeef</BODY></HTML>",
			want: blocked("akamai", 0)},
		{name: "403 recaptcha", code: 403, body: `<div class="g-recaptcha" data-sitekey="x"></div>`, want: blocked("captcha", 0)},
		{name: "403 hcaptcha", code: 403, body: `<script src="https://hcaptcha.com/1/api.js"></script>`, want: blocked("captcha", 0)},
		{name: "403 turnstile", code: 403, body: `<div class="cf-turnstile"></div>`, want: blocked("captcha", 0)},
		{name: "200 small recaptcha page", code: 200, body: `<html><div class="g-recaptcha"></div></html>`,
			kv: []string{"Content-Type", "text/html"}, want: blocked("captcha", 0)},
		{name: "200 small hcaptcha page", code: 200, body: `<html><div class="h-captcha"></div></html>`,
			kv: []string{"Content-Type", "text/html"}, want: blocked("captcha", 0)},
		{name: "200 small turnstile page", code: 200, body: `<script src="https://challenges.cloudflare.com/turnstile/v0/api.js"></script>`,
			kv: []string{"Content-Type", "text/html"}, want: blocked("captcha", 0)},
		{name: "200 captcha beyond the peek window", code: 200, body: bigWithLateCaptcha,
			kv: []string{"Content-Type", "text/html"}, want: ok},
		{name: "200 captcha in an incomplete peek", code: 200, body: bigWithEarlyCaptcha,
			kv: []string{"Content-Type", "text/html"}, want: ok},
		{name: "200 captcha, unknown length", code: 200, body: `<div class="g-recaptcha"></div>`, unknownLen: true,
			kv: []string{"Content-Type", "text/html"}, want: ok},
		{name: "200 captcha, large page", code: 200, body: huge, kv: []string{"Content-Type", "text/html"}, want: ok},
		{name: "200 captcha, json", code: 200, body: `{"widget":"g-recaptcha"}`, kv: []string{"Content-Type", "application/json"}, want: ok},
		{name: "404 captcha", code: 404, body: `<div class="g-recaptcha"></div>`, want: origin4xx},

		{name: "502", code: 502, want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx, Soft: true}},
		{name: "503", code: 503, body: "down", want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx, Soft: true}},
		{name: "503 Retry-After", code: 503, kv: []string{"Retry-After", "60"},
			want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx, Soft: true, RetryAfter: time.Minute}},
		{name: "504", code: 504, want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx, Soft: true}},
		{name: "500", code: 500, body: "stack trace", want: pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassOriginError}},
		{name: "501", code: 501, want: pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassOriginError}},
		{name: "599", code: 599, want: pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassOriginError}},
		{name: "407", code: 407, kv: []string{"Proxy-Authenticate", `Basic realm="proxy"`},
			want: pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}},
		{name: "407 with a captcha body", code: 407, body: `<div class="g-recaptcha"></div>`,
			want: pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}},
	}
	for _, tt := range tests {
		resp := classifyResp(tt.code, tt.body, tt.unknownLen, tt.kv...)
		a := classifyRespAttempt(resp)
		got := DefaultClassifier.Classify(a)
		if got != tt.want {
			t.Errorf("%s: pool.Classify(%d %v) = %+v, want %+v", tt.name, tt.code, tt.kv, got, tt.want)
		}
		if a.Response == nil {
			t.Fatalf("%s: pool.Classify cleared Attempt.Response", tt.name)
		}
		b, err := io.ReadAll(a.Response.Body)
		if err != nil || string(b) != tt.body {
			t.Errorf("%s: body after pool.Classify = %d bytes, %v, want the %d bytes sent, nil", tt.name, len(b), err, len(tt.body))
		}
	}
}

func TestDefaultClassifierErrors(t *testing.T) {
	refused := classifyDialRefused(t)
	proxyRefused := classifyProxyRefused(t, "http://shop.example/")
	proxyRefusedTLS := classifyProxyRefused(t, "https://shop.example/")
	socksRefused := classifySOCKSRefused(t)
	tlsUnknown := classifyTLSUnknownAuthority(t)

	permExit := func(c pool.Class) pool.Verdict {
		return pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: c}
	}
	timeout := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}
	conn := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassConnection, ConnLevel: true}
	upstream := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassUpstream, Soft: true}
	canceled := pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}
	wrapURL := func(err error) error { return &url.Error{Op: "Get", URL: "https://shop.example/", Err: err} }
	dnsNotFound := &net.DNSError{Err: "no such host", Name: "proxy.invalid", IsNotFound: true}

	tests := []struct {
		name       string
		err        error
		callerDone bool
		timedOut   bool
		want       pool.Verdict
	}{
		{name: "CONNECT 407", err: &ProxyConnectError{Exit: "dc-1", StatusCode: 407}, want: permExit(pool.ClassProxyAuth)},
		{name: "CONNECT 407 in url.Error", err: wrapURL(&ProxyConnectError{Exit: "dc-1", StatusCode: 407}), want: permExit(pool.ClassProxyAuth)},
		{name: "CONNECT 407 wrapped", err: fmt.Errorf("attempt: %w", &ProxyConnectError{StatusCode: 407}), want: permExit(pool.ClassProxyAuth)},
		{name: "CONNECT 401 (tinyproxy's wrong credentials)", err: &ProxyConnectError{Exit: "dc-1", StatusCode: 401}, want: permExit(pool.ClassProxyAuth)},
		// A proxy's 403 to a CONNECT refuses that target (its ACL, a filter, a port): the pair, not the exit.
		{name: "CONNECT 403", err: &ProxyConnectError{Exit: "dc-1", StatusCode: 403},
			want: pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopePair, Class: pool.ClassProxyDenied}},
		{name: "CONNECT 400", err: &ProxyConnectError{Exit: "dc-1", StatusCode: 400}, want: permExit(pool.ClassProxyConnect)},
		{name: "CONNECT 500", err: &ProxyConnectError{Exit: "dc-1", StatusCode: 500}, want: permExit(pool.ClassProxyConnect)},
		{name: "CONNECT 502", err: &ProxyConnectError{Exit: "dc-1", StatusCode: 502}, want: upstream},
		{name: "CONNECT 503", err: wrapURL(&ProxyConnectError{Exit: "dc-1", StatusCode: 503}), want: upstream},
		{name: "CONNECT 504", err: &ProxyConnectError{Exit: "dc-1", StatusCode: 504}, want: upstream},

		{name: "dial refused", err: refused, want: permExit(pool.ClassProxyRefused)},
		{name: "dial refused in url.Error", err: wrapURL(refused), want: permExit(pool.ClassProxyRefused)},
		{name: "http proxy refused (proxyconnect)", err: proxyRefused, want: permExit(pool.ClassProxyRefused)},
		{name: "http proxy refused, https target", err: proxyRefusedTLS, want: permExit(pool.ClassProxyRefused)},
		{name: "socks proxy refused", err: socksRefused, want: permExit(pool.ClassProxyRefused)},
		{name: "socks proxy refused in url.Error", err: wrapURL(socksRefused), want: permExit(pool.ClassProxyRefused)},
		{name: "refused after the dial", err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNREFUSED)}, want: conn},

		{name: "proxy DNS", err: dnsNotFound, want: permExit(pool.ClassProxyDNS)},
		{name: "proxy DNS in dial", err: wrapURL(&net.OpError{Op: "dial", Net: "tcp", Err: dnsNotFound}), want: permExit(pool.ClassProxyDNS)},
		{name: "proxy DNS timeout", err: &net.DNSError{Err: "i/o timeout", Name: "proxy.example", IsTimeout: true}, want: timeout},
		{name: "origin DNS (socks5 local)", err: &originDNSError{dnsNotFound}, want: pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginDNS}},

		{name: "net.Error timeout", err: classifyTimeoutErr{}, want: timeout},
		{name: "net.Error timeout in url.Error", err: wrapURL(classifyTimeoutErr{}), want: timeout},
		{name: "os.ErrDeadlineExceeded", err: os.ErrDeadlineExceeded, want: timeout},
		{name: "read deadline", err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, want: timeout},
		{name: "header timeout", err: errHeaderTimeout, want: timeout},
		{name: "TimedOut", err: context.Canceled, timedOut: true, want: timeout},
		{name: "TimedOut with EOF", err: io.EOF, timedOut: true, want: timeout},

		{name: "EOF", err: io.EOF, want: conn},
		{name: "EOF in url.Error", err: wrapURL(io.EOF), want: conn},
		{name: "unexpected EOF", err: io.ErrUnexpectedEOF, want: conn},
		{name: "reset", err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, want: conn},
		{name: "reset syscall error", err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, want: conn},
		{name: "broken pipe", err: &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}, want: conn},
		{name: "aborted", err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNABORTED}, want: conn},
		{name: "closed", err: net.ErrClosed, want: conn},

		{name: "tls unknown authority, real", err: tlsUnknown, want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTLS, ConnLevel: true}},
		{name: "tls unknown authority", err: x509.UnknownAuthorityError{}, want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTLS, ConnLevel: true}},
		{name: "tls verification error", err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}},
			want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTLS, ConnLevel: true}},
		{name: "tls hostname", err: wrapURL(x509.HostnameError{Host: "shop.example", Certificate: &x509.Certificate{}}),
			want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTLS, ConnLevel: true}},
		{name: "tls alert", err: tls.AlertError(40), want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTLS, ConnLevel: true}},
		{name: "tls record header", err: tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"},
			want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTLS, ConnLevel: true}},

		{name: "context canceled, not the caller's", err: context.Canceled, want: canceled},
		{name: "other", err: errors.New("boom"), want: pool.Verdict{Outcome: pool.Transient, Class: pool.ClassError}},

		// CallerDone wins, whatever the error.
		{name: "CallerDone canceled", err: context.Canceled, callerDone: true, want: canceled},
		{name: "CallerDone deadline", err: context.DeadlineExceeded, callerDone: true, want: canceled},
		{name: "CallerDone CONNECT 407", err: &ProxyConnectError{StatusCode: 407}, callerDone: true, want: canceled},
		{name: "CallerDone refused", err: refused, callerDone: true, want: canceled},
		{name: "CallerDone DNS", err: dnsNotFound, callerDone: true, want: canceled},
		{name: "CallerDone EOF", err: io.EOF, callerDone: true, want: canceled},
		{name: "CallerDone timeout", err: classifyTimeoutErr{}, callerDone: true, timedOut: true, want: canceled},
		{name: "CallerDone tls", err: tlsUnknown, callerDone: true, want: canceled},
		{name: "CallerDone other", err: errors.New("boom"), callerDone: true, want: canceled},
	}
	for _, tt := range tests {
		a := &Attempt{Err: tt.err, Origin: "shop.example", Now: classifyNow, CallerDone: tt.callerDone, TimedOut: tt.timedOut}
		if got := DefaultClassifier.Classify(a); got != tt.want {
			t.Errorf("%s: pool.Classify(err %v, CallerDone %v, TimedOut %v) = %+v, want %+v",
				tt.name, tt.err, tt.callerDone, tt.timedOut, got, tt.want)
		}
	}
}

// Regression: a refused HTTP or SOCKS proxy was classified as a transient connection failure
// instead of a permanent exit failure, because the dial's *net.OpError is wrapped in another one
// ("proxyconnect", "socks connect") and only the outermost was looked at.
func TestClassifyProxyRefusedBehindWrappingOpError(t *testing.T) {
	want := pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyRefused}
	for name, err := range map[string]error{
		"http":  classifyProxyRefused(t, "http://shop.example/"),
		"socks": classifySOCKSRefused(t),
		"joined": errors.Join(errors.New("first"),
			&net.OpError{Op: "proxyconnect", Net: "tcp", Err: classifyDialRefused(t)}),
	} {
		if got := DefaultClassifier.Classify(&Attempt{Err: err}); got != want {
			t.Errorf("%s: pool.Classify(%v) = %+v, want %+v", name, err, got, want)
		}
	}
}

func TestClassifierFuncWrapsDefault(t *testing.T) {
	calls := 0
	c := ClassifierFunc(func(a *Attempt) pool.Verdict {
		calls++
		if a.Response != nil && a.Response.StatusCode == http.StatusTeapot {
			return pool.Verdict{Outcome: pool.Transient, Class: "teapot"}
		}
		return DefaultClassifier.Classify(a)
	})
	var _ Classifier = c
	tests := []struct {
		a    *Attempt
		want pool.Verdict
	}{
		{classifyRespAttempt(classifyResp(418, "short and stout", false)), pool.Verdict{Outcome: pool.Transient, Class: "teapot"}},
		{classifyRespAttempt(classifyResp(404, "", false)), pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx}},
		{classifyRespAttempt(classifyResp(429, "", false, "Retry-After", "7")), pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: 7 * time.Second}},
		{&Attempt{Err: io.EOF}, pool.Verdict{Outcome: pool.Transient, Class: pool.ClassConnection, ConnLevel: true}},
	}
	for i, tt := range tests {
		if got := c.Classify(tt.a); got != tt.want {
			t.Errorf("%d: ClassifierFunc.Classify = %+v, want %+v", i, got, tt.want)
		}
	}
	if calls != len(tests) {
		t.Errorf("ClassifierFunc called its func %d times, want %d", calls, len(tests))
	}
}

func TestStandardClassifierWithoutDetectors(t *testing.T) {
	c := &StandardClassifier{}
	cf := "<title>Just a moment...</title>"
	tests := []struct {
		resp *http.Response
		want pool.Verdict
	}{
		{classifyResp(403, cf, false, "Cf-Mitigated", "challenge", "Server", "cloudflare"), pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx, Suspect: true}},
		{classifyResp(200, `<div class="g-recaptcha"></div>`, false, "Content-Type", "text/html"), pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}},
		{classifyResp(429, cf, false, "Retry-After", "5"), pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: 5 * time.Second}},
		{classifyResp(503, cf, false), pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx, Soft: true}},
		{classifyResp(407, "", false), pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}},
	}
	for i, tt := range tests {
		body := &softblockBody{r: tt.resp.Body}
		tt.resp.Body = body
		a := classifyRespAttempt(tt.resp)
		if got := c.Classify(a); got != tt.want {
			t.Errorf("%d: StandardClassifier{}.Classify(%d) = %+v, want %+v", i, tt.resp.StatusCode, got, tt.want)
		}
		if body.n != 0 || a.Response.Body != io.ReadCloser(body) {
			t.Errorf("%d: StandardClassifier{}.Classify(%d) read %d bytes of the body, want none and the body untouched",
				i, tt.resp.StatusCode, body.n)
		}
	}
}

func TestStandardClassifierCustomDetector(t *testing.T) {
	var seen Sample
	teapot := NewDetector("teapot", func(s *Sample) bool {
		seen = *s
		return s.Contains("i'm a teapot") && s.Header("X-Brew") == "earl grey"
	})
	c := &StandardClassifier{Detectors: []Detector{teapot}, PeekLimit: 64}
	body := "<h1>I'm a TEAPOT</h1>"
	a := classifyRespAttempt(classifyResp(403, body, false, "X-Brew", "Earl Grey"))
	want := pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: "teapot"}
	if got := c.Classify(a); got != want {
		t.Errorf("pool.Classify(403 teapot) = %+v, want %+v", got, want)
	}
	if string(seen.Body) != body || string(seen.Lower) != strings.ToLower(body) || !seen.Complete || seen.Response != a.Response {
		t.Errorf("teapot saw Sample{Body %q, Lower %q, Complete %v}, want {%q, %q, true} and the response",
			seen.Body, seen.Lower, seen.Complete, body, strings.ToLower(body))
	}
	if b, err := io.ReadAll(a.Response.Body); err != nil || string(b) != body {
		t.Errorf("body after pool.Classify = %q, %v, want %q, nil", b, err, body)
	}

	// Not matching: the table decides.
	a = classifyRespAttempt(classifyResp(403, "<h1>coffee</h1>", false))
	if got, want := c.Classify(a), (pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx, Suspect: true}); got != want {
		t.Errorf("pool.Classify(403 coffee) = %+v, want %+v", got, want)
	}

	// The first matching detector names the verdict.
	both := &StandardClassifier{Detectors: []Detector{NewDetector("never", func(*Sample) bool { return false }), Cloudflare, Captcha}}
	a = classifyRespAttempt(classifyResp(403, `<div class="g-recaptcha"></div>`, false, "Cf-Mitigated", "challenge"))
	if got := both.Classify(a); got.Detector != "cloudflare" {
		t.Errorf("pool.Classify(403 cf-mitigated + recaptcha) detector = %q, want %q", got.Detector, "cloudflare")
	}
}

// A dial that fails because this process ran out of descriptors or buffers blames no one: the
// verdict is neutral, whatever wraps the error.
func TestClassifyLocalExhaustionIsNeutral(t *testing.T) {
	want := pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassNotAttempted}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM} {
		dial := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", errno)}
		for name, err := range map[string]error{
			"dial":         dial,
			"proxyconnect": &net.OpError{Op: "proxyconnect", Net: "tcp", Err: dial},
			"url":          &url.Error{Op: "Get", URL: "http://shop.example/", Err: dial},
		} {
			if got := DefaultClassifier.Classify(&Attempt{Err: err}); got != want {
				t.Errorf("%v (%s): Classify = %+v, want %+v", errno, name, got, want)
			}
		}
	}
	if IsLocalExhaustion(syscall.ECONNREFUSED) {
		t.Error("IsLocalExhaustion(ECONNREFUSED) = true, want false")
	}
}
