package proxytest

import (
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Default source-address range of a Gateway: the origin sees each session's requests come from one
// of these loopback addresses.
var (
	DefaultGatewayFirst = netip.MustParseAddr("127.0.0.10")
	DefaultGatewayLast  = netip.MustParseAddr("127.0.0.250")
)

// GatewayConfig describes a Gateway: a forward proxy that behaves like a residential provider's
// gateway. The zero value of every optional field is its default.
type GatewayConfig struct {
	// Name identifies the gateway, as Config.Name does a proxy (Registry, error bodies).
	Name string
	// User is the account name and Pass its password; both required. A client authenticates with
	// Basic credentials whose username is the account name followed by dash-separated key-value
	// options, the way providers spell them:
	//
	//	acct                                a new source address for every request
	//	acct-session-ab12cd                 the address of session ab12cd (sticky)
	//	acct-session-ab12cd-country-us      the same, with a country (accepted, not acted on)
	//
	// Any other username, an option without a value, an empty session id or a wrong password is
	// answered 407.
	User, Pass string
	// First and Last bound the loopback source addresses the gateway hands out, both IPv4 in
	// 127.0.0.0/8 with First <= Last. Default DefaultGatewayFirst to DefaultGatewayLast.
	First, Last netip.Addr
	// SessionTTL is how long a session keeps its address: the first request at or after that
	// age gets a new one, as a provider recycles a sticky IP. Zero keeps it for ever.
	SessionTTL time.Duration
	// Now reads the time SessionTTL is measured on; default time.Now.
	Now func() time.Time
	// AddrHeader, when set, names the response header that reports the source address the
	// gateway used: on every forwarded response and on the reply to a CONNECT.
	AddrHeader string
	// Registry, when set, records the gateway's upstream connections under Name.
	Registry *Registry
}

// Gateway is a provider-like gateway on 127.0.0.1: one address, and the source address of every
// upstream connection chosen by the username. Each session is bound to its own address in the
// configured range, so an origin that bans by client address bans that session alone. Methods are
// safe for concurrent use. Create one with StartGateway and stop it with Close.
type Gateway struct {
	*Proxy
	gc GatewayConfig

	mu       sync.Mutex
	sessions map[string]*gatewaySession
	held     map[netip.Addr]string // addresses held by live sessions
	next     netip.Addr            // the next address to try
	assigned int                   // addresses handed out, sessions and single requests
	seen     map[string]bool       // every session id ever asked for
}

type gatewaySession struct {
	addr  netip.Addr
	since time.Time
}

// StartGateway validates gc and starts a gateway.
func StartGateway(gc GatewayConfig) (*Gateway, error) {
	if gc.User == "" || gc.Pass == "" {
		return nil, errors.New("proxytest: gateway: User and Pass are required")
	}
	if strings.Contains(gc.User, ":") {
		return nil, errors.New("proxytest: gateway: User contains a colon")
	}
	if !gc.First.IsValid() {
		gc.First = DefaultGatewayFirst
	}
	if !gc.Last.IsValid() {
		gc.Last = DefaultGatewayLast
	}
	if !gc.First.Is4() || !gc.Last.Is4() || !gc.First.IsLoopback() || !gc.Last.IsLoopback() || gc.Last.Less(gc.First) {
		return nil, errors.New("proxytest: gateway: want First <= Last, both IPv4 loopback addresses")
	}
	if gc.SessionTTL < 0 {
		return nil, errors.New("proxytest: gateway: negative SessionTTL")
	}
	if gc.Now == nil {
		gc.Now = time.Now
	}
	g := &Gateway{gc: gc, sessions: map[string]*gatewaySession{}, held: map[netip.Addr]string{}, next: gc.First, seen: map[string]bool{}}
	p, err := start(Config{Name: gc.Name, Registry: gc.Registry}, g)
	if err != nil {
		return nil, err
	}
	g.Proxy = p
	return g, nil
}

// Template returns the gateway's dialing URL with a session template as a proxy list writes it:
// http://USER-session-{session}:PASS@127.0.0.1:PORT.
func (g *Gateway) Template() string {
	return "http://" + g.gc.User + "-session-{session}:" + g.gc.Pass + "@" + g.Addr()
}

// URL returns the gateway's URL with the account's own credentials: a new source address for
// every request.
func (g *Gateway) URL() *url.URL { return g.URLWithCredentials(g.gc.User, g.gc.Pass) }

// SessionURL returns the gateway's URL with the username of session id.
func (g *Gateway) SessionURL(id string) *url.URL {
	return g.URLWithCredentials(g.gc.User+"-session-"+id, g.gc.Pass)
}

// Refuse closes the gateway's listener: new connections are refused (ECONNREFUSED) until
// Resume; connections already open go on.
func (g *Gateway) Refuse() { g.stopListening() }

// Resume listens again on the gateway's address after Refuse.
func (g *Gateway) Resume() error { return g.resumeListening() }

// SessionAddr returns the address session id holds now, and whether it holds one.
func (g *Gateway) SessionAddr(id string) (netip.Addr, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sessions[id]
	if s == nil {
		return netip.Addr{}, false
	}
	return s.addr, true
}

// SessionIDs returns every session id a client has asked for, in no order: what a test greps the
// outputs of the library for.
func (g *Gateway) SessionIDs() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.seen))
	for id := range g.seen {
		out = append(out, id)
	}
	return out
}

