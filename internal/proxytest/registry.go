package proxytest

import (
	"fmt"
	"net"
	"net/http"
	"sync"
)

// Registry maps the upstream connections proxies dial to the names of those proxies, so an origin
// server can tell which proxy carried a request, over plain HTTP and through CONNECT tunnels
// (HTTP/1.1 and HTTP/2) alike.
//
// A connection is known by both of its ends — the proxy's local address and the target's address —
// because the kernel may give a live connection's local port to a new connection towards another
// address: the local address alone can name two proxies at once. A proxy registers a connection
// after dialing it and before writing a byte on it, so by the time the origin sees a request the
// connection is known. The zero value is an empty Registry ready to use; it is safe for concurrent
// use and must not be copied after first use.
type Registry struct {
	mu    sync.Mutex
	names map[connEnds]string
}

// connEnds is an upstream connection as the proxy sees it.
type connEnds struct{ local, remote string }

func (r *Registry) register(c net.Conn, name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = make(map[connEnds]string)
	}
	r.names[connEnds{c.LocalAddr().String(), c.RemoteAddr().String()}] = name
}

// Lookup returns the name of the proxy that carried req, as the origin server handling req sees it:
// the proxy's end of the connection is req.RemoteAddr, and the origin's end is the local address
// net/http puts in the request context (http.LocalAddrContextKey). It reports false for a request
// no proxy carried, such as one from a client that connected directly.
func (r *Registry) Lookup(req *http.Request) (name string, ok bool) {
	local, _ := req.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if local == nil {
		return "", false
	}
	return r.LookupConn(req.RemoteAddr, local.String())
}

// LookupConn returns the name of the proxy whose upstream connection ran from proxySide (its
// local address, "127.0.0.1:PORT") to targetSide (the target's address).
func (r *Registry) LookupConn(proxySide, targetSide string) (name string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name, ok = r.names[connEnds{proxySide, targetSide}]
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
