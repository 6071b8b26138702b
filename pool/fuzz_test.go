package pool

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode"
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
		for _, e := range exits {
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
