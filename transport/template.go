package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/proxybreaker/proxybreaker/pool"
)

// DefaultBaseTemplate returns the template each exit's *http.Transport is cloned from by default:
// net/http's defaults without ProxyFromEnvironment (a request never leaves except through its
// exit), HTTP/2 attempted, bounded dial and TLS handshakes, and response headers bounded by
// DefaultMaxResponseHeaderBytes instead of net/http's 10 MiB.
func DefaultBaseTemplate() *http.Transport {
	return &http.Transport{
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  1 * time.Second,
		MaxResponseHeaderBytes: DefaultMaxResponseHeaderBytes,
	}
}

// newExitTransport builds e's transport; p, when not nil, is the pool that counts what e's
// connections carried beyond their attempts' claims (traffic.go).
func newExitTransport(p *pool.Pool, e *pool.Exit, template *http.Transport, resolver *net.Resolver, conns *sessionConns) *http.Transport {
	tr := template.Clone()
	counter := connCounter{pool: p, exit: e, conns: conns}
	label := e.Label()
	egress := egressHeader(e) // a gateway session's egress IP header (egress.go); "" for none
	tr.OnProxyConnectResponse = func(ctx context.Context, _ *url.URL, _ *http.Request, res *http.Response) error {
		if res.StatusCode != http.StatusOK {
			// The header goes with the error: the proxy's markers say what the refusal means.
			return &ProxyConnectError{Exit: label, StatusCode: res.StatusCode, Status: res.Status, Header: res.Header}
		}
		if egress != "" {
			return connectEgress(ctx, egress, res)
		}
		return nil
	}
	if e.Rotating() {
		oneRequestPerConn(tr)
	}
	switch e.Scheme() {
	case pool.SchemeDirect:
		directTransport(tr, template, counter) // direct.go
	case pool.SchemeSOCKS5, pool.SchemeSOCKS5H:
		tr.Proxy = nil
		tr.DialContext = socksDialer(e, template, resolver, counter)
	default:
		tr.Proxy = http.ProxyURL(e.ProxyURL())
		tr.DialContext = countingDial(counter, template.DialContext, template.Dial) // traffic.go
	}
	return tr
}

// oneRequestPerConn makes tr close each connection after one response: a rotating gateway
// (rotate=request) chooses its IP per connection — over HTTPS per CONNECT, the tunnel keeping its
// IP for as long as it lives — so a kept-alive HTTP/1.1 connection, or an HTTP/2 one carrying
// every request at once, would send every request and every retry from one IP, banned or not.
// HTTP/2 is off: it exists to share a connection.
func oneRequestPerConn(tr *http.Transport) {
	tr.DisableKeepAlives = true
	tr.ForceAttemptHTTP2 = false
	var h1 http.Protocols
	h1.SetHTTP1(true)
	tr.Protocols = &h1
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	if c := tr.TLSClientConfig; c != nil && slices.Contains(c.NextProtos, "h2") {
		// A template that has carried requests offers h2 in its TLS config already.
		c = c.Clone()
		c.NextProtos = slices.DeleteFunc(c.NextProtos, func(p string) bool { return p == "h2" })
		tr.TLSClientConfig = c
	}
}

// NewExitTransport returns a new *http.Transport that sends every request through e, built exactly
// as a Transport builds the base transport of each exit: cloned from template (DefaultBaseTemplate()
// when nil), its Proxy replaced by e (never ProxyFromEnvironment; nil for a direct exit, which
// dials origins itself), a CONNECT answered other than 200 turned into a *ProxyConnectError
// carrying the proxy's status line and headers, and for socks5/socks5h exits a dialer whose
// credential rejection DefaultClassifier recognises as proxy_auth. resolver looks origin names up for socks5:// exits (net.DefaultResolver when nil).
//
// It is for tools that must reach an exit the way live traffic does, without the pool's breakers:
// package probe builds its pre-dispatch probes on it, so that the probe and the transport classify
// the same failure the same way. The caller owns the result and should call CloseIdleConnections
// when done with it.
func NewExitTransport(e *pool.Exit, template *http.Transport, resolver *net.Resolver) (*http.Transport, error) {
	if e == nil {
		return nil, fmt.Errorf("transport: NewExitTransport: nil exit")
	}
	if template == nil {
		template = DefaultBaseTemplate()
	}
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	return newExitTransport(nil, e, template, resolver, nil), nil
}
