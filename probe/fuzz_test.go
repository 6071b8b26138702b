package probe_test

import (
	"net/url"
	"strings"
	"testing"

	"github.com/proxybreaker/proxybreaker/probe"
)

// FuzzReadTargets: ReadTargets never panics, accepts only absolute http(s) URLs with a host, and
// never shows the password of a target it rejects.
func FuzzReadTargets(f *testing.F) {
	f.Add("https://shop.example/robots.txt\n# comment\n\nhttp://127.0.0.1:8080/x", "secret")
	f.Add("ftp://x/\n::\nhttp://[::1\n", "p")
	f.Add("http://\nhttps:///path\nhttp://u:p@h/", "")
	f.Fuzz(func(t *testing.T, head, mid string) {
		clean := strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, mid)
		pass := "pwQ" + clean + "Qpw"
		if strings.Contains(head, "pwQ") || strings.Contains(head, "Qpw") {
			t.Skip("a marker outside the password")
		}
		in := head + "\nftp://user:" + pass + "@127.0.0.1/\n"
		targets, err := probe.ReadTargets(strings.NewReader(in))
		if err == nil {
			t.Fatalf("ReadTargets(%q) accepted an ftp URL: %q", in, targets)
		}
		if strings.Contains(err.Error(), pass) || strings.Contains(err.Error(), "pwQ") {
			t.Fatalf("ReadTargets(%q) = %v: shows the password", in, err)
		}
		targets, err = probe.ReadTargets(strings.NewReader(head))
		if err != nil {
			return
		}
		for _, raw := range targets {
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
				t.Fatalf("ReadTargets(%q) accepted %q", head, raw)
			}
		}
	})
}