// Assigned reports how many addresses the gateway has handed out: one per new or recycled
// session, and one per request without a session.
func (g *Gateway) Assigned() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.assigned
}

// addrHeader returns the header that reports the source address, "" when none is configured or p
// is no gateway.
func (g *Gateway) addrHeader() string {
	if g == nil {
		return ""
	}
	return g.gc.AddrHeader
}

// admit judges h's credentials and returns the source address for the request.
func (g *Gateway) admit(h http.Header) (netip.Addr, bool) {
	user, pass, ok := parseBasic(h.Get("Proxy-Authorization"))
	if !ok || pass != g.gc.Pass {
		return netip.Addr{}, false
	}
	session, ok := g.parseUser(user)
	if !ok {
		return netip.Addr{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if session == "" {
		return g.allocate(""), true
	}
	g.seen[session] = true
	now := g.gc.Now()
	s := g.sessions[session]
	if s != nil && (g.gc.SessionTTL == 0 || now.Sub(s.since) < g.gc.SessionTTL) {
		return s.addr, true
	}
	if s != nil {
		delete(g.held, s.addr) // recycled: the session moves to a new address
	}
	s = &gatewaySession{addr: g.allocate(session), since: now}
	g.sessions[session] = s
	return s.addr, true
}

// parseUser reads "ACCOUNT[-key-value]...", returning the session id ("" without one).
func (g *Gateway) parseUser(user string) (session string, ok bool) {
	rest, found := strings.CutPrefix(user, g.gc.User)
	if !found {
		return "", false
	}
	if rest == "" {
		return "", true
	}
	parts := strings.Split(strings.TrimPrefix(rest, "-"), "-")
	if !strings.HasPrefix(rest, "-") || len(parts)%2 != 0 {
		return "", false
	}
	for i := 0; i < len(parts); i += 2 {
		k, v := parts[i], parts[i+1]
		if k == "" || v == "" {
			return "", false
		}
		if k == "session" {
			session = v
		}
	}
	return session, true
}

// allocate hands out the next address of the range that no live session holds (any, when every
// one is held) and, for a session, holds it. g.mu is held.
func (g *Gateway) allocate(session string) netip.Addr {
	g.assigned++
	a := g.next
	for tries := 0; ; tries++ {
		if _, taken := g.held[a]; !taken || tries > 256 {
			break
		}
		a = g.after(a)
	}
	g.next = g.after(a)
	if session != "" {
		g.held[a] = session
	}
	return a
}

// after returns the address after a in the range, wrapping.
func (g *Gateway) after(a netip.Addr) netip.Addr {
	if a == g.gc.Last {
		return g.gc.First
	}
	return a.Next()
}
