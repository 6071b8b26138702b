package pool

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// exitSecret is the password every test in this file uses, so a leak is a substring search.
const exitSecret = "s3cr3t-PW"

// exitNoSecret fails the test if s shows the password (or a telling piece of it).
func exitNoSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, piece := range []string{exitSecret, "s3cr3t", "cr@t#PW", "cr%40t"} {
		if strings.Contains(s, piece) {
			t.Errorf("%s = %q: shows the password (%q)", what, s, piece)
		}
	}
}

func TestParseExitForms(t *testing.T) {
	tests := []struct {
		raw       string
		scheme    string
		host      string // ProxyURL().Host
		user      string
		pass      string
		hasPass   bool
		label     string
		noUserSet bool // ProxyURL().User == nil
	}{
		// Full URLs, each scheme, with and without credentials and port.
		{raw: "http://user:s3cr3t-PW@proxy.example:8080", scheme: "http", host: "proxy.example:8080",
			user: "user", pass: exitSecret, hasPass: true, label: "http://user:xxxxx@proxy.example:8080"},
		{raw: "https://user:s3cr3t-PW@proxy.example", scheme: "https", host: "proxy.example:443",
			user: "user", pass: exitSecret, hasPass: true, label: "https://user:xxxxx@proxy.example:443"},
		{raw: "socks5://user:s3cr3t-PW@proxy.example", scheme: "socks5", host: "proxy.example:1080",
			user: "user", pass: exitSecret, hasPass: true, label: "socks5://user:xxxxx@proxy.example:1080"},
		{raw: "socks5h://user:s3cr3t-PW@proxy.example:9050", scheme: "socks5h", host: "proxy.example:9050",
			user: "user", pass: exitSecret, hasPass: true, label: "socks5h://user:xxxxx@proxy.example:9050"},
		{raw: "http://proxy.example", scheme: "http", host: "proxy.example:80", noUserSet: true,
			label: "http://proxy.example:80"},
		{raw: "https://proxy.example:8443", scheme: "https", host: "proxy.example:8443", noUserSet: true,
			label: "https://proxy.example:8443"},
		{raw: "socks5://proxy.example", scheme: "socks5", host: "proxy.example:1080", noUserSet: true,
			label: "socks5://proxy.example:1080"},
		{raw: "socks5h://proxy.example", scheme: "socks5h", host: "proxy.example:1080", noUserSet: true,
			label: "socks5h://proxy.example:1080"},
		{raw: "http://user@proxy.example:3128", scheme: "http", host: "proxy.example:3128", user: "user",
			label: "http://user@proxy.example:3128"},
		{raw: "http://proxy.example:3128/", scheme: "http", host: "proxy.example:3128", noUserSet: true,
			label: "http://proxy.example:3128"},
		{raw: "http://user:s3cr3t-PW@[::1]:8080", scheme: "http", host: "[::1]:8080",
			user: "user", pass: exitSecret, hasPass: true, label: "http://user:xxxxx@[::1]:8080"},
		// Scheme case-folding.
		{raw: "HTTP://proxy.example:3128", scheme: "http", host: "proxy.example:3128", noUserSet: true,
			label: "http://proxy.example:3128"},
		{raw: "SOCKS5H://user:s3cr3t-PW@proxy.example", scheme: "socks5h", host: "proxy.example:1080",
			user: "user", pass: exitSecret, hasPass: true, label: "socks5h://user:xxxxx@proxy.example:1080"},
		{raw: "Https://proxy.example", scheme: "https", host: "proxy.example:443", noUserSet: true,
			label: "https://proxy.example:443"},
		// user:pass@host:port, http assumed.
		{raw: "user:s3cr3t-PW@proxy.example:8080", scheme: "http", host: "proxy.example:8080",
			user: "user", pass: exitSecret, hasPass: true, label: "http://user:xxxxx@proxy.example:8080"},
		{raw: "user:s3cr3t-PW@proxy.example", scheme: "http", host: "proxy.example:80",
			user: "user", pass: exitSecret, hasPass: true, label: "http://user:xxxxx@proxy.example:80"},
		{raw: "user:s3:cr3t-PW@proxy.example:8080", scheme: "http", host: "proxy.example:8080",
			user: "user", pass: "s3:cr3t-PW", hasPass: true, label: "http://user:xxxxx@proxy.example:8080"},
		{raw: "user:s3cr3t@PW@proxy.example:8080", scheme: "http", host: "proxy.example:8080",
			user: "user", pass: "s3cr3t@PW", hasPass: true, label: "http://user:xxxxx@proxy.example:8080"},
		// host:port:user:pass, the provider format; the password may hold ':', '@', '#' and "://".
		{raw: "proxy.example:8080:user:s3cr3t-PW", scheme: "http", host: "proxy.example:8080",
			user: "user", pass: exitSecret, hasPass: true, label: "http://user:xxxxx@proxy.example:8080"},
		{raw: "proxy.example:8080:user-session-42:s3:cr@t#PW", scheme: "http", host: "proxy.example:8080",
			user: "user-session-42", pass: "s3:cr@t#PW", hasPass: true,
			label: "http://user-session-42:xxxxx@proxy.example:8080"},
		{raw: "proxy.example:8080:user:s3cr3t@PW", scheme: "http", host: "proxy.example:8080",
			user: "user", pass: "s3cr3t@PW", hasPass: true, label: "http://user:xxxxx@proxy.example:8080"},
		{raw: "proxy.example:8080:user:s3cr3t@PW:99", scheme: "http", host: "proxy.example:8080",
			user: "user", pass: "s3cr3t@PW:99", hasPass: true, label: "http://user:xxxxx@proxy.example:8080"},
		{raw: "proxy.example:8080:user:a://s3cr3t-PW", scheme: "http", host: "proxy.example:8080",
			user: "user", pass: "a://s3cr3t-PW", hasPass: true, label: "http://user:xxxxx@proxy.example:8080"},
		{raw: "proxy.example:8080:me@mail.example:s3cr3t-PW", scheme: "http", host: "proxy.example:8080",
			user: "me@mail.example", pass: exitSecret, hasPass: true,
			label: "http://me%40mail.example:xxxxx@proxy.example:8080"},
		{raw: "10.0.0.1:3128:user:s3cr3t-PW", scheme: "http", host: "10.0.0.1:3128",
			user: "user", pass: exitSecret, hasPass: true, label: "http://user:xxxxx@10.0.0.1:3128"},
		{raw: "[::1]:8080:user:s3cr3t-PW", scheme: "http", host: "[::1]:8080",
			user: "user", pass: exitSecret, hasPass: true, label: "http://user:xxxxx@[::1]:8080"},
		{raw: "[::1]:8080:user:s3:cr@t#PW", scheme: "http", host: "[::1]:8080",
			user: "user", pass: "s3:cr@t#PW", hasPass: true, label: "http://user:xxxxx@[::1]:8080"},
		{raw: "proxy.example:8080:user:", scheme: "http", host: "proxy.example:8080",
			user: "user", pass: "", hasPass: true, label: "http://user:xxxxx@proxy.example:8080"},
		// host:port, http, no credentials.
		{raw: "proxy.example:8080", scheme: "http", host: "proxy.example:8080", noUserSet: true,
			label: "http://proxy.example:8080"},
		{raw: "[::1]:8080", scheme: "http", host: "[::1]:8080", noUserSet: true, label: "http://[::1]:8080"},
		{raw: "http://proxy.example:", scheme: "http", host: "proxy.example:80", noUserSet: true,
			label: "http://proxy.example:80"},
		{raw: "  proxy.example:8080\t", scheme: "http", host: "proxy.example:8080", noUserSet: true,
			label: "http://proxy.example:8080"},
	}
	for i, tt := range tests {
		e, err := ParseExit(tt.raw)
		if err != nil {
			t.Errorf("%d: ParseExit(%q) = error %q, want nil", i, tt.raw, err)
			continue
		}
		u := e.ProxyURL()
		if e.Scheme() != tt.scheme || u.Scheme != tt.scheme {
			t.Errorf("%d: ParseExit(%q).Scheme() = %q (URL %q), want %q", i, tt.raw, e.Scheme(), u.Scheme, tt.scheme)
		}
		if u.Host != tt.host {
			t.Errorf("%d: ParseExit(%q).ProxyURL().Host = %q, want %q", i, tt.raw, u.Host, tt.host)
		}
		if u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
			t.Errorf("%d: ParseExit(%q).ProxyURL() = %#v, want no path, query, fragment or opaque", i, tt.raw, u)
		}
		switch {
		case tt.noUserSet:
			if u.User != nil {
				t.Errorf("%d: ParseExit(%q).ProxyURL().User = %v, want nil", i, tt.raw, u.User.Username())
			}
		case u.User == nil:
			t.Errorf("%d: ParseExit(%q).ProxyURL().User = nil, want user %q", i, tt.raw, tt.user)
		default:
			pass, has := u.User.Password()
			if u.User.Username() != tt.user || pass != tt.pass || has != tt.hasPass {
				t.Errorf("%d: ParseExit(%q) credentials = %q, %q, %v, want %q, %q, %v",
					i, tt.raw, u.User.Username(), pass, has, tt.user, tt.pass, tt.hasPass)
			}
		}
		if e.Label() != tt.label {
			t.Errorf("%d: ParseExit(%q).Label() = %q, want %q", i, tt.raw, e.Label(), tt.label)
		}
		if e.Tier() != 0 || e.Weight() != 1 {
			t.Errorf("%d: ParseExit(%q) tier, weight = %d, %v, want 0, 1", i, tt.raw, e.Tier(), e.Weight())
		}
		if tt.pass != "" {
			exitNoSecret(t, fmt.Sprintf("%d: ParseExit(%q).Label()", i, tt.raw), e.Label())
		}
	}
}

