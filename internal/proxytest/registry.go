package proxytest

import (
	"fmt"
	"net"
	"sync"
)

// Registry maps the local addresses of the upstream connections proxies dial to the names of
// those proxies, so an origin server can tell from r.RemoteAddr which proxy carried a request,
// over plain HTTP and through CONNECT tunnels (HTTP/1.1 and HTTP/2) alike.
//
// A proxy registers a connection after dialing it and before writing a byte on it, so by the time
// the origin sees a request the address is known. Entries are never removed; when the kernel
// reuses a local port, the newest registration wins. The zero value is an empty Registry ready to
// use; it is safe for concurrent use and must not be copied after first use.
type Registry struct {
	mu    sync.Mutex
	names map[string]string // local address "IP:PORT" → proxy name
}

func (r *Registry) register(localAddr, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = make(map[string]string)
	}
	r.names[localAddr] = name
}

// Lookup returns the name of the proxy whose upstream connection had the local address
// remoteAddr, as an origin sees it in http.Request.RemoteAddr ("127.0.0.1:PORT"). It reports
// false for an address no proxy registered, such as a client that connected directly.
func (r *Registry) Lookup(remoteAddr string) (name string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name, ok = r.names[remoteAddr]
	return name, ok
}

// ClosedAddr returns a 127.0.0.1 address with nothing listening on it: it listens on a
// kernel-chosen port, closes the listener and returns the address. Connections to it are refused
// until the kernel hands the port out again, which it does not do soon; use it for a proxy that
// is down.
func ClosedAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("proxytest: closed address: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("proxytest: closed address %s: %w", addr, err)
	}
	return addr, nil
}
