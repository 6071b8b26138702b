package pool

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

const (
	fuzzReadExitsHead = "s3cr3t"
	fuzzReadExitsTail = "t3rc3s"
)

// fuzzReadExitsClean drops the runes in drop and every space (ReadExits splits on spaces, so a
// password with a space is not a password field).
func fuzzReadExitsClean(s, drop string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || strings.ContainsRune(drop, r) {
			return -1
		}
		return r
	}, s)
}

func fuzzReadExitsMarked(s string) bool {
	return strings.Contains(s, fuzzReadExitsHead) || strings.Contains(s, fuzzReadExitsTail)
}

func FuzzReadExits(f *testing.F) {
	f.Add("", "proxy.example", uint32(8080), "user", "-PW", "")
	f.Add("", "proxy.example", uint32(8080), "user-session-42", ":cr@t#PW", " tier=1 weight=2")
	f.Add("# comment\nok.example:80\n", "proxy.example", uint32(0), "user", "@x.example:99", "")
	f.Add("", "proxy.example", uint32(70000), "user", "://x", " label=dc-1")
	f.Add("", "", uint32(80), "user", "", "")
	f.Add("", "proxy.example", uint32(80), "", "x", "")
	f.Add("", "proxy.example", uint32(80), "me@mail.example", "", " color=red")
	f.Add("bad:0:u:p\nbad:0:u:p\n", "10.0.0.1", uint32(3128), "u", "@", " tier=x")
	f.Add("http://user:pw@h:1/path\n", "::1", uint32(8080), "user", "%zz", " oops")
	f.Add("", "#comment", uint32(80), "user", "", "")
	f.Add("direct tier=0 label=home\nDIRECT label=office country=us\ndirect://x\n", "direct", uint32(8080), "u", "p", " tier=1")
	f.Add("", "gate.example", uint32(7777), "acct-session-{session}-cc-{country}", "x", " sessions=3 country=us session-ttl=1m")
	f.Add("", "gate.example", uint32(7777), "acct", "_session-{session}{", " sessions=2 rotate=off session-chars=ab")
	f.Fuzz(func(t *testing.T, head, host string, port uint32, user, mid, attrs string) {
		host = fuzzReadExitsClean(host, ":@[]")
		user = fuzzReadExitsClean(user, ":")
		mid = fuzzReadExitsClean(mid, "")
		attrs = strings.NewReplacer("\n", " ", "\r", " ").Replace(attrs)
		if attrs != "" {
			attrs = " " + attrs
		}
		for _, s := range []string{head, host, user, attrs} {
			if fuzzReadExitsMarked(s) {
				t.Skip("a marker outside the password")
			}
		}
		pass := fuzzReadExitsHead + mid + fuzzReadExitsTail
		line := host + ":" + strconv.FormatUint(uint64(port), 10) + ":" + user + ":" + pass + attrs
		in := head + "\n" + line + "\n"

		exits, err := ReadExits(strings.NewReader(in))
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, pass) || fuzzReadExitsMarked(msg) {
				t.Fatalf("ReadExits(%q) = error %q: shows the password %q", in, msg, pass)
			}
			if exits != nil {
				t.Fatalf("ReadExits(%q) = %d exits with error %v, want none", in, len(exits), err)
			}
			return
		}
		shown := exits
		if p, err := New(WithExits(exits...)); err == nil { // gateway templates mint their sessions
			shown = append(slices.Clone(exits), p.Exits()...)
		} else if msg := err.Error(); strings.Contains(msg, pass) || fuzzReadExitsMarked(msg) {
			t.Fatalf("New(ReadExits(%q)) = error %q: shows the password %q", in, msg, pass)
		}
		for _, e := range shown {
			j, _ := json.Marshal(e)
			for _, s := range []string{e.Label(), e.String(), e.GoString(), fmt.Sprintf("%+v", e), string(j)} {
				if fuzzReadExitsMarked(s) {
					t.Fatalf("ReadExits(%q): exit shows %q: the password %q", in, s, pass)
				}
			}
		}
		if strings.HasPrefix(host, "#") || len(exits) == 0 {
			return // our line was a comment
		}
		// Our line was read, as host:port:user:pass.
		u := exits[len(exits)-1].ProxyURL()
		got, _ := u.User.Password()
		if got != pass || u.User.Username() != user {
			t.Fatalf("ReadExits(%q): last exit's user, password = %q, %q, want %q, %q", in, u.User.Username(), got, user, pass)
		}
	})
}

// fuzzRedactSchemes are the schemes FuzzRedactRaw writes URLs with.
var fuzzRedactSchemes = [...]string{SchemeHTTP, SchemeHTTPS, SchemeSOCKS5, "SOCKS5H"}