func TestParseExitErrors(t *testing.T) {
	tests := []struct {
		raw  string
		want string // a substring of the error
	}{
		{"", "empty proxy address"},
		{" \t ", "empty proxy address"},
		{"ftp://user:s3cr3t-PW@proxy.example:21", `scheme "ftp" not supported`},
		{"gopher://proxy.example", `scheme "gopher" not supported`},
		{"http://user:s3cr3t-PW@proxy.example:8080/path", "no path, query or fragment"},
		{"http://user:s3cr3t-PW@proxy.example:8080/?a=b", "no path, query or fragment"},
		{"http://user:s3cr3t-PW@proxy.example:8080?a=b", "no path, query or fragment"},
		{"http://user:s3cr3t-PW@proxy.example:8080#frag", "no path, query or fragment"},
		{"user:s3cr3t-PW@proxy.example:8080/path", "no path, query or fragment"},
		{"http://user:s3cr3t-PW@:8080", "missing host"},
		{"http://", "missing host"},
		{"socks5://user:s3cr3t-PW@", "missing host"},
		{":8080:user:s3cr3t-PW", "missing host"},
		{"http://user:s3cr3t-PW@proxy.example:0", `bad port "0"`},
		{"http://user:s3cr3t-PW@proxy.example:70000", `bad port "70000"`},
		{"user:s3cr3t-PW@proxy.example:70000", `bad port "70000"`},
		{"proxy.example:0:user:s3cr3t-PW", `bad port "0"`},
		{"proxy.example:70000:user:s3cr3t-PW", `bad port "70000"`},
		{"proxy.example:abc", `bad port "abc"`},
		{"[::1]:abc", `bad port "abc"`},
		{"[::1]:abc:user:s3cr3t-PW", `bad port "abc"`},
		{"proxy.example:abc:user:s3cr3t-PW", `bad port "abc"`},
		{"http://user:s3cr3t-PW@proxy.example:abc", "malformed URL"},
		{"user:s3cr3t-PW@proxy.example:abc", "malformed address"},
		{"http://user:s3cr3t-PW@proxy example:8080", "malformed URL"},
		{"http://user:s3cr3t-PW@[::1:8080", "malformed URL"},
		{"http://user:s3cr3t%zzPW@proxy.example:8080", "malformed URL"},
		{"http://user:s3cr3t-PW@proxy.example:8080\x7f", "malformed URL"},
		{"proxy.example", "want host:port"},
		{"proxy.example:8080:user", "want host:port:user:pass"},
		{"proxy.example:8080::s3cr3t-PW", "want host:port:user:pass"},
		{"[::1:8080:user:s3cr3t-PW", "unterminated IPv6 literal"},
		{"[::1]", "want host:port"},
	}
	for i, tt := range tests {
		e, err := ParseExit(tt.raw)
		if err == nil {
			t.Errorf("%d: ParseExit(%q) = %v, nil, want error containing %q", i, tt.raw, e, tt.want)
			continue
		}
		if e != nil {
			t.Errorf("%d: ParseExit(%q) = %v, %v, want a nil exit with the error", i, tt.raw, e, err)
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.want) {
			t.Errorf("%d: ParseExit(%q) = error %q, want error containing %q", i, tt.raw, msg, tt.want)
		}
		if !strings.HasPrefix(msg, "pool: ") {
			t.Errorf("%d: ParseExit(%q) = error %q, want the prefix %q", i, tt.raw, msg, "pool: ")
		}
		exitNoSecret(t, fmt.Sprintf("%d: ParseExit(%q) error", i, tt.raw), msg)
		exitNoSecret(t, fmt.Sprintf("%d: ParseExit(%q) error %%#v", i, tt.raw), fmt.Sprintf("%#v", err))
		if strings.Contains(tt.raw, "s3cr3t") && !strings.Contains(msg, "xxxxx") {
			t.Errorf("%d: ParseExit(%q) = error %q, want it to name the input with the password as xxxxx", i, tt.raw, msg)
		}
	}
}

