package proxytest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DialTimeout bounds how long a proxy waits to connect to a target before it answers 502.
const DialTimeout = 5 * time.Second

// acceptRetryDelay is how long the accept loop waits after an accept error other than a closed
// listener (such as running out of file descriptors) before it tries again.
const acceptRetryDelay = 5 * time.Millisecond

// Config describes one proxy. The zero value is an open proxy with no name, no registry, no
// authentication and no added latency.
type Config struct {
	// Name identifies the proxy: it is what Registry.Lookup returns for connections this proxy
	// dialed, and it appears in the bodies of the error responses the proxy writes. Required when
	// Registry is set.
	Name string

	// SOCKS5 makes the listener speak SOCKS5 (RFC 1928) instead of HTTP proxying: the CONNECT
	// command only, to an IPv4 or IPv6 loopback address or the name "localhost" (taken as
	// 127.0.0.1 without a resolver); any other target is answered "connection not allowed by
	// ruleset" (0x02). User and Pass then make it demand RFC 1929 username/password
	// authentication, and nothing else: wrong credentials get status 0x01 and the connection is
	// closed; a client that offers no username/password method gets "no acceptable methods".
	// Hang, HangAfterConnect, Latency and Registry work as for HTTP proxying.
	SOCKS5 bool

	// User and Pass, when User is not empty, make the proxy demand Basic credentials in the
	// Proxy-Authorization header of every plain HTTP and CONNECT request. A request without them,
	// or with others, is answered 407 with Proxy-Authenticate: Basic realm="proxytest" and the
	// connection is closed. User must not contain a colon; Pass may be empty; Pass without User
	// is an error. With SOCKS5, User and Pass are at most 255 bytes each.
	User, Pass string

	// Hang makes the proxy accept TCP connections and never answer: it reads and discards what
	// the client sends until the client hangs up or the proxy is closed.
	Hang bool

	// HangAfterConnect makes the proxy answer CONNECT requests 200 (SOCKS5: succeeded) without
	// dialing the target and then never relay anything, a tunnel in which TLS never completes.
	// Plain HTTP requests are still forwarded. Mutually exclusive with Hang.
	HangAfterConnect bool

	// Registry, when set, records the local address of every upstream connection the proxy dials
	// under Name, before any byte is written on it. Several proxies may share one Registry.
	Registry *Registry

	// Latency is waited before the proxy dials a target, for plain HTTP and CONNECT alike. Zero
	// adds nothing; negative is an error. Close cuts a wait short.
	Latency time.Duration

	// SourceAddr, when set, is the IP address the proxy's upstream connections leave from: a
	// loopback address such as "127.0.0.2", so that an origin on 127.0.0.1 sees this proxy's
	// requests come from a client IP of their own (r.RemoteAddr), as a real exit's would. Empty:
	// the kernel's choice (127.0.0.1 for a target on 127.0.0.1). Any other address is an error.
	SourceAddr string
}

func (c Config) validate() error {
	switch {
	case c.User == "" && c.Pass != "":
		return errors.New("proxytest: config: Pass set without User")
	case strings.Contains(c.User, ":"):
		return errors.New("proxytest: config: User contains a colon, which Basic credentials cannot carry")
	case c.Hang && c.HangAfterConnect:
		return errors.New("proxytest: config: Hang and HangAfterConnect are mutually exclusive")
	case c.Registry != nil && c.Name == "":
		return errors.New("proxytest: config: Registry set without Name")
	case c.Latency < 0:
		return errors.New("proxytest: config: negative Latency " + c.Latency.String())
	case c.SOCKS5 && (len(c.User) > 255 || len(c.Pass) > 255):
		return errors.New("proxytest: config: SOCKS5 User or Pass longer than 255 bytes")
	case c.SourceAddr != "":
		if ip, err := netip.ParseAddr(c.SourceAddr); err != nil || !ip.IsLoopback() || ip.Zone() != "" {
			return errors.New("proxytest: config: SourceAddr " + strconv.Quote(c.SourceAddr) + ": want a loopback IP address such as 127.0.0.2")
		}
	}
	return nil
}

// Proxy is a forward proxy listening on 127.0.0.1. Its methods are safe for concurrent use.
// Create one with Start and stop it with Close.
type Proxy struct {
	cfg  Config
	ln   net.Listener // guarded by mu once serving: a gateway may stop and resume listening
	addr string
	// gw, when set, makes the proxy a provider's gateway (gateway.go): it judges the credentials
	// and chooses the source address of every upstream dial.
	gw *Gateway

	// ctx is cancelled by Close; it cuts short dials and Latency waits.
	ctx    context.Context
	cancel context.CancelFunc

	// wg counts every goroutine the proxy started; Close waits for it.
	wg sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{} // open client and upstream connections; nil once closed
	closed bool
	// clients counts the open client connections; hangups gets a token when one closes (bytes.go).
	clients int
	hangups chan struct{}

	closeOnce sync.Once
	closeErr  error

	requests atomic.Int64
	connects atomic.Int64
	rejected atomic.Int64
	bytes    clientBytes // on client connections (bytes.go)
}

