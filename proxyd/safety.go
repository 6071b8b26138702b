package proxyd

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// An exposed proxy is an open relay, and a proxy on a host inside a network reaches what that
// network hides (a cloud's metadata service at 169.254.169.254, an admin console on 10.0.0.5).
// The daemon refuses to listen beyond loopback without credentials or an allowlist (Config.check),
// checks credentials in constant time, and by default refuses to relay to the address ranges
// below: literal addresses before any pick, and — for what the daemon dials itself (a direct
// exit) — the address a name resolved to, checked on the socket being connected (net.Dialer's
// Control), so a name that resolves to a public address once and a private one the next time
// (DNS rebinding) is caught at the dial that counts. A socks5:// exit is handed the address the
// daemon resolved the name to: over a tunnel the daemon resolves it and checks the address it
// sends (socksThrough); over plain HTTP the transport resolves it, and the daemon resolves it
// again when the transport dials the exit's proxy and refuses the dial if any address is
// forbidden (checkResolvedTarget) — two lookups, so a resolver that answers them differently
// (rebinding within milliseconds) can still slip through there. A proxy exit that resolves names
// itself (http://, https://, socks5h://): what its own network reaches is its policy; the daemon
// refuses the literal addresses and the names localhost and *.localhost there too.

// forbiddenRanges are the destinations refused unless Config.AllowPrivate: loopback, link-local
// (cloud metadata), private, shared (CGNAT), "this network", multicast, reserved, and their IPv6
// counterparts (unique local, link-local, site-local, IPv4-mapped forms are unmapped first).
var forbiddenRanges = mustPrefixes(
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
	"::/128", "::1/128", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8", "64:ff9b:1::/48",
)

func mustPrefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

// forbiddenAddr reports whether a is in a forbidden range.
func forbiddenAddr(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range forbiddenRanges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ErrForbiddenTarget is matched by the error of a relay to a forbidden destination.
var ErrForbiddenTarget = errors.New("proxyd: target address is private, loopback or link-local (see -allow-private)")

// forbiddenTarget is a dial the daemon refused: the destination is in a forbidden range.
type forbiddenTarget struct{ addr string }

func (e *forbiddenTarget) Error() string {
	return fmt.Sprintf("proxyd: target %s is a private, loopback or link-local address (-allow-private permits it)", e.addr)
}

func (e *forbiddenTarget) Is(target error) bool { return target == ErrForbiddenTarget }

// checkHost refuses a target host written as a forbidden literal address, or named localhost.
func checkHost(host string) error {
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return &forbiddenTarget{host}
	}
	if i := strings.IndexByte(h, '%'); i >= 0 {
		h = h[:i] // a zone: fe80::1%eth0
	}
	if a, err := netip.ParseAddr(h); err == nil && forbiddenAddr(a) {
		return &forbiddenTarget{host}
	}
	return nil
}

// targetHostKey carries a plain-HTTP request's target host to the transport's dials
// (checkResolvedTarget), set unless Config.AllowPrivate.
type targetHostKey struct{}

// checkResolvedTarget refuses a dial through a socks5:// exit — which is handed the address the
// transport resolved the target's name to — when that name (the request's, in ctx) resolves to a
// forbidden address. The transport looks names up with net.DefaultResolver; so does this. A
// lookup that fails here lets the dial go on: the transport's own lookup succeeded a moment ago,
// and a name that no longer resolves says nothing forbidden.
func checkResolvedTarget(ctx context.Context) error {
	host, _ := ctx.Value(targetHostKey{}).(string)
	if host == "" {
		return nil
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return nil // a literal address, checked before the pick (checkHost)
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, ip := range ips {
		if forbiddenAddr(ip) {
			return &forbiddenTarget{ip.Unmap().String()}
		}
	}
	return nil
}

// guardControl is a net.Dialer Control func that refuses to connect a socket to a forbidden
// address: it sees the address after resolution, as the kernel is handed it.
func guardControl(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &forbiddenTarget{address} // not an IP address: nothing the guard can vouch for
	}
	if forbiddenAddr(ap.Addr()) {
		return &forbiddenTarget{ap.Addr().String()}
	}
	return nil
}

// Credential is one user name and password the listener accepts (Config.Credentials). The user
// name is the account part of a proxy username (SplitUsername); it holds no '-' or ':'.
type Credential struct {
	User, Pass string
}

// credentialSet checks credentials in constant time: each configured pair is kept as the SHA-256
// of its user and of its password, and every check compares against every pair in full.
type credentialSet struct {
	users, passes [][sha256.Size]byte
}

func newCredentialSet(cs []Credential) (*credentialSet, error) {
	s := &credentialSet{}
	for i, c := range cs {
		switch {
		case c.User == "":
			return nil, fmt.Errorf("proxyd: credential %d: empty user name", i+1)
		case strings.ContainsAny(c.User, "-:"):
			return nil, fmt.Errorf("proxyd: credential %d: user name %q holds '-' or ':' (options follow the first '-')", i+1, clip(c.User))
		case c.Pass == "":
			return nil, fmt.Errorf("proxyd: credential %d (user %s): empty password", i+1, clip(c.User))
		}
		s.users = append(s.users, sha256.Sum256([]byte(c.User)))
		s.passes = append(s.passes, sha256.Sum256([]byte(c.Pass)))
	}
	return s, nil
}

// empty reports whether no credentials are configured: every client may relay (on loopback).
func (s *credentialSet) empty() bool { return len(s.users) == 0 }

// check reports whether account and pass match a configured credential, in time independent of
// which one, and of where they differ.
func (s *credentialSet) check(account, pass string) bool {
	u, p := sha256.Sum256([]byte(account)), sha256.Sum256([]byte(pass))
	ok := 0
	for i := range s.users {
		ok |= subtle.ConstantTimeCompare(u[:], s.users[i][:]) & subtle.ConstantTimeCompare(p[:], s.passes[i][:])
	}
	return ok == 1
}

// parseBasic reads a Proxy-Authorization value of the Basic scheme.
func parseBasic(v string) (user, pass string, ok bool) {
	scheme, enc, found := strings.Cut(v, " ")
	if !found || !strings.EqualFold(scheme, "Basic") {
		return "", "", false
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return "", "", false
	}
	return strings.Cut(string(raw), ":")
}

// allowlist is the client addresses the listener serves (Config.Allow); empty serves every one.
type allowlist []netip.Prefix

func (a allowlist) admits(remote net.Addr) bool {
	if len(a) == 0 {
		return true
	}
	ap, err := netip.ParseAddrPort(remote.String())
	if err != nil {
		return false
	}
	ip := ap.Addr().Unmap()
	for _, p := range a {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