func TestMustParseExitPanicsWithoutPassword(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil {
			t.Fatalf("MustParseExit(%q) did not panic", "ftp://user:"+exitSecret+"@proxy.example")
		}
		exitNoSecret(t, "MustParseExit panic", fmt.Sprint(r))
	}()
	MustParseExit("ftp://user:" + exitSecret + "@proxy.example")
}

func TestExitNeverShowsPassword(t *testing.T) {
	e := MustParseExit("http://user:" + exitSecret + "@proxy.example:8080")
	const label = "http://user:xxxxx@proxy.example:8080"
	if got := e.Label(); got != label {
		t.Errorf("Label() = %q, want %q", got, label)
	}
	if got := e.String(); got != label {
		t.Errorf("String() = %q, want %q", got, label)
	}
	if got, want := e.GoString(), `pool.Exit("`+label+`")`; got != want {
		t.Errorf("GoString() = %q, want %q", got, want)
	}
	shown := map[string]string{
		"%v":             fmt.Sprintf("%v", e),
		"%+v":            fmt.Sprintf("%+v", e),
		"%#v":            fmt.Sprintf("%#v", e),
		"%s":             fmt.Sprintf("%s", e),
		"%q":             fmt.Sprintf("%q", e),
		"%v value":       fmt.Sprintf("%v", *e),
		"%+v value":      fmt.Sprintf("%+v", *e),
		"%#v value":      fmt.Sprintf("%#v", *e),
		"%v slice":       fmt.Sprintf("%v", []*Exit{e, e}),
		"%+v struct":     fmt.Sprintf("%+v", struct{ E *Exit }{e}),
		"%#v struct":     fmt.Sprintf("%#v", struct{ E *Exit }{e}),
		"%v map":         fmt.Sprintf("%v", map[string]*Exit{"a": e}),
		"refusal":        (&NoHealthyExitError{Origin: e.Label(), Exits: 1}).Error(),
		"%v with label":  fmt.Sprintf("%v", e.WithLabel("dc-1")),
		"%#v with tier":  fmt.Sprintf("%#v", e.WithTier(3)),
		"%+v with weigh": fmt.Sprintf("%+v", e.WithWeight(2)),
	}
	for what, s := range shown {
		exitNoSecret(t, what, s)
	}
	for _, v := range []any{e, *e, []*Exit{e}, struct{ E *Exit }{e}, map[string]*Exit{"a": e}} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Errorf("json.Marshal(%T) = error %v, want nil", v, err)
			continue
		}
		exitNoSecret(t, fmt.Sprintf("json.Marshal(%T)", v), string(b))
	}
	b, err := json.Marshal(e.WithTier(1).WithWeight(2.5))
	if want := `{"label":"` + label + `","tier":1,"weight":2.5}`; err != nil || string(b) != want {
		t.Errorf("json.Marshal(exit) = %s, %v, want %s, nil", b, err, want)
	}

	u := e.ProxyURL()
	if pass, _ := u.User.Password(); pass != exitSecret {
		t.Errorf("ProxyURL().User.Password() = %q, want %q", pass, exitSecret)
	}
	// ProxyURL is a copy: changing it changes nothing in the exit.
	u.User = url.UserPassword("mallory", "changed")
	u.Host = "evil.example:1"
	if pass, _ := e.ProxyURL().User.Password(); pass != exitSecret || e.ProxyURL().Host != "proxy.example:8080" {
		t.Errorf("ProxyURL() after changing an earlier copy = %q, %q, want %q, %q",
			e.ProxyURL().Host, pass, "proxy.example:8080", exitSecret)
	}
}

