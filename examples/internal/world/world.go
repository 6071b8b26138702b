package world

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"

	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/transport"
)

// ExitSpec is one exit of an example, the proxy behind it and the trouble it has. The zero value
// but for Name is a healthy open proxy in tier 0.
type ExitSpec struct {
	Name string // the proxy's name in the Registry and the exit's label
	Tier int    // the exit's tier: 0 is preferred
	// User and Pass, when User is set, make the proxy demand Basic credentials; the exit dials
	// with them, or with User:WrongPass when WrongPass is set (the proxy then answers 407).
	User, Pass, WrongPass string
	Hang                  bool   // the proxy accepts connections and never answers
	Dead                  bool   // no proxy: nothing listens where the exit points
	Role                  string // what the example says of the exit
}

// Secrets returns every password the specs hold, right and wrong: none may ever be printed.
func Secrets(specs []ExitSpec) []string {
	var s []string
	for _, sp := range specs {
		for _, p := range []string{sp.Pass, sp.WrongPass} {
			if p != "" {
				s = append(s, p)
			}
		}
	}
	return s
}

// World is an example's proxies, exits and sites on 127.0.0.1. Its methods are not safe for
// concurrent use while it is being built; once built, Registry, SiteName and ProxyAt are.
type World struct {
	// Registry is shared by every proxy the world starts: a site's handler asks it which proxy
	// carried a request (Registry.Lookup).
	Registry *proxytest.Registry
	// Exits are every exit started, labelled and tiered, in the order of the specs.
	Exits []*pool.Exit
	// Sites are the sites added, in order.
	Sites []*Site

	proxies []*proxytest.Proxy
	byName  map[string]*proxytest.Proxy
	proxyAt map[string]string // proxy name by listening address
	byKey   map[string]*Site
	roots   *x509.CertPool // trusts the TLS sites
}

// Site is one small web site of a world.
type Site struct {
	Name   string
	URL    string // the base URL, http://127.0.0.1:PORT (https for a TLS site)
	Key    string // its origin key, as transport.OriginHost names it
	Server *httptest.Server
}

// New returns an empty world: a Registry, no proxies, no sites.
func New() *World {
	return &World{
		Registry: &proxytest.Registry{}, byName: map[string]*proxytest.Proxy{}, proxyAt: map[string]string{},
		byKey: map[string]*Site{},
		roots: x509.NewCertPool(),
	}
}

// StartExits starts a proxy per spec (none for Dead ones), registered with the world's Registry,
// and returns the exits that dial them, which it also appends to Exits. Dead exits get their
// closed addresses after every proxy has started, so that none of them is handed the same port:
// add the sites first. On error the world keeps what it started; Close stops it.
func (w *World) StartExits(specs ...ExitSpec) ([]*pool.Exit, error) {
	urls := make([]*url.URL, len(specs))
	for i, sp := range specs {
		if sp.Dead {
			continue
		}
		p, err := proxytest.Start(proxytest.Config{
			Name: sp.Name, Registry: w.Registry, User: sp.User, Pass: sp.Pass, Hang: sp.Hang,
		})
		if err != nil {
			return nil, fmt.Errorf("world: proxy %s: %w", sp.Name, err)
		}
		w.proxies = append(w.proxies, p)
		w.byName[sp.Name], w.proxyAt[p.Addr()] = p, sp.Name
		urls[i] = p.URL()
		if sp.WrongPass != "" {
			urls[i] = p.URLWithCredentials(sp.User, sp.WrongPass)
		}
	}
	exits := make([]*pool.Exit, len(specs))
	for i, sp := range specs {
		if sp.Dead {
			addr, err := proxytest.ClosedAddr()
			if err != nil {
				return nil, fmt.Errorf("world: exit %s: %w", sp.Name, err)
			}
			urls[i] = &url.URL{Scheme: "http", Host: addr}
		}
		e, err := pool.NewExit(urls[i])
		if err != nil {
			return nil, fmt.Errorf("world: exit %s: %w", sp.Name, err)
		}
		exits[i] = e.WithLabel(sp.Name).WithTier(sp.Tier)
	}
	w.Exits = append(w.Exits, exits...)
	return exits, nil
}

// AddSite starts a plain HTTP/1.1 site named name, served by h.
func (w *World) AddSite(name string, h http.Handler) *Site {
	return w.add(name, httptest.NewServer(h))
}

// AddTLSSite starts an HTTPS site named name, served by h, with HTTP/2 enabled; BaseTemplate
// trusts its certificate. Through a proxy it is reached inside a CONNECT tunnel.
func (w *World) AddTLSSite(name string, h http.Handler) *Site {
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	w.roots.AddCert(srv.Certificate())
	return w.add(name, srv)
}

func (w *World) add(name string, srv *httptest.Server) *Site {
	u, _ := url.Parse(srv.URL) // httptest's own URL
	s := &Site{Name: name, URL: srv.URL, Key: transport.OriginHost(u), Server: srv}
	w.Sites = append(w.Sites, s)
	w.byKey[s.Key] = s
	return s
}

// Site returns the world's site named name, nil for none.
func (w *World) Site(name string) *Site {
	for _, s := range w.Sites {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// SiteName names an origin key for people: "shop" rather than 127.0.0.1:40123. A key of no site
// of the world is returned as it is.
func (w *World) SiteName(key string) string {
	if s, ok := w.byKey[key]; ok {
		return s.Name
	}
	return key
}

// IsSite reports whether key is the origin key of one of the world's sites.
func (w *World) IsSite(key string) bool {
	_, ok := w.byKey[key]
	return ok
}

// Proxy returns the world's proxy named name, nil for none.
func (w *World) Proxy(name string) *proxytest.Proxy { return w.byName[name] }

// ProxyAt names the world's proxy listening at addr (host:port), "" for none.
func (w *World) ProxyAt(addr string) string { return w.proxyAt[addr] }

// BaseTemplate is transport.DefaultBaseTemplate trusting the world's TLS sites.
func (w *World) BaseTemplate() *http.Transport {
	t := transport.DefaultBaseTemplate()
	t.TLSClientConfig = &tls.Config{RootCAs: w.roots}
	return t
}

// Close stops the sites and the proxies; every goroutine they started has ended when it returns.
func (w *World) Close() error {
	for _, s := range w.Sites {
		s.Server.Close()
	}
	var errs []error
	for _, p := range w.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
