package proxytest

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// BanOrigin is an http.Handler for tests of gateways: an origin that judges its clients by the
// address it sees — the source address of the connection, never anything a client tells it —
// and bans addresses. A banned address is answered 403 with a block page (a Cloudflare-style
// Cf-Mitigated: challenge header, so a classifier reads it as a block), or, with Plain, a bare
// 403; every other request 200 with the client's address as the body. The zero value serves
// everybody; it is safe for concurrent use.
type BanOrigin struct {
	// BanAfter, when positive, bans an address once it has been served that many requests since
	// its last ban.
	BanAfter int
	// BanFor is how long a ban made by BanAfter lasts, on Now; zero: for ever.
	BanFor time.Duration
	// Now reads the time bans are measured on; default time.Now.
	Now func() time.Time
	// Plain answers banned addresses with a bare 403 and no marker.
	Plain bool

	mu     sync.Mutex
	served map[netip.Addr]int
	run    map[netip.Addr]int       // served since the last ban
	banned map[netip.Addr]time.Time // until when; the zero time: for ever
	blocks int
	// blocked counts the requests answered 403, per address.
	blocked map[netip.Addr]int
	order   []netip.Addr // addresses in the order they were first served
}

// Ban bans addr for ever.
func (o *BanOrigin) Ban(addr netip.Addr) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ban(addr, time.Time{})
}

func (o *BanOrigin) ban(addr netip.Addr, until time.Time) {
	if o.banned == nil {
		o.banned = map[netip.Addr]time.Time{}
	}
	o.banned[addr] = until
	delete(o.run, addr)
}

func (o *BanOrigin) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// isBanned reports whether addr is banned at now, forgetting a ban that has ended. o.mu is held.
func (o *BanOrigin) isBanned(addr netip.Addr, now time.Time) bool {
	until, ok := o.banned[addr]
	if ok && !until.IsZero() && !now.Before(until) {
		delete(o.banned, addr)
		return false
	}
	return ok
}

// Served returns how many requests addr was served (answered 200).
func (o *BanOrigin) Served(addr netip.Addr) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.served[addr]
}

// Blocks returns how many requests were answered 403.
func (o *BanOrigin) Blocks() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.blocks
}

// BlocksOf returns how many requests from addr were answered 403: how often a banned address
// was sent traffic.
func (o *BanOrigin) BlocksOf(addr netip.Addr) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.blocked[addr]
}

// Addrs returns the addresses served, in the order each was first served.
func (o *BanOrigin) Addrs() []netip.Addr {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]netip.Addr(nil), o.order...)
}

// ClientAddr returns the address r came from, as its connection says.
func ClientAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a, _ := netip.ParseAddr(host)
	return a.Unmap()
}

// ServeHTTP answers r by the address it came from.
func (o *BanOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	addr := ClientAddr(r)
	o.mu.Lock()
	now := o.now()
	banned := o.isBanned(addr, now)
	if banned {
		o.blocks++
		if o.blocked == nil {
			o.blocked = map[netip.Addr]int{}
		}
		o.blocked[addr]++
	} else {
		if o.served == nil {
			o.served, o.run = map[netip.Addr]int{}, map[netip.Addr]int{}
		}
		if o.served[addr] == 0 {
			o.order = append(o.order, addr)
		}
		o.served[addr]++
		o.run[addr]++
		if o.BanAfter > 0 && o.run[addr] >= o.BanAfter {
			var until time.Time
			if o.BanFor > 0 {
				until = now.Add(o.BanFor)
			}
			o.ban(addr, until)
		}
	}
	o.mu.Unlock()
	if banned {
		if !o.Plain {
			w.Header().Set("Cf-Mitigated", "challenge")
		}
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "blocked\n")
		return
	}
	io.WriteString(w, addr.String())
}