func TestExitWithCopies(t *testing.T) {
	e := MustParseExit("proxy.example:8080:user:" + exitSecret)
	redacted := e.Label()

	l := e.WithLabel("dc-1")
	if l.Label() != "dc-1" || l.String() != "dc-1" || e.Label() != redacted {
		t.Errorf("WithLabel(%q) = %q, original %q, want %q, original %q", "dc-1", l.Label(), e.Label(), "dc-1", redacted)
	}
	if got := l.WithLabel("").Label(); got != redacted {
		t.Errorf("WithLabel(%q).WithLabel(%q).Label() = %q, want %q", "dc-1", "", got, redacted)
	}
	if pass, _ := l.ProxyURL().User.Password(); pass != exitSecret {
		t.Errorf("WithLabel(%q).ProxyURL() password = %q, want %q", "dc-1", pass, exitSecret)
	}

	tr := e.WithTier(2)
	if tr.Tier() != 2 || e.Tier() != 0 || tr.Label() != redacted {
		t.Errorf("WithTier(2) = tier %d label %q, original tier %d, want 2, %q, 0", tr.Tier(), tr.Label(), e.Tier(), redacted)
	}
	w := e.WithWeight(2.5)
	if w.Weight() != 2.5 || e.Weight() != 1 || w.Label() != redacted {
		t.Errorf("WithWeight(2.5) = weight %v label %q, original %v, want 2.5, %q, 1", w.Weight(), w.Label(), e.Weight(), redacted)
	}
	all := e.WithLabel("res-7").WithTier(1).WithWeight(3)
	if all.Label() != "res-7" || all.Tier() != 1 || all.Weight() != 3 || all.Scheme() != SchemeHTTP {
		t.Errorf("chained With = %q, %d, %v, %q, want %q, 1, 3, %q", all.Label(), all.Tier(), all.Weight(), all.Scheme(), "res-7", SchemeHTTP)
	}
	if l == e || tr == e || w == e {
		t.Errorf("With methods returned the receiver itself, want copies")
	}
}

