package proxytest_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// startProxy starts a proxy and closes it when the test ends.
func startProxy(t *testing.T, cfg proxytest.Config) *proxytest.Proxy {
	t.Helper()
	p, err := proxytest.Start(cfg)
	if err != nil {
		t.Fatalf("Start(%+v) = %v", cfg, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	})
	return p
}

// whoHandler answers "proto=P via=NAME" where NAME is the proxy reg says carried the request,
// or "-" when none did. It also echoes the request body and reports forwarded hop headers.
func whoHandler(reg *proxytest.Registry) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := reg.Lookup(r)
		if !ok {
			name = "-"
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Proxy-Authorization-Seen", r.Header.Get("Proxy-Authorization"))
		w.Header().Set("X-Hop-Seen", r.Header.Get("X-Hop"))
		fmt.Fprintf(w, "proto=%s via=%s path=%s body=%s", r.Proto, name, r.URL.RequestURI(), body)
	})
}

// newOrigin starts a plain HTTP origin.
func newOrigin(t *testing.T, reg *proxytest.Registry) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(whoHandler(reg))
	t.Cleanup(s.Close)
	return s
}

// newTLSOrigin starts an HTTPS origin that offers HTTP/2.
func newTLSOrigin(t *testing.T, reg *proxytest.Registry) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(whoHandler(reg))
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// newClient returns a client that goes through proxyURL and trusts origin's certificate when
// origin is not nil. connectStatus, when not nil, receives the status of every CONNECT response;
// it is atomic because the transport may still be dialing after a request has timed out.
func newClient(t *testing.T, proxyURL *url.URL, origin *httptest.Server, connectStatus *atomic.Int64) *http.Client {
	t.Helper()
	tr := &http.Transport{
		Proxy:             http.ProxyURL(proxyURL),
		ForceAttemptHTTP2: true,
		OnProxyConnectResponse: func(_ context.Context, _ *url.URL, _ *http.Request, res *http.Response) error {
			if connectStatus != nil {
				connectStatus.Store(int64(res.StatusCode))
			}
			return nil
		},
	}
	if origin != nil {
		pool := x509.NewCertPool()
		pool.AddCert(origin.Certificate())
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// get fetches u and returns the status, the body and the response.
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

func TestPlainHTTP(t *testing.T) {
	t.Parallel()
	reg := &proxytest.Registry{}
	origin := newOrigin(t, reg)
	p := startProxy(t, proxytest.Config{Name: "exit-a", User: "alice", Pass: "s3cret", Registry: reg})
	c := newClient(t, p.URL(), nil, nil)

	var reused []bool
	for i := range 2 {
		req, err := http.NewRequest(http.MethodPost, origin.URL+"/hello?q=1", strings.NewReader(fmt.Sprint("n", i)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Connection", "X-Hop")
		req.Header.Set("X-Hop", "per-connection")
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			GotConn: func(info httptrace.GotConnInfo) { reused = append(reused, info.Reused) },
		}))
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("step %d: Do = %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("proto=HTTP/1.1 via=exit-a path=/hello?q=1 body=n%d", i); resp.StatusCode != 200 || string(body) != want {
			t.Errorf("step %d: POST through proxy = %d %q, want 200 %q", i, resp.StatusCode, body, want)
		}
		if got := resp.Header.Get("X-Proxy-Authorization-Seen"); got != "" {
			t.Errorf("step %d: origin saw Proxy-Authorization %q, want it stripped", i, got)
		}
		if got := resp.Header.Get("X-Hop-Seen"); got != "" {
			t.Errorf("step %d: origin saw X-Hop %q, want it stripped (named in Connection)", i, got)
		}
	}
	if len(reused) != 2 || !reused[1] {
		t.Errorf("client connection reuse = %v, want second request on a kept-alive connection", reused)
	}
	if got := p.Requests(); got != 2 {
		t.Errorf("Requests() = %d, want 2", got)
	}
	if got := p.Connects(); got != 0 {
		t.Errorf("Connects() = %d, want 0", got)
	}
}

func TestConnectTLSHTTP2(t *testing.T) {
	t.Parallel()
	reg := &proxytest.Registry{}
	origin := newTLSOrigin(t, reg)
	// A second proxy on the same registry must not be confused with the first.
	other := startProxy(t, proxytest.Config{Name: "exit-b", Registry: reg})
	p := startProxy(t, proxytest.Config{Name: "exit-a", Registry: reg})

	resp, body := get(t, newClient(t, p.URL(), origin, nil), origin.URL+"/tls")
	if resp.ProtoMajor != 2 {
		t.Errorf("client proto = %s, want HTTP/2 negotiated end to end", resp.Proto)
	}
	if want := "proto=HTTP/2.0 via=exit-a path=/tls body="; body != want {
		t.Errorf("body = %q, want %q", body, want)
	}
	_, body = get(t, newClient(t, other.URL(), origin, nil), origin.URL+"/tls")
	if want := "proto=HTTP/2.0 via=exit-b path=/tls body="; body != want {
		t.Errorf("through exit-b: body = %q, want %q", body, want)
	}
	if got := p.Connects(); got != 1 {
		t.Errorf("Connects() = %d, want 1", got)
	}
	if got := p.Requests(); got != 0 {
		t.Errorf("Requests() = %d, want 0 (tunnelled requests are not counted)", got)
	}
}

func TestRegistryDirectClientUnknown(t *testing.T) {
	t.Parallel()
	reg := &proxytest.Registry{}
	origin := newOrigin(t, reg)
	_, body := get(t, origin.Client(), origin.URL)
	if want := "proto=HTTP/1.1 via=- path=/ body="; body != want {
		t.Errorf("direct request: body = %q, want %q", body, want)
	}
	if name, ok := reg.LookupConn("127.0.0.1:1", "127.0.0.1:2"); ok {
		t.Errorf(`LookupConn("127.0.0.1:1", "127.0.0.1:2") = %q, true, want "", false`, name)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	reg := &proxytest.Registry{}
	origin := newOrigin(t, reg)
	tlsOrigin := newTLSOrigin(t, reg)
	p := startProxy(t, proxytest.Config{Name: "exit-a", User: "alice", Pass: "s3cret", Registry: reg})
	noCreds := &url.URL{Scheme: "http", Host: p.Addr()}

	tests := []struct {
		name     string
		proxyURL *url.URL
		want     int
	}{
		{"right", p.URL(), http.StatusOK},
		{"wrong password", p.URLWithCredentials("alice", "wrong"), http.StatusProxyAuthRequired},
		{"wrong user", p.URLWithCredentials("bob", "s3cret"), http.StatusProxyAuthRequired},
		{"none", noCreds, http.StatusProxyAuthRequired},
	}
	var wantRejected int64
	for i, tt := range tests {
		// Plain HTTP: the 407 is the response.
		resp, _ := get(t, newClient(t, tt.proxyURL, nil, nil), origin.URL)
		if resp.StatusCode != tt.want {
			t.Errorf("step %d (%s): plain GET status = %d, want %d", i, tt.name, resp.StatusCode, tt.want)
		}
		if tt.want == http.StatusProxyAuthRequired {
			wantRejected++
			if got, want := resp.Header.Get("Proxy-Authenticate"), `Basic realm="proxytest"`; got != want {
				t.Errorf("step %d (%s): Proxy-Authenticate = %q, want %q", i, tt.name, got, want)
			}
		}

		// CONNECT: the 407 is seen by OnProxyConnectResponse and the request fails.
		var connectStatus atomic.Int64
		c := newClient(t, tt.proxyURL, tlsOrigin, &connectStatus)
		resp, err := c.Get(tlsOrigin.URL)
		if err == nil {
			resp.Body.Close()
		}
		if connectStatus.Load() != int64(tt.want) {
			t.Errorf("step %d (%s): CONNECT status = %d, want %d", i, tt.name, connectStatus.Load(), tt.want)
		}
		if gotErr, wantErr := err != nil, tt.want != http.StatusOK; gotErr != wantErr {
			t.Errorf("step %d (%s): HTTPS GET error = %v, want error %t", i, tt.name, err, wantErr)
		}
		if tt.want == http.StatusProxyAuthRequired {
			wantRejected++
		}
	}
	if got := p.Rejected(); got != wantRejected {
		t.Errorf("Rejected() = %d, want %d", got, wantRejected)
	}
	if got := p.Requests(); got != 1 {
		t.Errorf("Requests() = %d, want 1", got)
	}
	if got := p.Connects(); got != 1 {
		t.Errorf("Connects() = %d, want 1", got)
	}
}

func TestDialFailureIs502(t *testing.T) {
	t.Parallel()
	addr, err := proxytest.ClosedAddr()
	if err != nil {
		t.Fatalf("ClosedAddr() = %v", err)
	}
	p := startProxy(t, proxytest.Config{Name: "exit-a"})
	resp, body := get(t, newClient(t, p.URL(), nil, nil), "http://"+addr+"/")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "proxytest exit-a: dial") {
		t.Errorf("Get(closed origin) = %d %q, want 502 naming the proxy and the dial", resp.StatusCode, body)
	}
	if got := p.Rejected(); got != 0 {
		t.Errorf("Rejected() = %d, want 0 (a failed dial is not a rejection)", got)
	}
}

func TestClosedAddrRefusesConnections(t *testing.T) {
	t.Parallel()
	addr, err := proxytest.ClosedAddr()
	if err != nil {
		t.Fatalf("ClosedAddr() = %v", err)
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Errorf("ClosedAddr() = %q, want 127.0.0.1:PORT", addr)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Errorf("Dial(ClosedAddr()) succeeded, want connection refused")
	}
}

func TestStartValidates(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  proxytest.Config
		want string
	}{
		{"pass without user", proxytest.Config{Pass: "x"}, "Pass set without User"},
		{"colon in user", proxytest.Config{User: "a:b"}, "colon"},
		{"both hangs", proxytest.Config{Hang: true, HangAfterConnect: true}, "mutually exclusive"},
		{"registry without name", proxytest.Config{Registry: &proxytest.Registry{}}, "Registry set without Name"},
		{"negative latency", proxytest.Config{Latency: -time.Second}, "negative Latency -1s"},
		{"source not an IP", proxytest.Config{SourceAddr: "localhost"}, `SourceAddr "localhost": want a loopback IP`},
		{"source not loopback", proxytest.Config{SourceAddr: "10.0.0.1"}, `SourceAddr "10.0.0.1": want a loopback IP`},
		{"source with a port", proxytest.Config{SourceAddr: "127.0.0.2:80"}, `SourceAddr "127.0.0.2:80"`},
	}
	for i, tt := range tests {
		p, err := proxytest.Start(tt.cfg)
		if err == nil {
			p.Close()
			t.Errorf("step %d (%s): Start = nil error, want one containing %q", i, tt.name, tt.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), "proxytest: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("step %d (%s): Start = %q, want proxytest: ... %q", i, tt.name, err, tt.want)
		}
	}
}