// fuzzRedactProxy writes the proxy host:port with user and pass in the form form picks: a URL with
// its userinfo percent-encoded, a URL or user:pass@host:port as typed, or host:port:user:pass, and
// returns it if ParseExit reads pass back from it. A form ParseExit does not read that way (a pass
// with a '/' typed into a URL, say) falls back to the encoded URL; "" if that fails too.
func fuzzRedactProxy(form uint8, host string, port uint16, user, pass string) string {
	hp := net.JoinHostPort(host, strconv.Itoa(int(port)))
	scheme := fuzzRedactSchemes[form>>2%4]
	encoded := (&url.URL{Scheme: scheme, Host: hp, User: url.UserPassword(user, pass)}).String()
	var p string
	switch form % 4 {
	case 0:
		p = encoded
	case 1:
		p = scheme + "://" + user + ":" + pass + "@" + hp
	case 2:
		p = user + ":" + pass + "@" + hp
	default:
		p = hp + ":" + user + ":" + pass
	}
	for _, try := range []string{p, encoded} {
		if e, err := ParseExit(try); err == nil && e.ProxyURL().User != nil {
			if got, _ := e.ProxyURL().User.Password(); got == pass {
				return try
			}
		}
	}
	return ""
}

// FuzzRedactRaw writes one to three proxies, each in a form ParseExit reads (checked) and with a
// password made of fuzzReadExitsHead, a fuzzed middle and fuzzReadExitsTail, into a text — between
// and around fuzzed words, and maybe quoted into an error message — and checks that neither
// marker survives RedactRaw. In a text a password cannot hold white space (nor can it in a proxy
// list); a lone proxy's may, but for line breaks.
func FuzzRedactRaw(f *testing.F) {
	f.Add("", ", ", "", uint16(0), "proxy.example", uint16(8080), "user", "-PW", uint8(0))
	f.Add("proxies: ", " ", " failed", uint16(1|3<<2|2<<4|1<<6), "proxy.example", uint16(8080), "user-session-42", ":cr@t#PW", uint8(1))
	f.Add("", ",", "", uint16(2|1<<2|2<<4|3<<6|3<<8), "10.0.0.1", uint16(3128), "u", "@x.example:99", uint8(2))
	f.Add("x", "", "y", uint16(2|3<<2|3<<4), "::1", uint16(80), "me@mail.example", "a://b", uint8(3))
	f.Add("", "", "", uint16(3<<2), "proxy.example", uint16(0), "user", " spaced out ", uint8(0))
	f.Add("\"", "\" \"", "\"", uint16(2|2<<2|1<<4|7<<6), "h", uint16(1), "u", ":80:v:", uint8(1))
	f.Add("1:", ":2:", "@3", uint16(1|3<<2|3<<4|2<<6), "h", uint16(12), "u", "]//[", uint8(0))
	// Regression: ":" before a user:pass@host:port and "A" after it made a host:port:user:pass whose
	// "user" held the password, and RedactRaw showed it.
	f.Add(":", "0", "A", uint16(90), "0", uint16(6), "0", "0", uint8(0))
	f.Add("h:", "", "", uint16(2<<2), "host", uint16(1), "80", ":x", uint8(0))
	f.Fuzz(func(t *testing.T, pre, sep, post string, forms uint16, host string, port uint16, user, mid string, wrap uint8) {
		n := 1 + int(forms%3)
		lone := n == 1 && pre == "" && post == "" && wrap%4 == 0
		if lone {
			noBreak := strings.NewReplacer("\r", "", "\n", "")
			mid, user = noBreak.Replace(mid), noBreak.Replace(user)
		} else {
			mid = fuzzRedactNoSpace(mid)
			user = fuzzRedactNoSpace(user)
		}
		for _, s := range []string{pre, sep, post, host, user} {
			if fuzzReadExitsMarked(s) {
				t.Skip("a marker outside a password")
			}
		}
		var b strings.Builder
		b.WriteString(pre)
		for i := range n {
			pass := fuzzReadExitsHead + mid + strconv.Itoa(i) + fuzzReadExitsTail
			p := fuzzRedactProxy(uint8(forms>>(2+4*i)), host, port, user, pass)
			if p == "" {
				t.Skip("no form of this proxy parses")
			}
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(p)
		}
		b.WriteString(post)
		text := b.String()
		switch wrap % 4 {
		case 1:
			text = fmt.Sprintf("pool: proxy %q: malformed URL", text)
		case 2:
			text = (&url.Error{Op: "Get", URL: text, Err: fmt.Errorf("proxyconnect tcp: %s", text)}).Error()
		case 3:
			text = fmt.Errorf("pool: proxy list: %w", fmt.Errorf("line %d: %s", port, text)).Error()
		}

		got := RedactRaw(text)
		if fuzzReadExitsMarked(got) {
			t.Fatalf("RedactRaw(%q) = %q: shows a password", text, got)
		}
		if again := RedactRaw(got); fuzzReadExitsMarked(again) {
			t.Fatalf("RedactRaw(RedactRaw(%q)) = %q: shows a password", text, again)
		}
		// Text with nothing a credential needs comes back as it was.
		if plain := pre + sep + post; !strings.ContainsAny(plain, ":@") {
			if r := RedactRaw(plain); r != plain {
				t.Fatalf("RedactRaw(%q) = %q, want it unchanged (no ':' or '@')", plain, r)
			}
		}
	})
}

// fuzzRedactNoSpace drops ASCII white space, which ends a password in a text.
func fuzzRedactNoSpace(s string) string {
	return strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf && unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}