func TestNewExit(t *testing.T) {
	u := &url.URL{Scheme: "SOCKS5", Host: "proxy.example", User: url.UserPassword("user", exitSecret)}
	e, err := NewExit(u)
	if err != nil {
		t.Fatalf("NewExit(%v) = error %v, want nil", u.Redacted(), err)
	}
	if got, want := e.Label(), "socks5://user:xxxxx@proxy.example:1080"; got != want {
		t.Errorf("NewExit(...).Label() = %q, want %q", got, want)
	}
	// NewExit copies u: later changes to it do not reach the exit, and the exit's
	// normalisation does not reach u.
	u.Host = "evil.example:1"
	u.User = url.UserPassword("mallory", "x")
	if got := e.ProxyURL(); got.Host != "proxy.example:1080" || got.User.Username() != "user" {
		t.Errorf("NewExit(u).ProxyURL() after changing u = %v, want host proxy.example:1080, user user", got.Redacted())
	}
	if u.Scheme != "SOCKS5" {
		t.Errorf("NewExit(u) changed u.Scheme to %q, want it untouched", u.Scheme)
	}

	if _, err := NewExit(nil); err == nil {
		t.Errorf("NewExit(nil) = nil error, want an error")
	}
	bad := &url.URL{Scheme: "ftp", Host: "proxy.example", User: url.UserPassword("user", exitSecret)}
	_, err = NewExit(bad)
	if err == nil || !strings.Contains(err.Error(), `scheme "ftp"`) {
		t.Errorf("NewExit(ftp URL) = %v, want a scheme error", err)
	}
	if err != nil {
		exitNoSecret(t, "NewExit(ftp URL) error", err.Error())
	}
}

