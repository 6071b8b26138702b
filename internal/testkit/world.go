package testkit

import (
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// The passwords a World's proxies demand, and its WrongPass exits dial with.
const (
	worldPass = "right"
	wrongPass = "wrong"
)

// ExitSpec is one real local proxy and the exit that dials it, both named Name. The zero value
// but for Name is a healthy open proxy.
type ExitSpec struct {
	Name string
	// User makes the proxy demand Basic credentials User:"right"; the exit dials with them.
	User string
	// WrongPass makes the exit dial with User:"wrong": the proxy answers 407. Needs User.
	WrongPass bool
	// Hang makes the proxy accept connections and never answer.
	Hang bool
	// Dead starts no proxy: the exit points at a loopback address where nothing listens, so
	// dialing it is refused.
	Dead bool
}

// World is a set of real proxies on 127.0.0.1 (internal/proxytest) failing in the ways ExitSpec
// names, and the exits that dial them: the exits' side of an integration test. Its proxies share
// the Registry StartWorld was given, so an origin registered there can tell which one carried a
// request (Registry.Lookup). The origin is the test's own.
type World struct {
	Exits   []*pool.Exit                // in spec order, labelled with the specs' names
	Proxies map[string]*proxytest.Proxy // by name; none for Dead specs
}

// StartWorld starts a proxy per spec (none for Dead ones), registered with reg (nil for none), and
// makes the exits. Dead exits get their closed addresses after every proxy has started, so that
// no proxy started here is handed the same port. The proxies are closed when the test ends; any
// failure to start fails the test.
func StartWorld(t testing.TB, reg *proxytest.Registry, specs ...ExitSpec) *World {
	t.Helper()
	w := &World{Exits: make([]*pool.Exit, len(specs)), Proxies: map[string]*proxytest.Proxy{}}
	urls := make([]*url.URL, len(specs))
	for i, s := range specs {
		if s.Dead {
			continue
		}
		if s.WrongPass && s.User == "" {
			t.Fatalf("testkit.StartWorld: exit %q: WrongPass needs a User", s.Name)
		}
		cfg := proxytest.Config{Name: s.Name, Registry: reg, Hang: s.Hang}
		if s.User != "" {
			cfg.User, cfg.Pass = s.User, worldPass
		}
		p, err := proxytest.Start(cfg)
		if err != nil {
			t.Fatalf("testkit.StartWorld: proxy %q: %v", s.Name, err)
		}
		t.Cleanup(func() { p.Close() })
		w.Proxies[s.Name] = p
		urls[i] = p.URL() // with User:"right" when the proxy demands it
		if s.WrongPass {
			urls[i] = p.URLWithCredentials(s.User, wrongPass)
		}
	}
	for i, s := range specs {
		if s.Dead {
			addr, err := proxytest.ClosedAddr()
			if err != nil {
				t.Fatalf("testkit.StartWorld: dead exit %q: %v", s.Name, err)
			}
			urls[i] = &url.URL{Scheme: "http", Host: addr}
		}
		e, err := pool.NewExit(urls[i])
		if err != nil {
			t.Fatalf("testkit.StartWorld: exit %q: %v", s.Name, err)
		}
		w.Exits[i] = e.WithLabel(s.Name)
	}
	return w
}

// Transport returns a Transport over a new pool of the world's exits, made with popts, on
// TLSTemplate(origin) (so a TLS origin is trusted through the proxies' tunnels) and then topts.
// It is closed when the test ends; an error fails the test.
func (w *World) Transport(t testing.TB, origin *httptest.Server, popts []pool.Option, topts ...transport.Option) *transport.Transport {
	t.Helper()
	p, err := pool.New(append([]pool.Option{pool.WithExits(w.Exits...)}, popts...)...)
	if err != nil {
		t.Fatalf("pool.New = %v", err)
	}
	tr, err := transport.New(p, append([]transport.Option{transport.WithBaseTemplate(TLSTemplate(origin))}, topts...)...)
	if err != nil {
		p.Close()
		t.Fatalf("transport.New = %v", err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}
