package clientstest

import (
	"context"
	"net"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/proxybreaker/proxybreaker/breaker"
	"github.com/proxybreaker/proxybreaker/internal/proxytest"
	"github.com/proxybreaker/proxybreaker/internal/servertest"
	"github.com/proxybreaker/proxybreaker/pool"
	"github.com/proxybreaker/proxybreaker/proxyd"
)

// The exits of a world leave from loopback addresses of their own, which is how the sites tell
// them apart: an origin sees an exit's address in r.RemoteAddr, as a real site sees an exit's IP.
const (
	srcA  = "127.0.0.2" // proxytest exit "a"
	srcB  = "127.0.0.3" // proxytest exit "b"
	srcTP = "127.0.0.4" // tinyproxy exit "tp"
	srcC  = "127.0.0.5" // proxytest exit "c", listed with a wrong password when worldConfig.badAuth
	srcD  = "127.0.0.6" // proxytest exit "d"
	srcE  = "127.0.0.7" // proxytest exit "e", in another country, when worldConfig.germany
)

// worldConfig says which exits a world has besides a, b and d, and which listeners it serves.
// Three honest exits is the least that lets the pool take a plain 403 through one of them for a
// ban: pool.SuspectMinServed other exits must be served meanwhile.
type worldConfig struct {
	// tinyproxy adds a real tinyproxy exit "tp"; with connectPorts it refuses a CONNECT to any
	// other port (403), as an exit the site's network turns away does.
	tinyproxy    bool
	connectPorts []int
	// badAuth adds exit "c", which demands credentials the list gets wrong: every request through
	// it is answered 407.
	badAuth bool
	// germany adds exit "e", country=de; every other exit is country=us.
	germany bool
	// credentials, when set, are demanded of every client (407 with Proxy-Authenticate).
	credentials []proxyd.Credential
	// profiles are served each on a listener of its own, with its options fixed (a port per
	// profile, for clients that send no proxy credentials).
	profiles []string
}

// world is a daemon on 127.0.0.1, in process, over a pool of real exits.
type world struct {
	t        *testing.T
	s        *proxyd.Server
	addr     string            // the main listener, no profile
	profiles map[string]string // profile → its listener's address
	proxies  map[string]*proxytest.Proxy
}

// newWorld starts the exits cfg asks for and a daemon over them. The pairs' first OPEN window is
// ten minutes, so no half-open probe of a banned pair falls inside a test, however slow the box.
func newWorld(t *testing.T, cfg worldConfig) *world {
	t.Helper()
	w := &world{t: t, profiles: map[string]string{}, proxies: map[string]*proxytest.Proxy{}}
	var lines []string
	add := func(label, attrs string, pc proxytest.Config, wrongPass bool) {
		pc.Name = label
		p, err := proxytest.Start(pc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		w.proxies[label] = p
		u := p.URL()
		if wrongPass {
			u = p.URLWithCredentials(pc.User, "wrong-password")
		}
		lines = append(lines, u.String()+" label="+label+" "+attrs)
	}
	add("a", "country=us", proxytest.Config{SourceAddr: srcA}, false)
	add("b", "country=us", proxytest.Config{SourceAddr: srcB}, false)
	add("d", "country=us", proxytest.Config{SourceAddr: srcD}, false)
	if cfg.badAuth {
		add("c", "country=us", proxytest.Config{SourceAddr: srcC, User: "acct", Pass: "right-password"}, true)
	}
	if cfg.germany {
		add("e", "country=de", proxytest.Config{SourceAddr: srcE}, false)
	}
	if cfg.tinyproxy {
		u := servertest.Tinyproxy(t, servertest.TinyproxyConfig{Bind: srcTP, ConnectPorts: cfg.connectPorts})
		lines = append(lines, u.String()+" label=tp country=us")
	}
	exits, err := pool.ReadExits(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	p, err := pool.New(pool.WithExits(exits...), pool.WithSeed(1),
		pool.WithPairSettings(breaker.Settings{BaseCooldown: 10 * time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	w.s, err = proxyd.New(p, proxyd.Config{AllowPrivate: true, Credentials: cfg.credentials})
	if err != nil {
		t.Fatal(err)
	}
	w.addr = w.serve("")
	for _, prof := range cfg.profiles {
		w.profiles[prof] = w.serve(prof)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		w.s.Shutdown(ctx)
	})
	return w
}

// serve serves a new loopback listener with profile and returns its address.
func (w *world) serve(profile string) string {
	w.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		w.t.Fatal(err)
	}
	go w.s.Serve(ln, profile)
	return ln.Addr().String()
}

// proxyURL returns the daemon's main listener as an http:// proxy URL, with user (options in
// the username) when set, and a password that is never checked.
func (w *world) proxyURL(scheme, user string) string {
	u := &url.URL{Scheme: scheme, Host: w.addr}
	if user != "" {
		u.User = url.UserPassword(user, "unused")
	}
	return u.String()
}

// portOf returns the port of a URL's host.
func portOf(t *testing.T, raw string) int {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(u.Port())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// admin serves the daemon's admin handler on a loopback listener and returns its base URL.
func (w *world) admin() string {
	w.t.Helper()
	h, err := w.s.Admin(proxyd.AdminConfig{})
	if err != nil {
		w.t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	w.t.Cleanup(srv.Close)
	return srv.URL
}