func TestRedactRaw(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"proxy.example:8080", "proxy.example:8080"},
		{"http://proxy.example:8080", "http://proxy.example:8080"},
		{"http://user@proxy.example", "http://user@proxy.example"},
		{"http://user:s3cr3t-PW@proxy example:8080", "http://user:xxxxx@proxy example:8080"},
		{"socks5://user:s3cr3t-PW@[::1", "socks5://user:xxxxx@[::1"},
		{"http://user:s3cr3t%zzPW@proxy.example", "http://user:xxxxx@proxy.example"},
		{"http://user:s3cr3t@PW@proxy.example", "http://user:xxxxx@proxy.example"},
		{"user:s3cr3t-PW@", "user:xxxxx@"},
		{"user:s3cr3t-PW@proxy.example:abc", "user:xxxxx@proxy.example:abc"},
		{"proxy.example:8080:user:s3cr3t-PW", "proxy.example:8080:user:xxxxx"},
		{"proxy.example:abc:user:s3cr3t-PW", "proxy.example:abc:user:xxxxx"},
		// An '@' in a host:port:user:pass also reads as user:pass@host: both readings are hidden.
		{"proxy.example:8080:user:s3:cr@t#PW", "proxy.example:xxxxx"},
		{"proxy.example:8080:user:a://s3cr3t-PW", "proxy.example:8080:user:xxxxx"},
		{"proxy.example:abc:user:a://s3cr3t-PW", "proxy.example:abc:user:xxxxx"},
		{"proxy.example:8080:me@mail.example:s3cr3t-PW", "proxy.example:xxxxx@mail.example:xxxxx"},
		{"[::1]:8080:user:s3cr3t-PW", "[::1]:8080:user:xxxxx"},
		{"[::1]:abc:user:s3cr3t-PW", "[::1]:abc:user:xxxxx"},
		{"[::1]:8080:user:s3cr3t@PW", "[::1]:xxxxx"},
		// A lone proxy's password may hold spaces.
		{"proxy.example:8080:user:s3cr3t PW", "proxy.example:8080:user:xxxxx"},
		{"proxy.example:abc:user:s3cr3t PW", "proxy.example:abc:user:xxxxx"},
		{"http://user:s3cr3t PW@proxy.example", "http://user:xxxxx@proxy.example"},
		{"http://user:s3 cr3t PW@proxy.example", "http://user:xxxxx@proxy.example"},
		// Regression: the provider format after a scheme was shown whole (ParseExit: "malformed URL").
		{"http://proxy.example:8080:user:s3cr3t-PW", "http://proxy.example:8080:user:xxxxx"},
		{"socks5h://[::1]:1080:user:s3cr3t-PW", "socks5h://[::1]:1080:user:xxxxx"},
		{"http://proxy.example:abc:user:s3cr3t-PW", "http://proxy.example:abc:user:xxxxx"},
		// Text without credentials is left alone.
		{"dial tcp [::1]:8080: connect: connection refused", "dial tcp [::1]:8080: connect: connection refused"},
		{"pool: proxy list: line 4: bad port \"0\"", "pool: proxy list: line 4: bad port \"0\""},
		{"write to me@mail.example: quota", "write to me@mail.example: quota"},
	}
	for i, tt := range tests {
		got := RedactRaw(tt.in)
		if got != tt.want {
			t.Errorf("%d: RedactRaw(%q) = %q, want %q", i, tt.in, got, tt.want)
		}
		exitNoSecret(t, fmt.Sprintf("%d: RedactRaw(%q)", i, tt.in), got)
	}
}