func TestURL(t *testing.T) {
	t.Parallel()
	open := startProxy(t, proxytest.Config{Name: "open"})
	auth := startProxy(t, proxytest.Config{Name: "auth", User: "alice", Pass: "s3cret"})
	tests := []struct {
		got, want string
	}{
		{open.URL().String(), "http://" + open.Addr()},
		{auth.URL().String(), "http://alice:s3cret@" + auth.Addr()},
		{auth.URLWithCredentials("bob", "x").String(), "http://bob:x@" + auth.Addr()},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("step %d: URL = %q, want %q", i, tt.got, tt.want)
		}
	}
	if !strings.HasPrefix(open.Addr(), "127.0.0.1:") {
		t.Errorf("Addr() = %q, want 127.0.0.1:PORT", open.Addr())
	}
	// URL returns a fresh value each time.
	u := auth.URL()
	u.User = nil
	if got := auth.URL().User; got == nil {
		t.Errorf("URL() shares its value between calls")
	}
}

// TestConcurrentTraffic drives many clients through two proxies sharing a registry and checks the
// counters and the registry under -race.
func TestConcurrentTraffic(t *testing.T) {
	t.Parallel()
	const workers, perWorker = 16, 10
	reg := &proxytest.Registry{}
	origin := newOrigin(t, reg)
	tlsOrigin := newTLSOrigin(t, reg)
	proxies := []*proxytest.Proxy{
		startProxy(t, proxytest.Config{Name: "exit-0", Registry: reg}),
		startProxy(t, proxytest.Config{Name: "exit-1", Registry: reg}),
	}
	var wg sync.WaitGroup
	errc := make(chan error, workers*perWorker)
	for w := range workers {
		p := proxies[w%2]
		c := newClient(t, p.URL(), tlsOrigin, nil)
		wg.Go(func() {
			for i := range perWorker {
				u := origin.URL
				if i%2 == 1 {
					u = tlsOrigin.URL
				}
				resp, err := c.Get(u)
				if err != nil {
					errc <- err
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if want := fmt.Sprintf("via=exit-%d ", w%2); !strings.Contains(string(body), want) {
					errc <- fmt.Errorf("worker %d step %d: body %q, want it to contain %q", w, i, body, want)
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	for i, p := range proxies {
		// Each worker makes perWorker/2 plain requests on one kept-alive connection and one
		// HTTP/2 tunnel for its perWorker/2 HTTPS requests.
		if got, want := p.Requests(), int64(workers/2*perWorker/2); got != want {
			t.Errorf("proxy %d: Requests() = %d, want %d", i, got, want)
		}
		if got, want := p.Connects(), int64(workers/2); got != want {
			t.Errorf("proxy %d: Connects() = %d, want %d", i, got, want)
		}
	}
}
