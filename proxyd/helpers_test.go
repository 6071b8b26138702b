package proxyd

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// world is a daemon on 127.0.0.1 over a pool of in-process exits, with the proxies' registry so
// that origins can tell which exit carried a request.
type world struct {
	t       *testing.T
	s       *Server
	addr    string // the daemon's listener
	reg     *proxytest.Registry
	proxies map[string]*proxytest.Proxy // by exit label
}

// exitSpec is one exit of a world: its label, list attributes, and the proxy's config.
type exitSpec struct {
	label string
	attrs string // "country=us tier=1"
	cfg   proxytest.Config
	// wrongPass lists the exit with a wrong password for the proxy's credentials.
	wrongPass bool
}

// newWorld starts a proxy per spec, a pool over them and a daemon serving one listener with
// profile. cfg.AllowPrivate is set unless the test says otherwise with noPrivate.
func newWorld(t *testing.T, cfg Config, profile string, specs ...exitSpec) *world {
	t.Helper()
	return newWorldWith(t, cfg, profile, nil, specs...)
}

// newWorldWith is newWorld with options for the server's transport.
func newWorldWith(t *testing.T, cfg Config, profile string, topts []transport.Option, specs ...exitSpec) *world {
	t.Helper()
	w := &world{t: t, reg: &proxytest.Registry{}, proxies: map[string]*proxytest.Proxy{}}
	var lines []string
	for i, sp := range specs {
		if sp.label == "direct" {
			lines = append(lines, "direct "+sp.attrs)
			continue
		}
		pc := sp.cfg
		pc.Name, pc.Registry = sp.label, w.reg
		if pc.Name == "" {
			pc.Name = "p" + strconv.Itoa(i) // the exit keeps its default label, the redacted URL
		}
		p, err := proxytest.Start(pc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		w.proxies[sp.label] = p
		u := p.URL()
		if sp.wrongPass {
			u = p.URLWithCredentials(pc.User, "wrong")
		}
		line := u.String() + " " + sp.attrs
		if sp.label != "" {
			line += " label=" + sp.label
		}
		lines = append(lines, line)
	}
	exits, err := pool.ReadExits(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(pool.WithExits(exits...), pool.WithSeed(1))
	if err != nil {
		t.Fatal(err)
	}
	w.s = w.serve(p, cfg, profile, topts...)
	return w
}

// serve starts a Server over p on a loopback listener, shut down when the test ends.
func (w *world) serve(p *pool.Pool, cfg Config, profile string, topts ...transport.Option) *Server {
	t := w.t
	t.Helper()
	s, err := New(p, cfg, topts...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.addr = ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln, profile) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after Shutdown, want nil", err)
		}
	})
	return s
}

// client returns an http.Client through the daemon as an HTTP proxy (user, when set, as its
// credentials), trusting roots for HTTPS origins. ps receives each CONNECT reply's Proxy-Status.
func (w *world) client(user string, roots *tls.Config, ps *[]string) *http.Client {
	u := &url.URL{Scheme: "http", Host: w.addr}
	if user != "" {
		name, pass, _ := strings.Cut(user, ":")
		u.User = url.UserPassword(name, pass)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: roots, DisableKeepAlives: true}
	if ps != nil {
		tr.OnProxyConnectResponse = func(_ context.Context, _ *url.URL, _ *http.Request, res *http.Response) error {
			*ps = append(*ps, res.Header.Values("Proxy-Status")...)
			return nil
		}
	}
	w.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// socksClient returns an http.Client through the daemon as a SOCKS5 proxy.
func (w *world) socksClient(user string, roots *tls.Config) *http.Client {
	u := &url.URL{Scheme: "socks5", Host: w.addr}
	if user != "" {
		name, pass, _ := strings.Cut(user, ":")
		u.User = url.UserPassword(name, pass)
	}
	tr := &http.Transport{Proxy: http.ProxyURL(u), TLSClientConfig: roots, DisableKeepAlives: true}
	w.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// origin starts an HTTP origin that answers 200 "hello from <exit>" naming the exit that carried
// the request (from the registry), and records the headers it saw.
func (w *world) origin(tlsOn bool) (*httptest.Server, *[]http.Header) {
	var seen []http.Header
	h := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Clone())
		name, _ := w.reg.Lookup(r)
		io.WriteString(rw, "hello from "+name)
	})
	var srv *httptest.Server
	if tlsOn {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	w.t.Cleanup(srv.Close)
	return srv, &seen
}

// get fetches u with c and returns the status, body and Proxy-Status values.
func get(t *testing.T, c *http.Client, u string, hdr ...string) (int, string, []string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Values("Proxy-Status")
}

// rootsOf returns a TLS config trusting srv's certificate.
func rootsOf(srv *httptest.Server) *tls.Config {
	return &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
}

// dialDaemon opens a raw connection to the daemon.
func (w *world) dialDaemon() net.Conn {
	w.t.Helper()
	c, err := net.Dial("tcp", w.addr)
	if err != nil {
		w.t.Fatal(err)
	}
	w.t.Cleanup(func() { c.Close() })
	return c
}

// waitFor polls cond until it holds, failing the test after a generous bound: for state that
// real sockets reach in their own time (a tunnel's end), never to measure time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s", what)
}

// verdictCount returns how many tunnels were judged with outcome and class.
func (s *Server) verdictCount(outcome, class string) int64 {
	s.metrics.mu.Lock()
	defer s.metrics.mu.Unlock()
	var n int64
	for k, c := range s.metrics.verdicts {
		if k.outcome.String() == outcome && string(k.class) == class {
			n += c
		}
	}
	return n
}

// basic returns user:pass in Basic encoding.
func basic(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// syncBuilder is a strings.Builder safe for concurrent writes.
type syncBuilder struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// testLogger logs everything, debug included, as text; logged returns what it logged so far.
func testLogger() (l *slog.Logger, logged func() string) {
	sb := &syncBuilder{b: &strings.Builder{}}
	return slog.New(slog.NewTextHandler(sb, &slog.HandlerOptions{Level: slog.LevelDebug})), func() string {
		sb.mu.Lock()
		defer sb.mu.Unlock()
		return sb.b.String()
	}
}

func newReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