// Regression: RedactRaw hid one password of a string that named several proxies and showed the
// others.
func TestRedactRawSeveralProxies(t *testing.T) {
	tests := []struct{ in, want string }{
		// Two proxies.
		{"http://u1:s3cr3t-PW1@a.example:80 b.example:81:u2:s3cr3t-PW2",
			"http://u1:xxxxx@a.example:80 b.example:81:u2:xxxxx"},
		{"http://u1:s3cr3t-PW1@a.example:80, http://u2:s3cr3t-PW2@b.example:81",
			"http://u1:xxxxx@a.example:80, http://u2:xxxxx@b.example:81"},
		{"u1:s3cr3t-PW1@a.example:80 u2:s3cr3t-PW2@b.example:81",
			"u1:xxxxx@a.example:80 u2:xxxxx@b.example:81"},
		{"a.example:80:u1:s3cr3t-PW1\nb.example:81:u2:s3cr3t-PW2",
			"a.example:80:u1:xxxxx\nb.example:81:u2:xxxxx"},
		{"socks5://u1:s3cr3t-PW1@a.example,socks5h://u2:s3cr3t-PW2@b.example", // no space: one word
			"socks5://u1:xxxxx@b.example"},
		{"a.example:80:u1:s3cr3t-PW1,http://u2:s3cr3t-PW2@b.example:81", "a.example:xxxxx"}, // reads both ways
		{"a.example:80:u1:s3cr3t PW1\r\nb.example:abc:u2:s3cr3t PW2", "a.example:80:u1:xxxxx\r\nb.example:abc:u2:xxxxx"},
		// Three, in every form, as a flag value and as the errors that quote them.
		{"-exits http://u1:s3cr3t-PW1@a.example:80 u2:s3cr3t%40PW2@b.example:81 [::1]:82:u3:s3:cr@t#PW3",
			"-exits http://u1:xxxxx@a.example:80 u2:xxxxx@b.example:81 [::1]:xxxxx"},
		{`pool: Remove: no exit labelled "http://u1:s3cr3t-PW1@a.example:80"; no exit labelled "b.example:81:u2:s3cr3t-PW2"; no exit labelled "u3:s3cr3t-PW3@c.example"`,
			`pool: Remove: no exit labelled "http://u1:xxxxx@a.example:80"; no exit labelled "b.example:81:u2:xxxxx no exit labelled "u3:xxxxx@c.example"`},
		{`parse "http://u1:s3cr3t-PW1@a.example:abc": invalid port ":abc" after host; proxyconnect tcp b.example:81:u2:s3cr3t-PW2: refused; Get "https://u3:s3cr3t-PW3@c.example/"`,
			`parse "http://u1:xxxxx@a.example:abc": invalid port ":abc" after host; proxyconnect tcp b.example:81:u2:xxxxx refused; Get "https://u3:xxxxx@c.example/"`},
	}
	for i, tt := range tests {
		got := RedactRaw(tt.in)
		if got != tt.want {
			t.Errorf("%d: RedactRaw(%q) = %q, want %q", i, tt.in, got, tt.want)
		}
		if strings.Contains(got, "s3cr3t") || strings.Contains(got, "PW") {
			t.Errorf("%d: RedactRaw(%q) = %q: shows a password", i, tt.in, got)
		}
		err := fmt.Errorf("pool: %w", errors.New(tt.in))
		if got := RedactRaw(err.Error()); strings.Contains(got, "s3cr3t") {
			t.Errorf("%d: RedactRaw(wrapped error %q) = %q: shows a password", i, err, got)
		}
	}
}

