package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/proxy"
)

// DefaultBaseTemplate returns the template each exit's *http.Transport is cloned from by default:
// net/http's defaults without ProxyFromEnvironment (a request never leaves except through its
// exit), HTTP/2 attempted, and bounded dial and TLS handshakes.
func DefaultBaseTemplate() *http.Transport {
	return &http.Transport{
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}
}

// baseSlot holds an exit's own *http.Transport, built on first use. One transport per exit is what
// makes routing true: net/http pools HTTP/2 connections by origin alone, so a shared transport with
// a per-request Proxy func would reuse one exit's h2 connection for every exit.
type baseSlot struct {
	mu sync.Mutex
	rt atomic.Pointer[http.Transport]
}

// exitTransport returns es's base transport, cloning template the first time.
func exitTransport(es *exitState, template *http.Transport) *http.Transport {
	if rt := es.base.rt.Load(); rt != nil {
		return rt
	}
	es.base.mu.Lock()
	defer es.base.mu.Unlock()
	rt := es.base.rt.Load()
	if rt == nil {
		rt = newExitTransport(es.exit, template)
		es.base.rt.Store(rt)
	}
	return rt
}

// closeIdle closes the idle connections of es's base transport, if it was ever built.
func closeIdle(es *exitState) {
	if rt := es.base.rt.Load(); rt != nil {
		rt.CloseIdleConnections()
	}
}

func newExitTransport(e *Exit, template *http.Transport) *http.Transport {
	tr := template.Clone()
	label := e.label
	tr.OnProxyConnectResponse = func(_ context.Context, _ *url.URL, _ *http.Request, res *http.Response) error {
		if res.StatusCode != http.StatusOK {
			return &ProxyConnectError{Exit: label, StatusCode: res.StatusCode}
		}
		return nil
	}
	switch e.u.Scheme {
	case SchemeSOCKS5, SchemeSOCKS5H:
		tr.Proxy = nil
		tr.DialContext = socksDialer(e, template)
	default:
		tr.Proxy = http.ProxyURL(e.ProxyURL())
	}
	return tr
}

// forwardDialer adapts a DialContext func to proxy.ContextDialer.
type forwardDialer func(ctx context.Context, network, addr string) (net.Conn, error)

func (f forwardDialer) Dial(network, addr string) (net.Conn, error) {
	return f(context.Background(), network, addr)
}

func (f forwardDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return f(ctx, network, addr)
}

// socksDialer dials through the exit's SOCKS5 proxy. socks5h hands the origin's name to the proxy;
// socks5 resolves it here first.
func socksDialer(e *Exit, template *http.Transport) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var auth *proxy.Auth
	if e.u.User != nil {
		pass, _ := e.u.User.Password()
		auth = &proxy.Auth{User: e.u.User.Username(), Password: pass}
	}
	forward := template.DialContext
	if forward == nil {
		forward = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	d, err := proxy.SOCKS5("tcp", e.u.Host, auth, forwardDialer(forward))
	if err != nil {
		return func(context.Context, string, string) (net.Conn, error) {
			return nil, fmt.Errorf("transport: exit %s: socks5: %w", e.label, errors.Unwrap(err))
		}
	}
	cd := d.(proxy.ContextDialer)
	localDNS := e.u.Scheme == SchemeSOCKS5
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if localDNS {
			host, port, err := net.SplitHostPort(addr)
			if err != nil {
				return nil, err
			}
			if net.ParseIP(host) == nil {
				ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
				if err != nil {
					return nil, &originDNSError{err}
				}
				if len(ips) == 0 {
					return nil, &originDNSError{fmt.Errorf("no address for %s", host)}
				}
				addr = net.JoinHostPort(ips[0].IP.String(), port)
			}
		}
		return cd.DialContext(ctx, network, addr)
	}
}
