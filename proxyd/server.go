package proxyd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"
	"sync/atomic"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// Server is the daemon's proxy: each listener it serves takes plain-HTTP (absolute-URI) requests,
// CONNECT tunnels and SOCKS5, told apart by the first byte, and sends them through the exits of
// its pool. Plain HTTP goes through a transport.Transport, with its full judgement; tunnels are
// judged by what the daemon sees of them (tunnel.go). It is safe for concurrent use.
type Server struct {
	pool     *pool.Pool
	tr       *transport.Transport
	cfg      Config
	creds    *credentialSet
	allow    allowlist
	tunnels  *tunnelSet
	sessions *sessionExits
	metrics  metrics
	proxy    *httputil.ReverseProxy

	ctx    context.Context // ends when Shutdown gives up waiting: picks and dials stop
	cancel context.CancelFunc

	mu        sync.Mutex
	listeners []*listener
	closed    bool
	conns     atomic.Int64 // client connections open
	unobserve func()
}

// New returns a Server over p, configured by cfg. opts are added to the options of the
// transport it builds for plain HTTP (observers, a header timeout, an origin key: give
// transport.WithOriginKey the same func as Config.OriginKey); the server adds its own base
// template, whose dials to targets refuse forbidden addresses (safety.go), and wraps the
// classifier so that such a refusal counts against no exit.
func New(p *pool.Pool, cfg Config, opts ...transport.Option) (*Server, error) {
	if p == nil {
		return nil, errors.New("proxyd: New: nil pool")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	creds, err := newCredentialSet(cfg.Credentials)
	if err != nil {
		return nil, err
	}
	s := &Server{pool: p, cfg: cfg, creds: creds, allow: cfg.Allow, tunnels: newTunnelSet(), sessions: newSessionExits(cfg.SessionsKept)}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	topts := append([]transport.Option{
		transport.WithBaseTemplate(s.baseTemplate()),
		transport.WithClassifier(guardClassifier{transport.DefaultClassifier}),
		transport.WithOriginKey(cfg.OriginKey),
	}, opts...)
	if s.tr, err = transport.New(p, topts...); err != nil {
		return nil, err
	}
	if s.unobserve, err = p.Observe(tunnelCloser{s: s}); err != nil {
		s.tr.Close()
		return nil, err
	}
	s.proxy = s.reverseProxy()
	return s, nil
}

// Pool returns the server's pool.
func (s *Server) Pool() *pool.Pool { return s.pool }

// Transport returns the transport plain-HTTP requests go through.
func (s *Server) Transport() *transport.Transport { return s.tr }

// baseTemplate is transport.DefaultBaseTemplate whose dials to targets (a direct exit's; any dial
// that is not to an exit's proxy) refuse forbidden addresses unless Config.AllowPrivate, as do the
// dials to a socks5:// exit's proxy when the target's name resolves to one (checkResolvedTarget).
func (s *Server) baseTemplate() *http.Transport {
	t := transport.DefaultBaseTemplate()
	if s.cfg.AllowPrivate {
		return t
	}
	plain := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	guarded := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: guardControl}
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if e, ok := transport.ExitFromContext(ctx); ok && !e.Direct() {
			if e.Scheme() == pool.SchemeSOCKS5 {
				if err := checkResolvedTarget(ctx); err != nil {
					return nil, err
				}
			}
			return plain.DialContext(ctx, network, addr) // the exit's proxy, which the operator listed
		}
		return guarded.DialContext(ctx, network, addr)
	}
	return t
}

// guardClassifier judges a dial the SSRF guard refused as the request's fault, not the exit's.
type guardClassifier struct{ next transport.Classifier }

func (g guardClassifier) Classify(a *transport.Attempt) pool.Verdict {
	if a.Err != nil && errors.Is(a.Err, ErrForbiddenTarget) {
		return pool.Verdict{Outcome: pool.Neutral, Scope: pool.ScopeOrigin, Class: pool.ClassBadRequest}
	}
	return g.next.Classify(a)
}

// listener is one port the server serves, with the options its profile fixes.
type listener struct {
	s       *Server
	ln      net.Listener
	profile Options
	httpSrv *http.Server
	httpLn  *chanListener
}