// Start validates cfg, listens on 127.0.0.1 with a kernel-chosen port and serves until Close.
func Start(cfg Config) (*Proxy, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return start(cfg, nil)
}

// start listens and serves; gw, when not nil, makes the proxy a gateway.
func start(cfg Config, gw *Gateway) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, errors.New("proxytest: listen: " + err.Error())
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		cfg:     cfg,
		ln:      ln,
		addr:    ln.Addr().String(),
		gw:      gw,
		ctx:     ctx,
		cancel:  cancel,
		conns:   make(map[net.Conn]struct{}),
		hangups: make(chan struct{}, 1),
	}
	p.wg.Add(1)
	go p.acceptLoop(ln)
	return p, nil
}

// Addr returns the address the proxy listens on, "127.0.0.1:PORT".
func (p *Proxy) Addr() string { return p.addr }

// URL returns a new http://127.0.0.1:PORT URL for the proxy (socks5://127.0.0.1:PORT with
// Config.SOCKS5), carrying Config.User and Config.Pass as its user information when User is set:
// the credentials a client should use. Pass it to http.ProxyURL.
func (p *Proxy) URL() *url.URL {
	u := &url.URL{Scheme: p.scheme(), Host: p.Addr()}
	if p.cfg.User != "" {
		u.User = url.UserPassword(p.cfg.User, p.cfg.Pass)
	}
	return u
}

// URLWithCredentials returns a new URL for the proxy carrying user and pass, whatever the proxy
// expects; use it to send wrong credentials.
func (p *Proxy) URLWithCredentials(user, pass string) *url.URL {
	return &url.URL{Scheme: p.scheme(), Host: p.Addr(), User: url.UserPassword(user, pass)}
}

// scheme is the URL scheme of the protocol the proxy speaks.
func (p *Proxy) scheme() string {
	if p.cfg.SOCKS5 {
		return "socks5"
	}
	return "http"
}

// Requests reports how many plain HTTP requests the proxy has forwarded to a target. A request
// counts once its upstream connection is open, before its response arrives. A SOCKS5 proxy
// forwards none.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Connects reports how many CONNECT requests the proxy has answered 200 (SOCKS5: succeeded),
// including the tunnels that Config.HangAfterConnect leaves silent. A tunnel counts before the
// client reads the reply.
func (p *Proxy) Connects() int64 { return p.connects.Load() }

// Rejected reports how many requests the proxy has refused without contacting a target: 407 for
// missing or wrong credentials, 403 for a target off the loopback interface, 400 for a request it
// cannot parse. Dial failures (502) are not rejections. A request counts before its response is
// written. A SOCKS5 proxy counts its refusals alike: no acceptable method, wrong credentials, a
// target that is not allowed, a command or address type it does not support, a malformed message.
func (p *Proxy) Rejected() int64 { return p.rejected.Load() }

// Close stops the proxy: it closes the listener and every client and upstream connection, and
// returns once every goroutine the proxy started has ended. It returns the listener's close error
// the first time and the same result on later calls, which wait for the first to finish.
func (p *Proxy) Close() error {
	p.closeOnce.Do(func() {
		p.cancel()
		p.mu.Lock()
		if p.ln != nil {
			p.closeErr = p.ln.Close()
		}
		conns := p.conns
		p.conns = nil
		p.closed = true
		p.mu.Unlock()
		for c := range conns {
			c.Close()
		}
		p.wg.Wait()
	})
	return p.closeErr
}

func (p *Proxy) acceptLoop(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || !p.pause(acceptRetryDelay) {
				return
			}
			continue
		}
		c = &countedClient{Conn: c, b: &p.bytes}
		if !p.track(c) {
			c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.serve(c)
		}()
	}
}

// stopListening closes the listener, so that connections to the proxy's address are refused,
// and leaves open connections alone. It does nothing when the proxy is closed or not listening.
func (p *Proxy) stopListening() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.ln == nil {
		return
	}
	p.ln.Close()
	p.ln = nil
}

// resumeListening listens again on the proxy's address after stopListening.
func (p *Proxy) resumeListening() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		return errors.New("proxytest: listen again on " + p.addr + ": " + err.Error())
	}
	p.ln = ln
	p.wg.Add(1)
	go p.acceptLoop(ln)
	return nil
}

// track adds c to the connections Close closes. It reports false, and leaves c alone, when the
// proxy is already closed; the caller must then close c itself.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	if _, ok := c.(*countedClient); ok {
		p.clients++
	}
	return true
}

// untrack closes c and forgets it.
func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	if !p.closed {
		delete(p.conns, c)
	}
	_, client := c.(*countedClient)
	if client {
		p.clients--
	}
	p.mu.Unlock()
	c.Close()
	if client {
		select {
		case p.hangups <- struct{}{}:
		default:
		}
	}
}

// pause waits d and reports true, or reports false as soon as the proxy is closed.
func (p *Proxy) pause(d time.Duration) bool {
	if d <= 0 {
		return p.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.ctx.Done():
		return false
	}
}
