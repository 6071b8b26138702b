package transport

import (
	"fmt"
	"net"
	"net/http"

	"github.com/proxybreaker/proxybreaker/pool"
)

// NewExitTransport returns a new *http.Transport that sends every request through e, built exactly
// as a Transport builds the base transport of each exit: cloned from template (DefaultBaseTemplate()
// when nil), its Proxy replaced by e (never ProxyFromEnvironment), a CONNECT answered other than 200
// turned into a *ProxyConnectError, and for socks5/socks5h exits a dialer whose credential rejection
// DefaultClassifier recognises as proxy_auth. resolver looks origin names up for socks5:// exits
// (net.DefaultResolver when nil).
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
	return newExitTransport(e, template, resolver), nil
}