// Serve serves ln until Shutdown, with profile — options text such as "country-us-session-x"
// (Options, without the account) — fixed for every request on it: a port per profile, for clients
// such as Chromium that send no credentials until challenged. It refuses a listener beyond
// loopback when the server has neither credentials nor an allowlist (ErrOpenRelay). It returns nil
// after Shutdown.
func (s *Server) Serve(ln net.Listener, profile string) error {
	if err := s.cfg.CheckListen(ln.Addr().String()); err != nil {
		ln.Close()
		return err
	}
	opts, err := ParseOptions(profile)
	if err != nil {
		ln.Close()
		return fmt.Errorf("proxyd: profile of %s: %w", ln.Addr(), err)
	}
	l := &listener{s: s, ln: ln, profile: opts, httpLn: newChanListener(ln.Addr())}
	l.httpSrv = &http.Server{
		Handler:           l,
		ReadHeaderTimeout: s.cfg.HeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		ErrorLog:          log.New(slogWriter{s.cfg.Logger}, "", 0),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.listeners = append(s.listeners, l)
	s.mu.Unlock()
	go l.httpSrv.Serve(l.httpLn)
	return l.accept()
}

// slogWriter sends net/http's server log lines to the logger at debug level.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	w.l.Debug("proxyd: http server", "msg", string(p))
	return len(p), nil
}

// accept accepts connections until the listener closes.
func (l *listener) accept() error {
	s := l.s
	var delay time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			// Out of file descriptors, say: wait a little and go on.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if !s.allow.admits(c.RemoteAddr()) {
			s.metrics.connsNotAllowed.Add(1)
			c.Close()
			continue
		}
		if s.conns.Add(1) > int64(s.cfg.MaxConns) {
			s.conns.Add(-1)
			s.metrics.connsOverCap.Add(1)
			c.Close()
			continue
		}
		s.metrics.connsAccepted.Add(1)
		go l.sniff(&trackedConn{Conn: c, s: s})
	}
}

// trackedConn is a client connection, counted while open.
type trackedConn struct {
	net.Conn
	s      *Server
	closed atomic.Bool
}

func (c *trackedConn) Close() error {
	if c.closed.CompareAndSwap(false, true) {
		c.s.conns.Add(-1)
	}
	return c.Conn.Close()
}

// CloseWrite half-closes the connection.
func (c *trackedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// sniff reads the connection's first byte, within the header timeout: 5 is SOCKS5, anything else
// HTTP, handed to the listener's http.Server.
func (l *listener) sniff(c *trackedConn) {
	c.SetReadDeadline(time.Now().Add(l.s.cfg.HeaderTimeout))
	br := bufio.NewReaderSize(c, 4096)
	b, err := br.Peek(1)
	if err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	if b[0] == socksVersion {
		l.serveSOCKS(c, br)
		c.Close()
		return
	}
	if !l.httpLn.deliver(&peekedConn{trackedConn: c, r: br}) {
		c.Close()
	}
}

// peekedConn is a client connection whose first bytes sit in r.
type peekedConn struct {
	*trackedConn
	r *bufio.Reader
}

func (c *peekedConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// chanListener hands sniffed HTTP connections to an http.Server.
type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener(addr net.Addr) *chanListener {
	return &chanListener{addr: addr, ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }

// Shutdown stops accepting, lets requests in flight finish and waits for live tunnels to end,
// until ctx is done; then it closes what is left and returns ctx's error. The transport is closed
// and the pool observer removed either way.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	ls := s.listeners
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range ls {
		l.ln.Close()
		l.httpLn.Close()
		wg.Go(func() { l.httpSrv.Shutdown(ctx) })
	}
	wg.Wait()
	var err error
	select {
	case <-s.tunnels.drained():
	case <-ctx.Done():
		err = ctx.Err()
		for _, t := range s.tunnels.all() {
			t.kill()
		}
		for _, l := range ls {
			l.httpSrv.Close()
		}
	}
	s.cancel()
	s.unobserve()
	s.tr.Close()
	return err
}

// ExitOfSession returns the label of the exit that last carried the client session for origin
// (the session option of a proxy username), for the report API.
func (s *Server) ExitOfSession(session, origin string) (string, bool) {
	return s.sessions.exit(session, origin)
}

// OriginOf returns the origin key of a site given as a URL, a host or host:port.
func (s *Server) OriginOf(site string) string {
	return originOfSite(s.cfg.OriginKey, site)
}