// Regression: a provider-format line whose password held an '@' was read as user:pass@host:port,
// rejected, and the error showed the part of the password after the '@'.
func TestParseExitProviderPasswordWithAtIsNotUserinfo(t *testing.T) {
	for _, raw := range []string{
		"proxy.example:8080:user:s3cr3t@PW.tail",
		"proxy.example:8080:user:s3cr3t@PW#tail",
		"[::1]:8080:user:s3cr3t@PW.tail",
	} {
		e, err := ParseExit(raw)
		if err != nil {
			t.Errorf("ParseExit(%q) = error %q, want nil", raw, err)
			exitNoSecret(t, "error", err.Error())
			if strings.Contains(err.Error(), "tail") {
				t.Errorf("ParseExit(%q) = error %q: shows the end of the password", raw, err)
			}
			continue
		}
		want := raw[strings.Index(raw, "user:")+len("user:"):]
		if pass, _ := e.ProxyURL().User.Password(); pass != want {
			t.Errorf("ParseExit(%q) password = %q, want %q", raw, pass, want)
		}
	}
}

// Regression: a provider-format line whose password held "://" was read as a URL and the error
// ("scheme not supported") printed the whole line, password included.
func TestParseExitProviderPasswordWithSchemeSeparator(t *testing.T) {
	raw := "proxy.example:8080:user:x://" + exitSecret
	e, err := ParseExit(raw)
	if err != nil {
		exitNoSecret(t, fmt.Sprintf("ParseExit(%q) error", raw), err.Error())
		t.Fatalf("ParseExit(%q) = error %v, want nil", raw, err)
	}
	if pass, _ := e.ProxyURL().User.Password(); pass != "x://"+exitSecret {
		t.Errorf("ParseExit(%q) password = %q, want %q", raw, pass, "x://"+exitSecret)
	}
	// With a bad port it is an error, and the error still hides the password.
	raw = "proxy.example:80a:user:x://" + exitSecret
	if _, err := ParseExit(raw); err == nil {
		t.Errorf("ParseExit(%q) = nil error, want an error", raw)
	} else {
		exitNoSecret(t, fmt.Sprintf("ParseExit(%q) error", raw), err.Error())
	}
}

// Regression: url.URL.Port ignores a port that is not a number, so "proxy.example:abc" was taken
// as the host "proxy.example:abc" on port 80 instead of a bad port.
func TestParseExitNonNumericPortIsBadPort(t *testing.T) {
	for _, raw := range []string{"proxy.example:abc", "proxy.example:8o80:user:" + exitSecret, "[::1]:abc"} {
		e, err := ParseExit(raw)
		if err == nil || !strings.Contains(err.Error(), "bad port") {
			t.Errorf("ParseExit(%q) = %v, %v, want a bad port error", raw, e, err)
		}
	}
	u := &url.URL{Scheme: "http", Host: "proxy.example:abc"}
	if e, err := NewExit(u); err == nil || !strings.Contains(err.Error(), `bad port "abc"`) {
		t.Errorf("NewExit(%v) = %v, %v, want a bad port error", u, e, err)
	}
}
