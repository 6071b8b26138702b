package main

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/proxybreaker/proxybreaker/clock"
	"github.com/proxybreaker/proxybreaker/pool"
)

// These tests need no browser: they check how a Navigator judges what a tab saw.

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// testNavigator returns a Navigator over a one-exit pool on a fake clock, with no browser: enough
// for judge.
func testNavigator(t *testing.T) (*Navigator, *pool.Exit) {
	t.Helper()
	e := pool.MustParseExit("http://u:secret-pw@127.0.0.1:3128").WithLabel("dc-1")
	p, err := pool.New(pool.WithExits(e), pool.WithClock(clock.NewFake(t0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if _, err := NewNavigator(p, context.Background(), NavigatorConfig{}); err == nil {
		t.Fatal("NewNavigator(p, a context without a browser) = nil error, want one")
	}
	return &Navigator{pool: p, cfg: NavigatorConfig{}.withDefaults()}, e
}

// TestJudge: a navigation's outcome becomes the verdict transport.DefaultClassifier gives the same
// HTTP outcome: the challenge page is blocked, the 429 opens the pair for its Retry-After, the
// proxy's 407 parks the exit, a 404 is the origin's and a success for the exit; a timeout blames
// the exit, the caller's cancellation nobody.
func TestJudge(t *testing.T) {
	n, e := testNavigator(t)
	doc := func(status int, headers network.Headers) *network.Response {
		return &network.Response{URL: "http://127.0.0.1:8080/p", Status: int64(status), Headers: headers}
	}
	challenge := []byte(`<!DOCTYPE html><html><head><title>Just a moment...</title></head><body>` +
		`<script src="/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1"></script></body></html>`)
	html := network.Headers{"Content-Type": "text/html; charset=utf-8"}
	for i, tc := range []struct {
		name string
		nav  navigation
		want pool.Verdict
	}{
		{"200", navigation{doc: doc(200, html), body: []byte("<html><title>hi</title></html>")},
			pool.Verdict{Outcome: pool.Success, Class: pool.ClassOK}},
		{"404", navigation{doc: doc(404, html), body: []byte("gone")},
			pool.Verdict{Outcome: pool.Success, Class: pool.ClassOrigin4xx}},
		{"challenge 403", navigation{doc: doc(403, network.Headers{"Content-Type": "text/html", "Server": "cloudflare", "Cf-Mitigated": "challenge"}), body: challenge},
			pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: "cloudflare"}},
		{"challenge 200 without headers", navigation{doc: doc(200, html), body: challenge},
			pool.Verdict{Outcome: pool.Transient, Class: pool.ClassBlocked, Detector: "cloudflare"}},
		{"429", navigation{doc: doc(429, network.Headers{"Retry-After": "30", "Content-Type": "text/plain"}), body: []byte("slow down")},
			pool.Verdict{Outcome: pool.Transient, Class: pool.ClassRateLimited, RetryAfter: 30 * time.Second}},
		{"407 shown", navigation{doc: doc(407, network.Headers{"Proxy-Authenticate": `Basic realm="p"`})},
			pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}},
		{"credentials rejected", navigation{doc: doc(200, html), proxyAuthRejected: true},
			pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}},
		{"503", navigation{doc: doc(503, html), body: []byte("<html>down</html>")},
			pool.Verdict{Outcome: pool.Transient, Class: pool.ClassOrigin5xx, Soft: true}},
		{"proxy unreachable", navigation{err: &chromedp.LoadError{ErrorText: "net::ERR_PROXY_CONNECTION_FAILED"}},
			pool.Verdict{Outcome: pool.Transient, Class: pool.ClassConnection, ConnLevel: true}},
		{"timed out", navigation{err: context.DeadlineExceeded, timedOut: true},
			pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}},
		{"caller gone", navigation{err: context.Canceled, callerDone: true, proxyAuthRejected: true},
			pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassCanceled}},
		{"other error", navigation{err: errors.New("target crashed")},
			pool.Verdict{Outcome: pool.Transient, Class: pool.ClassError}},
	} {
		nav := tc.nav
		if nav.doc != nil {
			nav.status, nav.header = int(nav.doc.Status), httpHeader(nav.doc.Headers)
		}
		if got := n.judge(context.Background(), &nav, e, "127.0.0.1:8080"); got != tc.want {
			t.Errorf("%d %s: judge = %+v, want %+v", i, tc.name, got, tc.want)
		}
	}
}

func TestVerdictForNetError(t *testing.T) {
	for _, tc := range []struct {
		text string
		want pool.Verdict
	}{
		{"net::ERR_PROXY_CONNECTION_FAILED", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassConnection, ConnLevel: true}},
		{"net::ERR_EMPTY_RESPONSE", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassConnection, ConnLevel: true}},
		{"net::ERR_CONNECTION_RESET", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassConnection, ConnLevel: true}},
		{"net::ERR_TIMED_OUT", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTimeout, ConnLevel: true}},
		{"net::ERR_PROXY_AUTH_UNSUPPORTED", pool.Verdict{Outcome: pool.Permanent, Scope: pool.ScopeExit, Class: pool.ClassProxyAuth}},
		{"net::ERR_TUNNEL_CONNECTION_FAILED", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassUpstream, Soft: true}},
		{"net::ERR_CERT_AUTHORITY_INVALID", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTLS, ConnLevel: true}},
		{"net::ERR_SSL_PROTOCOL_ERROR", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassTLS, ConnLevel: true}},
		{"net::ERR_NAME_NOT_RESOLVED", pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassOriginDNS}},
		{"net::ERR_ABORTED", pool.Verdict{Outcome: pool.Neutral, Class: pool.ClassError}},
		{"net::ERR_SOMETHING_NEW", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassError}},
		{"", pool.Verdict{Outcome: pool.Transient, Class: pool.ClassError}},
	} {
		if got := verdictForNetError(tc.text); got != tc.want {
			t.Errorf("verdictForNetError(%q) = %+v, want %+v", tc.text, got, tc.want)
		}
	}
}

