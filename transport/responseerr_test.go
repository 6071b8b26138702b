package transport_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// TestErrorFromResponse: a response the transport counted against its exit is an *AttemptError
// with the exit, the origin, the verdict and the status; the page, the site's 404 and its own 500
// are not errors; nor is a response that did not come through a Transport.
func TestErrorFromResponse(t *testing.T) {
	html := http.Header{"Content-Type": {"text/html"}, "Server": {"cloudflare"}}
	for _, tc := range []struct {
		name  string
		reply testkit.Reply
		want  string // the error's message; "" for none
	}{
		{"page", testkit.Reply{Body: "the page"}, ""},
		{"site_404", testkit.Reply{Status: http.StatusNotFound}, ""},
		{"site_500", testkit.Reply{Status: http.StatusInternalServerError}, ""},
		{"proxy_407", testkit.Reply{Status: http.StatusProxyAuthRequired},
			"transport: via x0 to a.example: proxy_auth: 407 Proxy Authentication Required"},
		{"rate_limited", testkit.Reply{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"120"}}},
			"transport: via x0 to a.example: rate_limited: 429 Too Many Requests, retry after 2m0s"},
		{"challenge_at_200", testkit.Reply{Header: html, Body: "<title>Just a moment...</title>"},
			"transport: via x0 to a.example: blocked (cloudflare): 200 OK"},
		{"origin_503", testkit.Reply{Status: http.StatusServiceUnavailable},
			"transport: via x0 to a.example: origin_5xx: 503 Service Unavailable"},
		{"oxylabs_525", testkit.Reply{Status: 525, Header: http.Header{"X-Error-Description": {"No exit found"}}},
			"transport: via x0 to a.example: proxy_error: 525"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTestPoolEnv(t, testkit.Exits("x", 1))
			env.base.On("*", "*", tc.reply)
			resp, _, err := env.do(t, nil, trURLA)
			if err != nil {
				t.Fatalf("RoundTrip = %v, want a response", err)
			}
			defer resp.Body.Close()
			err = transport.ErrorFromResponse(resp)
			if tc.want == "" {
				if err != nil {
					t.Errorf("ErrorFromResponse(%d) = %v, want nil", resp.StatusCode, err)
				}
				return
			}
			var ae *transport.AttemptError
			if !errors.As(err, &ae) || err.Error() != tc.want {
				t.Fatalf("ErrorFromResponse(%d) = %v, want %q", resp.StatusCode, err, tc.want)
			}
			v, _ := transport.VerdictFromResponse(resp)
			if ae.Exit != "x0" || ae.Origin != trOriginA || ae.Verdict != v || ae.StatusCode != resp.StatusCode ||
				ae.Err != nil || errors.Unwrap(err) != nil {
				t.Errorf("ErrorFromResponse = %+v, want exit x0, origin %s, verdict %+v, status %d, no cause",
					ae, trOriginA, v, resp.StatusCode)
			}
			if ae.Verdict.Outcome != pool.Transient && ae.Verdict.Outcome != pool.Permanent {
				t.Errorf("ErrorFromResponse made an error of a %v verdict", ae.Verdict.Outcome)
			}
		})
	}
	if err := transport.ErrorFromResponse(nil); err != nil {
		t.Errorf("ErrorFromResponse(nil) = %v, want nil", err)
	}
	req, _ := http.NewRequest(http.MethodGet, trURLA, nil)
	if err := transport.ErrorFromResponse(&http.Response{StatusCode: 429, Request: req}); err != nil {
		t.Errorf("ErrorFromResponse(a response from elsewhere) = %v, want nil", err)
	}
}
