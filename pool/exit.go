package pool

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Exit is one proxy exit: where requests leave from. It holds the proxy's dialing URL, credentials
// included, and never shows them: String, Label, JSON and every error name the exit by its label,
// which is the URL with the password redacted unless the user chose one.
//
// An Exit is immutable; the With methods return modified copies. It is safe for concurrent use.
type Exit struct {
	u      *url.URL // dialing URL; secret
	label  string
	tier   int
	weight float64
	over   *exitOverride // its own breaker settings; nil: the pool's (see override.go)
	attrs  []Attr        // sorted by key; shared by copies, never modified (attrs.go)
	gw     *gatewayMark  // a gateway's template or one of its sessions (gateway.go); nil: neither
}

// Proxy schemes an Exit may use.
const (
	SchemeHTTP    = "http"
	SchemeHTTPS   = "https"   // TLS to the proxy itself
	SchemeSOCKS5  = "socks5"  // SOCKS5, the origin's name resolved locally
	SchemeSOCKS5H = "socks5h" // SOCKS5, the origin's name resolved by the proxy
)

var defaultProxyPort = map[string]string{
	SchemeHTTP: "80", SchemeHTTPS: "443", SchemeSOCKS5: "1080", SchemeSOCKS5H: "1080",
}

// ParseExit parses one proxy in any of the forms a proxy list uses:
//
//	http://user:pass@host:port     (also https://, socks5://, socks5h://)
//	user:pass@host:port            (http assumed)
//	host:port:user:pass            (the common provider format; http assumed)
//	host:port                      (http, no credentials)
//	direct                         (no proxy at all: DirectExit; any case)
//
// In host:port:user:pass the password may hold anything, ':', '@', '#' and "://" included. A line
// that reads both ways (an '@' in the user field and a host:port after the last '@') is taken as
// user:pass@host:port.
//
// A missing port takes the scheme's default (80, 443, 1080). The error names the input with its
// password redacted.
func ParseExit(raw string) (*Exit, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return nil, fmt.Errorf("pool: empty proxy address")
	}
	if isDirectWord(s) {
		return DirectExit(), nil
	}
	var u *url.URL
	switch _, _, _, isColon := colonForm(s); {
	case isColon:
		// Before the '@' and "://" tests: the provider format's password may contain either.
		pu, err := parseColonForm(s)
		if err != nil {
			return nil, err
		}
		u = pu
	case strings.Contains(s, "://"):
		pu, err := url.Parse(escapeTemplate(s))
		if err != nil {
			// url.Parse quotes its whole input, password and all: say it in our words.
			return nil, fmt.Errorf("pool: proxy %q: malformed URL", RedactRaw(s))
		}
		u = pu
	case strings.Contains(s, "@"):
		pu, err := url.Parse("http://" + escapeTemplate(s))
		if err != nil {
			return nil, fmt.Errorf("pool: proxy %q: malformed address", RedactRaw(s))
		}
		u = pu
	default:
		pu, err := parseColonForm(s)
		if err != nil {
			return nil, err
		}
		u = pu
	}
	if err := checkProxyURL(u, s); err != nil {
		return nil, err
	}
	return &Exit{u: u, label: urlLabel(u), weight: 1}, nil
}

// MustParseExit is like ParseExit but panics on error. It is meant for tests and examples with
// literal addresses.
func MustParseExit(raw string) *Exit {
	e, err := ParseExit(raw)
	if err != nil {
		panic(err)
	}
	return e
}

// NewExit returns an Exit that dials u. u is copied.
func NewExit(u *url.URL) (*Exit, error) {
	if u == nil {
		return nil, fmt.Errorf("pool: nil proxy URL")
	}
	c := *u
	if u.User != nil {
		ui := *u.User
		c.User = &ui
	}
	if err := checkProxyURL(&c, c.Redacted()); err != nil {
		return nil, err
	}
	return &Exit{u: &c, label: urlLabel(&c), weight: 1}, nil
}

// parseColonForm parses host:port and host:port:user:pass ([v6]:port:user:pass too). The password
// may itself contain colons.
func parseColonForm(s string) (*url.URL, error) {
	var host, rest string
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return nil, fmt.Errorf("pool: proxy %q: unterminated IPv6 literal", RedactRaw(s))
		}
		host, rest = s[:end+1], strings.TrimPrefix(s[end+1:], ":")
	} else {
		h, r, _ := strings.Cut(s, ":")
		host, rest = h, r
	}
	port, cred, hasCred := strings.Cut(rest, ":")
	u := &url.URL{Scheme: SchemeHTTP, Host: net.JoinHostPort(strings.Trim(host, "[]"), port)}
	if port == "" {
		return nil, fmt.Errorf("pool: proxy %q: want host:port or host:port:user:pass", RedactRaw(s))
	}
	if hasCred {
		user, pass, ok := strings.Cut(cred, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("pool: proxy %q: want host:port:user:pass", RedactRaw(s))
		}
		u.User = url.UserPassword(user, pass)
	}
	return u, nil
}