// TestAnswerChallenge: a proxy's first challenge on a request gets the exit's credentials; a second
// one on the same request, or one the exit has no credentials for, is cancelled and marks them
// rejected; a web site's challenge never gets the proxy's credentials.
func TestAnswerChallenge(t *testing.T) {
	creds := url.UserPassword("dc2", "pw-dc2")
	proxy := func(id string) *fetch.EventAuthRequired {
		return &fetch.EventAuthRequired{RequestID: fetch.RequestID(id), AuthChallenge: &fetch.AuthChallenge{Source: fetch.AuthChallengeSourceProxy}}
	}
	server := &fetch.EventAuthRequired{RequestID: "s", AuthChallenge: &fetch.AuthChallenge{Source: fetch.AuthChallengeSourceServer}}
	give := fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseProvideCredentials, Username: "dc2", Password: "pw-dc2"}
	cancel := fetch.AuthChallengeResponse{Response: fetch.AuthChallengeResponseResponseCancelAuth}

	var rejected atomic.Bool
	answered := map[fetch.RequestID]bool{}
	for i, st := range []struct {
		ev           *fetch.EventAuthRequired
		creds        *url.Userinfo
		want         fetch.AuthChallengeResponse
		wantRejected bool
	}{
		{server, creds, cancel, false},
		{proxy("a"), creds, give, false},
		{proxy("b"), creds, give, false}, // another request (a subresource) asks once too
		{proxy("a"), creds, cancel, true},
	} {
		got := answerChallenge(st.ev, st.creds, answered, &rejected)
		if *got != st.want || rejected.Load() != st.wantRejected {
			t.Errorf("step %d: answerChallenge = %+v, rejected %v; want %+v, rejected %v", i, *got, rejected.Load(), st.want, st.wantRejected)
		}
	}

	var none atomic.Bool
	if got := answerChallenge(proxy("c"), nil, map[fetch.RequestID]bool{}, &none); *got != cancel || !none.Load() {
		t.Errorf("answerChallenge(proxy, no credentials) = %+v, rejected %v; want cancel, rejected", *got, none.Load())
	}
}

func TestProxyServer(t *testing.T) {
	for _, tc := range []struct {
		raw, wantServer, wantUser string
	}{
		{"http://u:secret-pw@127.0.0.1:3128", "http://127.0.0.1:3128", "u"},
		{"127.0.0.1:3128", "http://127.0.0.1:3128", ""},
		{"https://u:secret-pw@[::1]:8443", "https://[::1]:8443", "u"},
		{"socks5h://127.0.0.1:1080", "socks5://127.0.0.1:1080", ""},
		{"direct", "direct://", ""},
	} {
		server, creds, err := proxyServer(pool.MustParseExit(tc.raw))
		user := ""
		if creds != nil {
			user = creds.Username()
		}
		if err != nil || server != tc.wantServer || user != tc.wantUser {
			t.Errorf("proxyServer(%s) = %q, user %q, %v; want %q, user %q", pool.RedactRaw(tc.raw), server, user, err, tc.wantServer, tc.wantUser)
		}
	}
	_, _, err := proxyServer(pool.MustParseExit("socks5://u:secret-pw@127.0.0.1:1080"))
	if err == nil || strings.Contains(err.Error(), "secret-pw") || !strings.Contains(err.Error(), "SOCKS5") {
		t.Errorf("proxyServer(socks5 with credentials) = %v, want an error naming SOCKS5 without the password", err)
	}
}

func TestHTTPHeader(t *testing.T) {
	h := httpHeader(network.Headers{"set-cookie": "a=1\nb=2", "Retry-After": "30", "X-N": float64(3)})
	if got := h.Values("Set-Cookie"); len(got) != 2 || got[0] != "a=1" || got[1] != "b=2" {
		t.Errorf("Set-Cookie = %q, want [a=1 b=2]", got)
	}
	if got := h.Get("Retry-After"); got != "30" {
		t.Errorf("Retry-After = %q, want 30", got)
	}
	if got := h.Get("X-N"); got != "3" {
		t.Errorf("X-N = %q, want 3", got)
	}
	if _, ok := h[http.CanonicalHeaderKey("set-cookie")]; !ok {
		t.Errorf("header keys = %v, want canonical keys", h)
	}
}

// TestNavigateRejectsBadURLs: a URL that is not http(s) is an error before any pick, without the
// password it may carry.
func TestNavigateRejectsBadURLs(t *testing.T) {
	n, _ := testNavigator(t)
	for _, raw := range []string{"ftp://127.0.0.1/x", "/relative", "http://", "http://u:pw-in-url@[::1"} {
		_, err := n.Navigate(context.Background(), raw, nil)
		if err == nil || strings.Contains(err.Error(), "pw-in-url") {
			t.Errorf("Navigate(%q) = %v, want an error without the password", pool.RedactRaw(raw), err)
		}
	}
	if _, err := NewNavigator(nil, context.Background(), NavigatorConfig{}); err == nil {
		t.Error("NewNavigator(nil pool) = nil error, want one")
	}
}
