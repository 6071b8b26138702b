package testkit_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/testkit"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// cannedGet sends GET rawURL through rt with ctx and returns the status, the Retry-After header and
// the body, read before the body is closed (a Canned response must not be used after).
func cannedGet(t *testing.T, ctx context.Context, rt http.RoundTripper, rawURL string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip(%s) = %v", rawURL, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading %s: %v", rawURL, err)
	}
	status, ra := resp.StatusCode, resp.Header.Get("Retry-After")
	if resp.Request == nil || resp.Request.URL.String() != rawURL {
		t.Errorf("RoundTrip(%s): resp.Request = %v, want the request sent", rawURL, resp.Request)
	}
	resp.Body.Close()
	return status, ra, string(body)
}

func TestCannedReplies(t *testing.T) {
	c := testkit.NewCanned(testkit.CannedReply{Body: []byte("hello")},
		testkit.CannedRule{
			When:  func(r *http.Request) bool { return strings.HasPrefix(r.URL.Host, "f") },
			Reply: testkit.CannedReply{Status: http.StatusTooManyRequests, Header: testkit.RetryAfter(1)},
		})
	for i, tc := range []struct {
		url         string
		status      int
		retry, body string
	}{
		{"http://a.test/", 200, "", "hello"},
		{"http://f.test/", 429, "1", ""},
		{"http://a.test/again", 200, "", "hello"}, // a recycled response, read from the start again
	} {
		status, ra, body := cannedGet(t, context.Background(), c, tc.url)
		if status != tc.status || ra != tc.retry || body != tc.body {
			t.Errorf("step %d: GET %s = %d, Retry-After %q, body %q; want %d, %q, %q", i, tc.url, status, ra, body, tc.status, tc.retry, tc.body)
		}
	}
}

// ViaExit matches the exit the transport picked: a pinned request through x1 gets the rule's 429.
func TestCannedViaExit(t *testing.T) {
	c := testkit.NewCanned(testkit.CannedReply{}, testkit.CannedRule{When: testkit.ViaExit("x1"), Reply: testkit.CannedReply{Status: 429}})
	p, err := pool.New(pool.WithExits(testkit.Exits("x", 2)...))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := transport.New(p, transport.WithBase(c), transport.WithHeaderTimeout(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, tc := range []struct {
		exit   string
		status int
	}{{"x0", 200}, {"x1", 429}} {
		status, _, _ := cannedGet(t, transport.ContextWithExit(context.Background(), tc.exit), tr, "http://a.test/")
		if status != tc.status {
			t.Errorf("GET through %s = %d, want %d", tc.exit, status, tc.status)
		}
	}
}

// Canned allocates nothing per request: a benchmark over it counts only the code under test.
func TestCannedAllocatesNothing(t *testing.T) {
	c := testkit.NewCanned(testkit.CannedReply{Body: []byte(`{"ok":true}`)},
		testkit.CannedRule{When: func(r *http.Request) bool { return r.URL.Path == "/busy" }, Reply: testkit.CannedReply{Status: 503}})
	req, err := http.NewRequest(http.MethodGet, "http://a.test/", nil)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	var failed error
	allocs := testing.AllocsPerRun(1000, func() {
		resp, err := c.RoundTrip(req)
		if err != nil {
			failed = err
			return
		}
		for {
			if _, err := resp.Body.Read(buf); err != nil {
				break
			}
		}
		resp.Body.Close()
	})
	if failed != nil {
		t.Fatal(failed)
	}
	if allocs != 0 {
		t.Errorf("Canned.RoundTrip, read and close: %v allocations per request, want 0", allocs)
	}
}