// colonForm reports whether s is host:port:user:pass (or [v6]:port:user:pass) and returns its
// host, port and user: the port is all digits, the host holds no '@', the password is the rest.
// When the user holds an '@' and what follows the last '@' is host:port, s is user:pass@host:port
// whose password starts with digits and a colon, and colonForm says no.
func colonForm(s string) (host, port, user string, ok bool) {
	rest := s
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 || !strings.HasPrefix(s[end+1:], ":") {
			return "", "", "", false
		}
		host, rest = s[:end+1], s[end+2:]
	} else {
		var found bool
		if host, rest, found = strings.Cut(s, ":"); !found {
			return "", "", "", false
		}
	}
	port, rest, found := strings.Cut(rest, ":")
	if !found || strings.Contains(host, "@") || !allDigits(port) {
		return "", "", "", false
	}
	user, _, found = strings.Cut(rest, ":")
	if !found {
		return "", "", "", false
	}
	if strings.Contains(user, "@") {
		tail := s[strings.LastIndex(s, "@")+1:]
		if i := strings.LastIndex(tail, ":"); i >= 0 && allDigits(tail[i+1:]) {
			return "", "", "", false
		}
	}
	return host, port, user, true
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// hasScheme reports whether s starts with a URL scheme followed by "://", and where the "://" is.
func hasScheme(s string) (int, bool) {
	j := strings.Index(s, "://")
	if j <= 0 {
		return j, false
	}
	for i := 0; i < j; i++ {
		c := s[i]
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return j, false
		}
	}
	return j, true
}

func checkProxyURL(u *url.URL, raw string) error {
	name := RedactRaw(raw)
	if err := checkNotDirectURL(u, name); err != nil {
		return err
	}
	u.Scheme = strings.ToLower(u.Scheme)
	def, ok := defaultProxyPort[u.Scheme]
	if !ok {
		return fmt.Errorf("pool: proxy %q: scheme %q not supported (want http, https, socks5 or socks5h)", name, u.Scheme)
	}
	if u.Opaque != "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("pool: proxy %q: a proxy URL has no path, query or fragment", name)
	}
	u.Path = ""
	host := u.Hostname()
	if host == "" {
		return fmt.Errorf("pool: proxy %q: missing host", name)
	}
	port := u.Port()
	if port == "" {
		// url.URL.Port ignores a port that is not a number: find it, and refuse it.
		if i := strings.LastIndexByte(u.Host, ':'); i >= 0 && i+1 < len(u.Host) && !strings.Contains(u.Host[i:], "]") {
			return fmt.Errorf("pool: proxy %q: bad port %q", name, u.Host[i+1:])
		}
		u.Host = net.JoinHostPort(host, def)
	} else if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("pool: proxy %q: bad port %q", name, port)
	}
	if u.User != nil && u.User.Username() == "" {
		if _, set := u.User.Password(); !set {
			u.User = nil
		}
	}
	return nil
}

// Label names the exit in logs, metrics, snapshots and errors: the redacted URL
// (http://user:xxxxx@host:port) unless WithLabel chose another.
func (e *Exit) Label() string { return e.label }

// String returns the label.
func (e *Exit) String() string { return e.label }

// GoString returns the label too, so %#v cannot print the credentials.
func (e *Exit) GoString() string { return "pool.Exit(" + strconv.Quote(e.label) + ")" }

// Tier is the exit's tier: lower tiers are tried first when selection honours tiers (cheap
// datacenter exits at 0, residential at 1, …). Default 0.
func (e *Exit) Tier() int { return e.tier }

// Weight is the exit's relative share of traffic among ready exits of its tier. Default 1.
func (e *Exit) Weight() float64 { return e.weight }

// Scheme is the proxy protocol: http, https, socks5 or socks5h; SchemeDirect for a direct exit.
func (e *Exit) Scheme() string { return e.u.Scheme }

// ProxyURL returns a copy of the dialing URL, credentials included. It is for base RoundTrippers
// that dial the proxy themselves; never log it. A direct exit has none: nil.
func (e *Exit) ProxyURL() *url.URL {
	if e.Direct() {
		return nil
	}
	c := *e.u
	if e.u.User != nil {
		ui := *e.u.User
		c.User = &ui
	}
	return &c
}

// WithLabel returns a copy of e named label. An empty label restores the redacted URL ("direct"
// for a direct exit).
func (e *Exit) WithLabel(label string) *Exit {
	c := *e
	if label == "" {
		label = e.defaultLabel()
	}
	c.label = label
	return &c
}

// WithTier returns a copy of e in tier t.
func (e *Exit) WithTier(t int) *Exit {
	c := *e
	c.tier = t
	return &c
}

// WithWeight returns a copy of e with weight w. w must be positive and finite; pool.New and Pool.Add reject
// other weights.
func (e *Exit) WithWeight(w float64) *Exit {
	c := *e
	c.weight = w
	return &c
}

// MarshalJSON encodes the exit as its label, tier and weight, and "direct": true for a direct
// exit: never its credentials.
func (e *Exit) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Label  string  `json:"label"`
		Tier   int     `json:"tier"`
		Weight float64 `json:"weight"`
		Direct bool    `json:"direct,omitempty"`
	}{e.label, e.tier, e.weight, e.Direct()})
}
