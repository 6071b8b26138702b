package proxyd

import (
	"net/http"
	"strings"
	"testing"
)

func TestParseOptions(t *testing.T) {
	for _, c := range []struct {
		in                  string
		session, exit, want string
	}{
		{"", "", "", ""},
		{"session-abc", "abc", "", ""},
		{"session-abc-country-us", "abc", "", "country=us"},
		{"country-us,ca-tier-1", "", "", "country=ca,us tier=1"},
		{"city-nyc-exit-dc-1", "", "dc-1", "city=nyc"},
		{"exit-http://u:xxxxx@h:1", "", "http://u:xxxxx@h:1", ""},
	} {
		o, err := ParseOptions(c.in)
		if err != nil {
			t.Errorf("ParseOptions(%q): %v", c.in, err)
			continue
		}
		if o.Session != c.session || o.Exit != c.exit || o.Want.String() != c.want {
			t.Errorf("ParseOptions(%q) = session %q exit %q want %q; want %q %q %q", c.in, o.Session, o.Exit, o.Want, c.session, c.exit, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"session", "want key-value pairs"},
		{"session-", "session: empty value"},
		{"session-a-session-b", "session given twice"},
		{"session-a,b", "an id, not a list"},
		{"country-u s", "byte 2 of its value"},
		{"tier-x", `tier "x": want a decimal integer`},
		{"Country-us", "want a lower-case letter first"},
		{"exit-", "exit: empty label"},
		{"country-us,", "empty alternative"},
		{"-x", "want key-value pairs"},
		{"session-secret42-bogus", "want key-value pairs"},
	} {
		_, err := ParseOptions(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParseOptions(%q) = %v, want an error containing %q", c.in, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret42") {
			t.Errorf("ParseOptions(%q) error %q shows the session id", c.in, err)
		}
	}
}

func TestOptionsMerge(t *testing.T) {
	profile, _ := ParseOptions("country-us")
	req, _ := ParseOptions("session-s-tier-1")
	m, err := profile.Merge(req)
	if err != nil || m.Session != "s" || m.Want.String() != "country=us tier=1" {
		t.Errorf("Merge = %+v, %v; want session s, want country=us tier=1", m, err)
	}
	if _, err := m.Merge(req); err == nil {
		t.Error("Merge of two sessions: nil error, want one")
	}
	again, _ := ParseOptions("country-ca")
	if _, err := profile.Merge(again); err == nil || !strings.Contains(err.Error(), "country twice") {
		t.Errorf("Merge of two countries: %v, want an error naming country", err)
	}
}

// TestUsernameSteersThePick: the username's options pick among the exits by attribute, tier and
// label; a profile listener's fixed options apply to every request on it; a bad option is a 400
// whose body and Proxy-Status say why.
func TestUsernameSteersThePick(t *testing.T) {
	w := newWorld(t, Config{AllowPrivate: true}, "",
		exitSpec{label: "us0", attrs: "country=us"}, exitSpec{label: "us1", attrs: "country=us tier=1"},
		exitSpec{label: "de0", attrs: "country=de"})
	srv, _ := w.origin(false)
	for _, c := range []struct {
		user string
		want []string
	}{
		{"me-country-us", []string{"us0", "us1"}},
		{"me-country-de", []string{"de0"}},
		{"me-tier-1", []string{"us1"}},
		{"me-exit-de0", []string{"de0"}},
		{"me-country-us-tier-0", []string{"us0"}},
	} {
		c2 := w.client(c.user+":x", nil, nil)
		for range 12 {
			_, body, _ := get(t, c2, srv.URL)
			if got := strings.TrimPrefix(body, "hello from "); !contains(c.want, got) {
				t.Errorf("user %s went through %q, want one of %v", c.user, got, c.want)
			}
		}
	}
	code, body, ps := get(t, w.client("me-country-u s:x", nil, nil), srv.URL)
	if code != http.StatusBadRequest || !strings.Contains(body, "country: byte 2") || len(ps) != 1 || !strings.Contains(ps[0], "error=http_request_error") {
		t.Errorf("a bad option: %d %q %q, want 400 with the reason and a Proxy-Status error", code, body, ps)
	}

	// A profile listener: its options hold for every request on it.
	w2 := newWorld(t, Config{AllowPrivate: true}, "country-de", exitSpec{label: "us0", attrs: "country=us"}, exitSpec{label: "de0", attrs: "country=de"})
	srv2, _ := w2.origin(false)
	for range 6 {
		if _, body, _ := get(t, w2.client("", nil, nil), srv2.URL); body != "hello from de0" {
			t.Errorf("profile country-de: %q, want hello from de0", body)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
