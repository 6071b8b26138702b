package pool

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Session templates. A provider's gateway is one host:port whose IP is chosen by the username: a
// proxy whose username (or password) holds the placeholder {session} is a gateway template, and
// the pool mints the session ids that fill it (gateway.go):
//
//	http://acct-session-{session}-country-{country}:secret@gate.example:7777  sessions=20 session-ttl=10m country=us
//
// Any other {key} is filled from the exit's attribute key ({country} from country=us); a
// placeholder without its attribute is an error. Braces elsewhere are literal. The template's
// attributes that tune the gateway (the exit's attributes all the same, so its sessions carry
// them for Request.Want):
//
//	sessions=N          live sessions the pool keeps, 1 to 1024 (default 10)
//	session-ttl=D       the provider's sticky lifetime: a session is retired and replaced once it
//	                    is this old, on the pool's clock (default none)
//	rotate=on|off       replace a failing session, or one whose bans tip it over, at once
//	                    (default on; gateway_hold.go) — but a site that bans GatewayRestAfter
//	                    fresh sessions in a row rests on the gateway (gateway_rest.go); off keeps
//	                    each session until its TTL, as static lines would be
//	egress-header=H     the response header the provider reports a session's IP in
//	                    (gateway_egress.go)
//	session-length=N    characters in a minted id, 4 to 64 (default 10)
//	session-chars=S     the characters ids are drawn from, 2 to 64 distinct ASCII letters and
//	                    digits (default a-z and 0-9: 36^10, about 2^52 ids)

// Gateway defaults.
const (
	DefaultGatewaySessions  = 10
	DefaultSessionIDLength  = 10
	DefaultSessionAlphabet  = "abcdefghijklmnopqrstuvwxyz0123456789"
	maxGatewaySessions      = 1024
	minSessionIDLength      = 4
	maxSessionIDLength      = 64
	sessionPlaceholder      = "{session}"
	escapedOpen, escapedEnd = "%7B", "%7D"
)

// gatewaySpec is a template exit's gateway settings, read from its attributes.
type gatewaySpec struct {
	sessions int
	ttl      time.Duration
	rotate   bool
	idLen    int
	alphabet string
}

// isTemplate reports whether e is a gateway template: {session} in its username or password.
func isTemplate(e *Exit) bool {
	if e.gw != nil || e.u.User == nil {
		return false
	}
	pass, _ := e.u.User.Password()
	return strings.Contains(e.u.User.Username(), sessionPlaceholder) || strings.Contains(pass, sessionPlaceholder)
}

// escapeTemplate lets url.Parse read a template's braces, which it refuses in user information;
// the parsed username holds them unescaped.
func escapeTemplate(s string) string {
	if !strings.ContainsAny(s, "{}") {
		return s
	}
	return strings.NewReplacer("{", escapedOpen, "}", escapedEnd).Replace(s)
}

// urlLabel is the label of an exit dialing u: the URL with its password redacted, a template's
// placeholders written as braces.
func urlLabel(u *url.URL) string {
	r := u.Redacted()
	if u.User != nil && strings.ContainsAny(u.User.Username(), "{}") {
		r = strings.NewReplacer(escapedOpen, "{", escapedEnd, "}").Replace(r)
	}
	return r
}

// defaultLabel is the label WithLabel("") restores: a gateway session's own, which never shows
// its minted id; "direct" for a direct exit; else urlLabel.
func (e *Exit) defaultLabel() string {
	if e.gw != nil {
		return e.gw.label
	}
	if e.Direct() {
		return DirectLabel
	}
	return urlLabel(e.u)
}

// parseGatewaySpec reads e's gateway attributes and checks its placeholders. Errors name the
// attribute or placeholder, never the credentials.
func parseGatewaySpec(e *Exit) (gatewaySpec, error) {
	s := gatewaySpec{sessions: DefaultGatewaySessions, rotate: true, idLen: DefaultSessionIDLength, alphabet: DefaultSessionAlphabet}
	if v, ok := e.Attr("sessions"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxGatewaySessions {
			return s, fmt.Errorf("sessions %q: want an integer from 1 to %d", v, maxGatewaySessions)
		}
		s.sessions = n
	}
	if v, ok := e.Attr("session-ttl"); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return s, fmt.Errorf("session-ttl %q: want a positive duration (10m, 30m)", v)
		}
		s.ttl = d
	}
	if v, ok := e.Attr("rotate"); ok {
		switch strings.ToLower(v) {
		case "on":
		case "off":
			s.rotate = false
		default:
			return s, fmt.Errorf("rotate %q: want on or off (rotate=request is for a line without {session})", v)
		}
	}
	if v, ok := e.Attr("session-length"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < minSessionIDLength || n > maxSessionIDLength {
			return s, fmt.Errorf("session-length %q: want an integer from %d to %d", v, minSessionIDLength, maxSessionIDLength)
		}
		s.idLen = n
	}
	if v, ok := e.Attr("session-chars"); ok {
		if err := checkAlphabet(v); err != nil {
			return s, fmt.Errorf("session-chars %q: %v", v, err)
		}
		s.alphabet = v
	}
	user, pass := e.u.User.Username(), ""
	pass, _ = e.u.User.Password()
	for _, part := range []struct{ name, tmpl string }{{"username", user}, {"password", pass}} {
		if _, err := fillTemplate(part.tmpl, e, "x"); err != nil {
			return s, fmt.Errorf("%s template: %v", part.name, err)
		}
	}
	return s, nil
}

// checkAlphabet checks a session-chars value: 2 to 64 distinct ASCII letters and digits.
func checkAlphabet(a string) error {
	if len(a) < 2 || len(a) > 64 {
		return fmt.Errorf("%d characters, want 2 to 64", len(a))
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return fmt.Errorf("character %d (%q) is not an ASCII letter or digit", i+1, c)
		}
		if strings.IndexByte(a[:i], c) >= 0 {
			return fmt.Errorf("character %q given twice", c)
		}
	}
	return nil
}

// fillTemplate returns tmpl with {session} replaced by id and every other {key} by e's attribute
// key. A placeholder is a '{', a key in the attribute alphabet and a '}'; other braces are literal.
func fillTemplate(tmpl string, e *Exit, id string) (string, error) {
	var b strings.Builder
	for {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			b.WriteString(tmpl)
			return b.String(), nil
		}
		j := strings.IndexByte(tmpl[i:], '}')
		if j < 0 {
			b.WriteString(tmpl)
			return b.String(), nil
		}
		name := tmpl[i+1 : i+j]
		b.WriteString(tmpl[:i])
		switch {
		case name == "session":
			b.WriteString(id)
		case checkAttrKey(name) == nil:
			v, ok := e.Attr(name)
			if !ok {
				return "", fmt.Errorf("placeholder {%s}: the exit has no attribute %s", name, name)
			}
			b.WriteString(v)
		default:
			b.WriteString(tmpl[i : i+j+1]) // not a placeholder: literal
		}
		tmpl = tmpl[i+j+1:]
	}
}

// checkTemplateLine validates a proxy-list line's template exit, so a bad one is named by its line
// (ReadExits); a plain exit passes.
func checkTemplateLine(e *Exit) error {
	if !isTemplate(e) {
		return checkRotating(e) // gateway_blockrate.go
	}
	_, err := parseGatewaySpec(e)
	return err
}
