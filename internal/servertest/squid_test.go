package servertest_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
)

// deadPort returns a 127.0.0.1 port nothing listens on: one just freed.
func deadPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// connectRecorder keeps the status line and headers of the last answer to a CONNECT.
type connectRecorder struct {
	mu     sync.Mutex
	status string
	header http.Header
}

func (r *connectRecorder) last() (string, http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status, r.header
}

// squidClient is newClient recording every CONNECT answer in rec.
func squidClient(t *testing.T, proxyURL *url.URL, secure *httptest.Server, rec *connectRecorder) *http.Client {
	t.Helper()
	c := newClient(t, proxyURL, secure, nil)
	c.Transport.(*http.Transport).OnProxyConnectResponse = func(_ context.Context, _ *url.URL, _ *http.Request, res *http.Response) error {
		rec.mu.Lock()
		rec.status, rec.header = res.Status, res.Header
		rec.mu.Unlock()
		return nil
	}
	return c
}

func TestSquidPlainAndConnect(t *testing.T) {
	t.Parallel()
	plain, secure := origins(t)
	s := servertest.StartSquid(t, servertest.SquidConfig{Hosts: map[string]string{"site.test": "127.0.0.1"}})
	if u := s.URL(); u.Scheme != "http" || !strings.HasPrefix(u.Host, "127.0.0.1:") || u.User != nil {
		t.Errorf("URL() = %s, want http://127.0.0.1:PORT", u)
	}
	c := squidClient(t, s.URL(), secure, &connectRecorder{})

	_, port, _ := net.SplitHostPort(strings.TrimPrefix(plain.URL, "http://"))
	for _, u := range []string{plain.URL, "http://site.test:" + port + "/"} {
		resp, body := get(t, c, u)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "from=127.0.0.1 via=1.1 servertest-squid (squid/") {
			t.Errorf("plain GET %s = %d %q, want 200 with a Via naming servertest-squid", u, resp.StatusCode, body)
		}
	}
	// CONNECT: squid splices bytes, so TLS and HTTP/2 run end to end and it adds no Via.
	if resp, body := get(t, c, secure.URL); resp.ProtoMajor != 2 || body != "proto=HTTP/2.0 from=127.0.0.1 via=" {
		t.Errorf("HTTPS GET = %s %q, want HTTP/2 from=127.0.0.1 and no Via", resp.Proto, body)
	}
}

// TestSquidErrors pins the answers the helper's squid gives for each failure the transport's tests
// rely on, for plain HTTP and CONNECT: what squid says, by its status and X-Squid-Error.
func TestSquidErrors(t *testing.T) {
	t.Parallel()
	plain, secure := origins(t)
	s := servertest.StartSquid(t, servertest.SquidConfig{
		Hosts: map[string]string{"site.test": "127.0.0.1"},
		Deny:  []string{"denied.test"},
	})
	rec := &connectRecorder{}
	c := squidClient(t, s.URL(), secure, rec)
	_, plainPort, _ := net.SplitHostPort(strings.TrimPrefix(plain.URL, "http://"))
	_, securePort, _ := net.SplitHostPort(strings.TrimPrefix(secure.URL, "https://"))
	dead := strconv.Itoa(deadPort(t))

	tests := []struct {
		name   string
		target string   // host:port
		status []int    // acceptable statuses
		errors []string // acceptable X-Squid-Error names
	}{
		{"denied", "denied.test:" + plainPort, []int{403}, []string{"ERR_ACCESS_DENIED"}},
		{"denied, https port", "denied.test:" + securePort, []int{403}, []string{"ERR_ACCESS_DENIED"}},
		{"nothing listens", "127.0.0.1:" + dead, []int{503}, []string{"ERR_CONNECT_FAIL"}},
		// ERR_DNS_FAIL (503) from squid 6.3 on; before, ERR_READ_ERROR (502) for plain HTTP and
		// ERR_CANNOT_FORWARD (500) for CONNECT (squid bug 5294).
		{"name does not resolve", "nosuch.invalid:" + plainPort, []int{500, 502, 503},
			[]string{"ERR_DNS_FAIL", "ERR_READ_ERROR", "ERR_CANNOT_FORWARD"}},
	}
	for i, tt := range tests {
		// Plain HTTP: squid's answer is the response.
		resp, _ := get(t, c, "http://"+tt.target+"/")
		name, _, _ := strings.Cut(resp.Header.Get("X-Squid-Error"), " ")
		t.Logf("step %d (%s): plain GET: %s, X-Squid-Error %q, Server %q", i, tt.name, resp.Status,
			resp.Header.Get("X-Squid-Error"), resp.Header.Get("Server"))
		if !isOneOf(resp.StatusCode, tt.status) || !slices.Contains(tt.errors, name) {
			t.Errorf("step %d (%s): plain GET = %s, X-Squid-Error %q; want one of %v with one of %v",
				i, tt.name, resp.Status, name, tt.status, tt.errors)
		}
		// CONNECT: squid's answer is the CONNECT response; the GET fails.
		if resp, err := c.Get("https://" + tt.target + "/"); err == nil {
			resp.Body.Close()
			t.Errorf("step %d (%s): HTTPS GET = %s, want the CONNECT refused", i, tt.name, resp.Status)
			continue
		}
		status, h := rec.last()
		name, _, _ = strings.Cut(h.Get("X-Squid-Error"), " ")
		t.Logf("step %d (%s): CONNECT: %s, X-Squid-Error %q, Server %q", i, tt.name, status, h.Get("X-Squid-Error"), h.Get("Server"))
		code, _ := strconv.Atoi(strings.SplitN(status, " ", 2)[0])
		if !isOneOf(code, tt.status) || !slices.Contains(tt.errors, name) {
			t.Errorf("step %d (%s): CONNECT = %s, X-Squid-Error %q; want one of %v with one of %v",
				i, tt.name, status, name, tt.status, tt.errors)
		}
	}
}
