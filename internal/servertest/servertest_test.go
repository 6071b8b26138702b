package servertest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"

	"github.com/proxybreaker/proxybreaker/internal/servertest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// echo answers "proto=P from=IP via=VIA" for each request.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	fmt.Fprintf(w, "proto=%s from=%s via=%s", r.Proto, host, r.Header.Get("Via"))
})

// origins starts a plain HTTP origin and an HTTPS origin offering HTTP/2.
func origins(t *testing.T) (plain, secure *httptest.Server) {
	t.Helper()
	plain = httptest.NewServer(echo)
	t.Cleanup(plain.Close)
	secure = httptest.NewUnstartedServer(echo)
	secure.EnableHTTP2 = true
	secure.StartTLS()
	t.Cleanup(secure.Close)
	return plain, secure
}

// newClient returns a client through proxyURL that trusts secure's certificate. connectStatus,
// when not nil, receives the status of every CONNECT response.
func newClient(t *testing.T, proxyURL *url.URL, secure *httptest.Server, connectStatus *atomic.Int64) *http.Client {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(secure.Certificate())
	tr := &http.Transport{
		Proxy:             http.ProxyURL(proxyURL),
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true,
		OnProxyConnectResponse: func(_ context.Context, _ *url.URL, _ *http.Request, res *http.Response) error {
			if connectStatus != nil {
				connectStatus.Store(int64(res.StatusCode))
			}
			return nil
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// get fetches u through c and returns the response and its body.
func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("Get(%s) = %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("Get(%s): read body: %v", u, err)
	}
	return resp, string(body)
}

func TestTinyproxyPlainAndConnect(t *testing.T) {
	t.Parallel()
	plain, secure := origins(t)
	u := servertest.Tinyproxy(t, servertest.TinyproxyConfig{Name: "tp-a"})
	if u.Scheme != "http" || !strings.HasPrefix(u.Host, "127.0.0.1:") || u.User != nil {
		t.Errorf("Tinyproxy() = %s, want http://127.0.0.1:PORT", u)
	}
	c := newClient(t, u, secure, nil)

	resp, body := get(t, c, plain.URL)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "proto=HTTP/1.1 from=127.0.0.1 via=1.1 tp-a") {
		t.Errorf("plain GET = %d %q, want 200 with a Via naming tp-a", resp.StatusCode, body)
	}
	// CONNECT: tinyproxy splices bytes, so TLS and HTTP/2 run end to end and it adds no Via.
	resp, body = get(t, c, secure.URL)
	if want := "proto=HTTP/2.0 from=127.0.0.1 via="; resp.ProtoMajor != 2 || body != want {
		t.Errorf("HTTPS GET = %s %q, want HTTP/2 %q", resp.Proto, body, want)
	}
}

func TestTinyproxyWithoutNameAddsNoVia(t *testing.T) {
	t.Parallel()
	plain, secure := origins(t)
	u := servertest.Tinyproxy(t, servertest.TinyproxyConfig{})
	_, body := get(t, newClient(t, u, secure, nil), plain.URL)
	if want := "proto=HTTP/1.1 from=127.0.0.1 via="; body != want {
		t.Errorf("plain GET body = %q, want %q", body, want)
	}
}

func TestTinyproxyBasicAuth(t *testing.T) {
	t.Parallel()
	plain, secure := origins(t)
	u := servertest.Tinyproxy(t, servertest.TinyproxyConfig{User: "alice", Pass: "s3cret"})
	if got := u.User.String(); got != "alice:s3cret" {
		t.Errorf("Tinyproxy() user info = %q, want alice:s3cret", got)
	}
	wrong := *u
	wrong.User = url.UserPassword("alice", "wrong")
	none := *u
	none.User = nil

	tests := []struct {
		name     string
		proxyURL *url.URL
		want     []int // acceptable statuses, for plain HTTP and for CONNECT
	}{
		{"right", u, []int{http.StatusOK}},
		{"none", &none, []int{http.StatusProxyAuthRequired}},
		// 407 is right; tinyproxy 1.11.1 answers 401 (tinyproxy issue #532).
		{"wrong password", &wrong, []int{http.StatusProxyAuthRequired, http.StatusUnauthorized}},
	}
	for i, tt := range tests {
		var connectStatus atomic.Int64
		c := newClient(t, tt.proxyURL, secure, &connectStatus)

		resp, _ := get(t, c, plain.URL)
		if !isOneOf(resp.StatusCode, tt.want) {
			t.Errorf("step %d (%s): plain GET status = %d, want one of %v", i, tt.name, resp.StatusCode, tt.want)
		}
		if resp.StatusCode == http.StatusProxyAuthRequired && resp.Header.Get("Proxy-Authenticate") == "" {
			t.Errorf("step %d (%s): 407 without Proxy-Authenticate", i, tt.name)
		}
		if tt.name == "wrong password" {
			t.Logf("tinyproxy answers wrong credentials %d", resp.StatusCode)
		}

		resp, err := c.Get(secure.URL)
		if err == nil {
			resp.Body.Close()
		}
		if got := int(connectStatus.Load()); !isOneOf(got, tt.want) {
			t.Errorf("step %d (%s): CONNECT status = %d, want one of %v", i, tt.name, got, tt.want)
		}
		if gotErr, wantErr := err != nil, tt.want[0] != http.StatusOK; gotErr != wantErr {
			t.Errorf("step %d (%s): HTTPS GET error = %v, want error %t", i, tt.name, err, wantErr)
		}
	}
}

func isOneOf(status int, statuses []int) bool {
	for _, s := range statuses {
		if status == s {
			return true
		}
	}
	return false
}

func TestTinyproxyBind(t *testing.T) {
	t.Parallel()
	plain, secure := origins(t)
	u := servertest.Tinyproxy(t, servertest.TinyproxyConfig{Bind: "127.0.0.2"})
	c := newClient(t, u, secure, nil)
	for _, origin := range []string{plain.URL, secure.URL} {
		if _, body := get(t, c, origin); !strings.Contains(body, " from=127.0.0.2 ") {
			t.Errorf("Get(%s) through Bind 127.0.0.2: body = %q, want the origin to see 127.0.0.2", origin, body)
		}
	}
}

func TestTinyproxyInstancesAreIndependent(t *testing.T) {
	t.Parallel()
	plain, secure := origins(t)
	a := servertest.Tinyproxy(t, servertest.TinyproxyConfig{Name: "tp-a"})
	b := servertest.Tinyproxy(t, servertest.TinyproxyConfig{Name: "tp-b"})
	if a.Host == b.Host {
		t.Fatalf("two tinyproxies share %s", a.Host)
	}
	for _, tt := range []struct {
		u    *url.URL
		want string
	}{{a, "via=1.1 tp-a"}, {b, "via=1.1 tp-b"}} {
		if _, body := get(t, newClient(t, tt.u, secure, nil), plain.URL); !strings.Contains(body, tt.want) {
			t.Errorf("through %s: body = %q, want it to contain %q", tt.u, body, tt.want)
		}
	}
}
